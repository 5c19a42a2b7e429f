"""corral's webhook as on a cluster: ``corral-webhook serve --self-signed`` as a process,
found by the MutatingWebhookConfiguration the manifests render (its Service mapped to
the process's port), its CA published by the webhook itself, and called by the
in-memory API server's admission chain over verified TLS. A Job created as ``kubectl
create`` would create it is stored mutated, and its PodGroup is made."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from manifest_support import MANIFESTS, config_map, one, render

from tests.kubeapi import ApiServer
from tests.kubeapi import objects as o

Json = dict[str, Any]
CLI = [sys.executable, "-m", "webhook.cli"]
NS = "ml"
GROUP = "scheduling.k8s.io/group-name"


def kubeconfig(path: Path, server: str) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "t",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "webhook"}}],
        "contexts": [{"name": "t", "context": {"cluster": "c", "user": "u"}}],
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


async def wait_for(cond: Any, timeout: float = 20.0) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert loop.time() < end, "condition not met in time"
        await asyncio.sleep(0.05)


def train_job(name: str = "train", workers: int = 2) -> Json:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "parallelism": workers,
            "completions": workers,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "resources": {
                                "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "4"},
                                "limits": {"nvidia.com/gpu": "4"},
                            },
                        }
                    ],
                },
            },
        },
    }


class Installed:
    def __init__(self, api: ApiServer, http: aiohttp.ClientSession) -> None:
        self.api, self.http = api, http

    async def post(self, path: str, body: Json) -> tuple[int, Json, list[str]]:
        async with self.http.post(self.api.url + path, json=body) as r:
            return r.status, await r.json(), r.headers.getall("Warning", [])


@pytest.fixture
async def installed(api: ApiServer, tmp_path: Path) -> AsyncIterator[Installed]:
    objs = render(MANIFESTS)
    mwc = one(objs, "MutatingWebhookConfiguration", "corral-webhook")
    webhook_yaml = config_map(objs, "corral-webhook-config")["data"]["webhook.yaml"]
    (tmp_path / "webhook.yaml").write_text(webhook_yaml)
    api.store.load(
        [
            *(o.node(f"n{i}", gpus=8, memory="256Gi") for i in range(1, 4)),
            o.namespace("corral-system"),
            o.namespace(NS, {"corral.dev/gang-scheduling": "enabled"}),
        ]
    )
    async with aiohttp.ClientSession() as http:
        inst = Installed(api, http)
        # what `kubectl apply -k manifests/` sends for it
        status, body, _ = await inst.post(
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", mwc
        )
        assert status == 201, body
        proc = await asyncio.create_subprocess_exec(
            *CLI,
            "serve",
            "--self-signed",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--shutdown-delay",
            "0",
            "--config",
            str(tmp_path / "webhook.yaml"),
            "--kubeconfig",
            kubeconfig(tmp_path / "kubeconfig", api.url),
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stderr is not None
        try:
            port = 0
            while not port:
                line = await asyncio.wait_for(proc.stderr.readline(), 30)
                assert line, "corral-webhook exited before serving"
                entry = json.loads(line)
                if entry.get("msg") == "serving":
                    port = int(entry["address"].rsplit(":", 1)[1])
            # The Service corral-system/corral-webhook:443 is this process.
            api.admission.map_service(
                "corral-system", "corral-webhook", f"https://127.0.0.1:{port}"
            )
            yield inst
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)


async def test_a_job_is_stored_mutated_and_its_podgroup_made(
    api: ApiServer, installed: Installed
) -> None:
    store = api.store
    mwc_rt = store.resource("mutatingwebhookconfigurations", "admissionregistration.k8s.io")
    # the webhook published its CA in the configuration the manifests made
    stored_mwc = store.get(mwc_rt, "", "corral-webhook")
    assert stored_mwc["webhooks"][0]["clientConfig"].get("caBundle")
    status, job, warnings = await installed.post(
        f"/apis/batch/v1/namespaces/{NS}/jobs", train_job()
    )
    assert status == 201, job
    spec = job["spec"]["template"]
    assert spec["spec"]["schedulerName"] == "volcano"
    assert spec["metadata"]["annotations"][GROUP]
    stored = store.get(store.resource("jobs", "batch"), NS, "train")
    assert stored["spec"]["template"] == spec
    group = spec["metadata"]["annotations"][GROUP]
    pg_rt = store.resource("podgroups", "scheduling.volcano.sh")
    pg = await wait_for(lambda: store.find(pg_rt, NS, group))
    assert pg["spec"]["minMember"] == 2
    assert pg["metadata"]["ownerReferences"][0]["uid"] == stored["metadata"]["uid"]
    # the review came through the chain: the real server's request, by Service
    [review] = [r for r in api.admission.reviews if r["request"]["resource"]["resource"] == "jobs"]
    assert review["request"]["operation"] == "CREATE" and review["request"]["name"] == "train"
    assert warnings == []


async def test_a_pod_made_by_the_job_controller_is_admitted_too(
    api: ApiServer, installed: Installed
) -> None:
    status, job, _ = await installed.post(f"/apis/batch/v1/namespaces/{NS}/jobs", train_job("w"))
    assert status == 201
    # As the Job controller creates it: generateName, the template, owned by the Job.
    tmpl = job["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "w-",
            "labels": {**tmpl["metadata"].get("labels", {}), "job-name": "w"},
            "annotations": dict(tmpl["metadata"].get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "w",
                    "uid": job["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": tmpl["spec"],
    }
    status, made, _ = await installed.post(f"/api/v1/namespaces/{NS}/pods", pod)
    assert status == 201, made
    assert made["spec"]["schedulerName"] == "volcano"
    assert made["metadata"]["annotations"][GROUP] == tmpl["metadata"]["annotations"][GROUP]
    reviewed = [
        r["request"] for r in api.admission.reviews if r["request"]["kind"]["kind"] == "Pod"
    ]
    assert len(reviewed) == 1 and "name" not in reviewed[0]


async def test_skipped_and_dry_run(api: ApiServer, installed: Installed) -> None:
    skipped = train_job("skipped")
    skipped["metadata"]["annotations"] = {"corral.dev/skip": "true"}
    status, job, _ = await installed.post(f"/apis/batch/v1/namespaces/{NS}/jobs", skipped)
    assert status == 201
    assert "schedulerName" not in job["spec"]["template"]["spec"]
    assert api.admission.reviews == []  # matchConditions kept it from the webhook
    status, job, _ = await installed.post(
        f"/apis/batch/v1/namespaces/{NS}/jobs?dryRun=All", train_job("dry")
    )
    assert status == 201 and job["spec"]["template"]["spec"]["schedulerName"] == "volcano"
    await asyncio.sleep(0.3)
    pg_rt = api.store.resource("podgroups", "scheduling.volcano.sh")
    assert list(api.store.items(pg_rt, NS)) == []  # sideEffects NoneOnDryRun: nothing made
    assert api.store.find(api.store.resource("jobs", "batch"), NS, "dry") is None
