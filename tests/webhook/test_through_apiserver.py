"""corral's webhook as on a cluster: ``corral-webhook serve --self-signed`` as a process,
found by the MutatingWebhookConfiguration the manifests render (its Service mapped to
the process's port), its CA published by the webhook itself, and called by the
in-memory API server's admission chain over verified TLS. A Job created as ``kubectl
create`` would create it is stored mutated, its PodGroup is made, and the pods the Job
controller model makes for it are admitted too."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.builders.kubeconfig import kubeconfig
from tests.builders.manifests import MANIFESTS, config_map, one, render
from tests.controllers import JobController, Rest
from tests.kubeapi import ApiServer
from tests.kubeapi import objects as o

# corral-webhook as a process behind the API server: not in `make test-fast`.
# The MutatingWebhookConfiguration comes from manifests/, rendered with kubectl kustomize.
pytestmark = [pytest.mark.scenario, pytest.mark.kubectl]

Json = dict[str, Any]
CLI = [sys.executable, "-m", "webhook.cli"]
NS = "ml"
GROUP = "scheduling.k8s.io/group-name"


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
        self.proc: asyncio.subprocess.Process | None = None

    async def post(self, path: str, body: Json) -> tuple[int, Json, list[str]]:
        async with self.http.post(self.api.url + path, json=body) as r:
            return r.status, await r.json(), r.headers.getall("Warning", [])

    async def patch(self, path: str, body: Json) -> tuple[int, Json]:
        headers = {"Content-Type": "application/merge-patch+json"}
        async with self.http.patch(self.api.url + path, json=body, headers=headers) as r:
            return r.status, await r.json()

    async def stop_webhook(self) -> None:
        """Every webhook replica gone (its Service stays, with nothing behind it)."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await asyncio.wait_for(self.proc.wait(), 30)


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
            kubeconfig(tmp_path / "kubeconfig", api.accept("webhook").url, "webhook"),
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stderr is not None
        inst.proc = proc
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
            await inst.stop_webhook()


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


async def test_the_job_controllers_pods_are_admitted_too(
    api: ApiServer, installed: Installed
) -> None:
    """The Job controller model creates the Job's pods as on a cluster (generateName,
    owned by the Job), through the chain: corral's webhook sees each pod CREATE."""
    status, job, _ = await installed.post(f"/apis/batch/v1/namespaces/{NS}/jobs", train_job("w"))
    assert status == 201
    jobs = JobController(Rest(api.url), backoff=0)
    try:
        await jobs.step()
    finally:
        await jobs.close()
    pods = [
        p
        for p in api.store.items(api.store.resource("pods"), NS)
        if p["metadata"].get("labels", {}).get("job-name") == "w"
    ]
    assert len(pods) == 2
    group = job["spec"]["template"]["metadata"]["annotations"][GROUP]
    for p in pods:
        assert p["spec"]["schedulerName"] == "volcano"
        assert p["metadata"]["annotations"][GROUP] == group
        assert p["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    reviewed = [
        r["request"] for r in api.admission.reviews if r["request"]["kind"]["kind"] == "Pod"
    ]
    assert len(reviewed) == 2
    assert all("name" not in r and r["object"]["metadata"]["generateName"] for r in reviewed)


