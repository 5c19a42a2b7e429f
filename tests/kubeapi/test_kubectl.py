"""kubectl against the in-memory API server run as a process (``python -m tests.kubeapi``):
what a user typing these commands sees. Marked ``kubectl``: left out, and counted in the
run's closing line, where no kubectl is on PATH."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.scenario, pytest.mark.kubectl]

ROOT = Path(__file__).resolve().parents[2]
Json = dict[str, Any]


@dataclass
class Served:
    kubeconfig: Path
    url: str
    folder: Path

    def kubectl(
        self, *args: str, kubeconfig: Path | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig or self.kubeconfig),
            "KUBECACHEDIR": str(self.folder / "cache"),
        }
        proc = subprocess.run(
            ["kubectl", *args], env=env, capture_output=True, text=True, timeout=120
        )
        if check:
            assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
        return proc

    def apply_file(self, verb: str, name: str, obj: Json, *extra: str) -> str:
        path = self.folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(obj))
        proc = self.kubectl(verb, "-f", str(path), *extra)
        assert proc.stderr == "", proc.stderr
        return proc.stdout.strip()

    def get(self, *args: str) -> Json:
        out: Json = json.loads(self.kubectl("get", *args, "-o", "json").stdout)
        return out


def serve(folder: Path, *args: str) -> Iterator[Served]:
    kubeconfig = folder / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.kubeapi", *args, "--kubeconfig", str(kubeconfig)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("serving "), line + (proc.stderr.read() if proc.stderr else "")
        yield Served(kubeconfig, line.split(" at ")[1].split()[0], folder)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "failed on" not in err, err


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    yield from serve(tmp_path, "--kube-version", "1.32", "--volcano", "none")


TEMPLATE: Json = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox"}],
    },
}
JOB: Json = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "train"},
    "spec": {"template": TEMPLATE},
}
CRON_JOB: Json = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {"name": "nightly"},
    "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": TEMPLATE}}},
}
DEPLOYMENT: Json = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "nginx"}]},
        },
    },
}
CRD: Json = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                        },
                    }
                },
            }
        ],
    },
}
VWC: Json = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "gadget-check"},
    "webhooks": [
        {
            "name": "gadgets.check.example.com",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {"url": "https://127.0.0.1:1/validate"},
            "rules": [
                {
                    "operations": ["CREATE"],
                    "apiGroups": ["example.com"],
                    "apiVersions": ["v1"],
                    "resources": ["widgets"],
                }
            ],
        }
    ],
}


def widget(name: str, **spec: Any) -> Json:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_kubectl_drives_the_server(served: Served) -> None:
    version = json.loads(served.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == "v1.32.0"
    api_versions = served.kubectl("api-versions").stdout.split()
    assert {"v1", "apps/v1", "batch/v1", "apiextensions.k8s.io/v1"} <= set(api_versions)
    assert "scheduling.volcano.sh/v1beta1" not in api_versions  # --volcano none
    resources = {
        tuple(line.split())
        for line in served.kubectl("api-resources", "--no-headers").stdout.splitlines()
    }
    for row in (
        ("cronjobs", "cj", "batch/v1", "true", "CronJob"),
        ("deployments", "deploy", "apps/v1", "true", "Deployment"),
        ("statefulsets", "sts", "apps/v1", "true", "StatefulSet"),
        (
            "customresourcedefinitions",
            "crd,crds",
            "apiextensions.k8s.io/v1",
            "false",
            "CustomResourceDefinition",
        ),
        (
            "validatingwebhookconfigurations",
            "admissionregistration.k8s.io/v1",
            "false",
            "ValidatingWebhookConfiguration",
        ),
    ):
        assert row in resources, row

    # The cluster a user finds: four namespaces, a default ServiceAccount in each.
    namespaces = served.get("namespaces")["items"]
    assert sorted(n["metadata"]["name"] for n in namespaces) == [
        "default",
        "kube-node-lease",
        "kube-public",
        "kube-system",
    ]
    root_ca = served.get("configmap", "kube-root-ca.crt", "-n", "kube-public")
    assert root_ca["data"]["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
    accounts = served.kubectl("get", "serviceaccounts", "-A", "--no-headers").stdout
    assert sorted(line.split()[:2] for line in accounts.splitlines()) == [
        ["default", "default"],
        ["kube-node-lease", "default"],
        ["kube-public", "default"],
        ["kube-system", "default"],
    ]

    # create -f, with kubectl's default (server-side, Strict) validation.
    assert served.apply_file("create", "job", JOB) == "job.batch/train created"
    assert served.apply_file("create", "cron", CRON_JOB) == "cronjob.batch/nightly created"
    assert served.apply_file("create", "deploy", DEPLOYMENT) == "deployment.apps/web created"
    job = served.get("job", "train")
    assert (job["spec"]["suspend"], job["spec"]["backoffLimit"]) == (False, 6)
    assert served.get("cronjob", "nightly")["spec"]["concurrencyPolicy"] == "Allow"
    bad = {**JOB, "metadata": {"name": "bad"}, "spec": {**JOB["spec"], "bogus": 1}}
    (served.folder / "bad.yaml").write_text(yaml.safe_dump(bad))
    refused = served.kubectl("create", "-f", str(served.folder / "bad.yaml"), check=False)
    assert refused.returncode == 1
    assert 'strict decoding error: unknown field "spec.bogus"' in refused.stderr

    # A CRD, then one of its objects: served at once, pruned as the schema says.
    assert served.apply_file("create", "crd", CRD) == (
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"
    )
    conditions = served.get("crd", "widgets.example.com")["status"]["conditions"]
    assert {c["type"]: c["status"] for c in conditions} == {
        "NamesAccepted": "True",
        "Established": "True",
    }
    assert (
        served.apply_file("create", "w1", widget("w1", size=3)) == "widget.example.com/w1 created"
    )
    (served.folder / "w2.yaml").write_text(yaml.safe_dump(widget("w2", size=1, colour="red")))
    refused = served.kubectl("create", "-f", str(served.folder / "w2.yaml"), check=False)
    assert 'strict decoding error: unknown field "spec.colour"' in refused.stderr
    served.kubectl("create", "-f", str(served.folder / "w2.yaml"), "--validate=false")
    assert served.get("wd", "w2")["spec"] == {"size": 1}

    # A ValidatingWebhookConfiguration: stored with its defaults, and called.
    assert served.apply_file("create", "vwc", VWC) == (
        "validatingwebhookconfiguration.admissionregistration.k8s.io/gadget-check created"
    )
    hook = served.get("validatingwebhookconfiguration", "gadget-check")["webhooks"][0]
    assert (hook["failurePolicy"], hook["matchPolicy"], hook["timeoutSeconds"]) == (
        "Fail",
        "Equivalent",
        10,
    )
    (served.folder / "w3.yaml").write_text(yaml.safe_dump(widget("w3", size=1)))
    refused = served.kubectl("create", "-f", str(served.folder / "w3.yaml"), check=False)
    assert 'failed calling webhook "gadgets.check.example.com"' in refused.stderr

    # apply -f: creates, then patches what changed.
    served.kubectl("delete", "deployment", "web")
    assert served.apply_file("apply", "deploy", DEPLOYMENT) == "deployment.apps/web created"
    changed = json.loads(json.dumps(DEPLOYMENT))
    changed["spec"]["replicas"] = 3
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.27"
    assert served.apply_file("apply", "deploy", changed) == "deployment.apps/web configured"
    deployment = served.get("deployment", "web")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert served.apply_file("apply", "deploy", changed) == "deployment.apps/web unchanged"
    served.kubectl("delete", "validatingwebhookconfiguration", "gadget-check")
    assert served.apply_file("apply", "w4", widget("w4", size=2)) == (
        "widget.example.com/w4 created"
    )
    assert served.apply_file("apply", "w4", widget("w4", size=5)) == (
        "widget.example.com/w4 configured"
    )
    assert served.get("widget", "w4")["spec"] == {"size": 5}

    # delete
    assert served.kubectl("delete", "job", "train").stdout.strip() == 'job.batch "train" deleted'
    gone = served.kubectl("get", "job", "train", check=False)
    assert gone.returncode == 1
    assert 'jobs.batch "train" not found' in gone.stderr
    served.kubectl("delete", "crd", "widgets.example.com")
    assert "widgets" not in served.kubectl("api-resources").stdout

    # Who may do what, and a token the server does not know.
    assert served.kubectl("auth", "can-i", "create", "pods").stdout.strip() == "yes"
    wrong = served.folder / "wrong-kubeconfig"
    config = yaml.safe_load(served.kubeconfig.read_text())
    config["users"][0]["user"]["token"] = "not-a-token"
    wrong.write_text(yaml.safe_dump(config))
    refused = served.kubectl("get", "pods", kubeconfig=wrong, check=False)
    assert refused.returncode == 1
    assert "You must be logged in to the server (Unauthorized)" in refused.stderr


@pytest.mark.parametrize("kube", ["1.28", "1.37"])
def test_kubectl_sees_the_release_played(tmp_path: Path, kube: str) -> None:
    for served in serve(tmp_path, "--kube-version", kube):
        version = json.loads(served.kubectl("version", "-o", "json").stdout)
        assert version["serverVersion"]["gitVersion"] == f"v{kube}.0"
        assert "scheduling.volcano.sh/v1beta1" in served.kubectl("api-versions").stdout