async def test_skipped_and_dry_run(api: ApiServer, installed: Installed) -> None:
    skipped = train_job("skipped")
    skipped["metadata"]["annotations"] = {"corral.dev/skip": "true"}
    status, job, _ = await installed.post(f"/apis/batch/v1/namespaces/{NS}/jobs", skipped)
    assert status == 201
    # left to the default scheduler (the API server's default, not corral's volcano)
    assert job["spec"]["template"]["spec"]["schedulerName"] == "default-scheduler"
    assert api.admission.reviews == []  # matchConditions kept it from the webhook
    status, job, _ = await installed.post(
        f"/apis/batch/v1/namespaces/{NS}/jobs?dryRun=All", train_job("dry")
    )
    assert status == 201 and job["spec"]["template"]["spec"]["schedulerName"] == "volcano"
    assert [r["request"]["dryRun"] for r in api.admission.reviews] == [True]
    # A Job admitted after it gets its PodGroup: the webhook's work queue has passed the
    # dry run by then, and it made nothing for it, nor even looked for its Job.
    status, _, _ = await installed.post(f"/apis/batch/v1/namespaces/{NS}/jobs", train_job("after"))
    assert status == 201
    pg_rt = api.store.resource("podgroups", "scheduling.volcano.sh")
    deadline = asyncio.get_running_loop().time() + 10
    while not list(api.store.items(pg_rt, NS)):
        assert asyncio.get_running_loop().time() < deadline, "no PodGroup for the Job after"
        await asyncio.sleep(0.02)
    made = [pg["metadata"]["name"] for pg in api.store.items(pg_rt, NS)]
    assert made == ["job-after"]  # sideEffects NoneOnDryRun: nothing made for the dry run
    assert [r.path for r in api.requests() if r.path.endswith("/dry")] == []
    assert api.store.find(api.store.resource("jobs", "batch"), NS, "dry") is None


async def test_while_the_webhook_is_down_suspend_passes_and_create_is_refused(
    api: ApiServer, installed: Installed
) -> None:
    """The CREATE of workloads is gangs.corral.dev's (failurePolicy Fail); their UPDATE is
    workload-updates.corral.dev's (Ignore): with no webhook replica, Kueue's or the
    descheduler's spec.suspend patch of a Job goes through while a new Job is refused
    with the API server's words; a scaling let through meanwhile leaves the PodGroup as
    it was (docs/failure-modes.md)."""
    store = api.store
    mwc = store.get(
        store.resource("mutatingwebhookconfigurations", "admissionregistration.k8s.io"),
        "",
        "corral-webhook",
    )
    # the self-signed webhook published its CA in every entry that calls its Service
    assert [w["name"] for w in mwc["webhooks"]] == [
        "gangs.corral.dev",
        "workload-updates.corral.dev",
    ]
    assert all(w["clientConfig"].get("caBundle") for w in mwc["webhooks"])
    jobs = f"/apis/batch/v1/namespaces/{NS}/jobs"
    status, job, _ = await installed.post(jobs, train_job("sweep"))
    assert status == 201, job
    group = job["spec"]["template"]["metadata"]["annotations"][GROUP]
    pg_rt = store.resource("podgroups", "scheduling.volcano.sh")
    await wait_for(lambda: store.find(pg_rt, NS, group))
    # while the webhook is up, a scaling reaches it through the UPDATE entry
    status, _ = await installed.patch(f"{jobs}/sweep", {"spec": {"parallelism": 1}})
    assert status == 200
    await wait_for(lambda: store.get(pg_rt, NS, group)["spec"]["minMember"] == 1)

    await installed.stop_webhook()
    api.admission.reviews.clear()
    status, body = await installed.patch(f"{jobs}/sweep", {"spec": {"suspend": True}})
    assert status == 200, body
    assert body["spec"]["suspend"] is True
    status, body = await installed.patch(f"{jobs}/sweep", {"spec": {"suspend": False}})
    assert status == 200 and body["spec"]["suspend"] is False, body
    status, body = await installed.patch(f"{jobs}/sweep", {"spec": {"parallelism": 2}})
    assert status == 200, body
    await asyncio.sleep(0.2)
    assert store.get(pg_rt, NS, group)["spec"]["minMember"] == 1  # not followed

    status, body, _ = await installed.post(jobs, train_job("later"))
    assert status == 500, body
    assert body["reason"] == "InternalError"
    assert re.fullmatch(
        r'Internal error occurred: failed calling webhook "gangs\.corral\.dev": failed to '
        r'call webhook: Post "https://corral-webhook\.corral-system\.svc:443/mutate\?'
        r'timeout=5s": dial tcp 127\.0\.0\.1:\d+: connect: connection refused',
        body["message"],
    ), body["message"]
    assert store.find(store.resource("jobs", "batch"), NS, "later") is None
    # every call was tried: three UPDATEs (ignored) and the CREATE (refused)
    assert [r["request"]["operation"] for r in api.admission.reviews] == [
        "UPDATE",
        "UPDATE",
        "UPDATE",
        "CREATE",
    ]
