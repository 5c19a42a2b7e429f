"""The webhook wired to a cluster, end to end over real HTTP: served over HTTPS with
informers on the in-memory API server (readiness, feasibility warnings that follow the
nodes, PodGroups made after admission), and ``corral-webhook serve`` as a process with a
kubeconfig pointing at that server."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
import signal
import ssl
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import pytest
from gangplace.kube import KubeClient
from gangplace.kube.resources import VOLCANO_PODGROUPS

from tests.builders.reviews import fixture, review
from tests.kubeapi import ApiServer
from tests.kubeapi import objects as o
from webhook.admission.review import decode_patch
from webhook.config import WebhookConfig
from webhook.live import InformerSource
from webhook.metrics import WebhookMetrics
from webhook.podgroups.calls import PodGroupApi
from webhook.podgroups.reconciler import PodGroupReconciler, RetryPolicy
from webhook.server import graceful_stop, init_app, start
from webhook.tls.certificates import new_bundle
from webhook.tls.contexts import client_context, load_pair, server_context

BUNDLE = new_bundle("corral-webhook", "corral-system", dt.datetime.now(dt.UTC), ips=["127.0.0.1"])


async def eventually(check: Callable[[], Any], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


class Webhook:
    def __init__(
        self,
        url: str,
        session: aiohttp.ClientSession,
        metrics: WebhookMetrics,
        reconciler: PodGroupReconciler,
    ) -> None:
        self.url, self.session, self.metrics = url, session, metrics
        self.reconciler = reconciler

    async def post(self, body: dict[str, Any]) -> dict[str, Any]:
        async with self.session.post(f"{self.url}/mutate", json=body) as r:
            assert r.status == 200
            doc: dict[str, Any] = await r.json()
            return doc["response"]  # type: ignore[no-any-return]

    async def ready(self) -> bool:
        async with self.session.get(f"{self.url}/readyz") as r:
            return r.status == 200


@pytest.fixture
async def webhook(api: ApiServer, kube: KubeClient) -> AsyncIterator[Webhook]:
    metrics = WebhookMetrics()
    source = InformerSource(kube, rebuild_delay=0.05, watch_timeout=5)
    pg = PodGroupApi(kube)
    reconciler = PodGroupReconciler(
        pg.create,
        pg.resolve_owner,
        existing=pg.existing,
        policy=RetryPolicy(base_delay=0.02, max_delay=0.1, owner_wait=1, hint_wait=0.05),
        on_outcome=lambda _i, o: metrics.podgroup(o),
    )
    app = init_app(
        WebhookConfig(),
        source=source,
        reconciler=reconciler,
        metrics=metrics,
        background=[source.run],
    )
    ctx = server_context()
    load_pair(ctx, BUNDLE.cert, BUNDLE.key)
    runner, port = await start(app, "127.0.0.1", 0, ctx, shutdown_timeout=2)
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=client_context(BUNDLE.ca_cert))
    )
    try:
        yield Webhook(f"https://127.0.0.1:{port}", session, metrics, reconciler)
    finally:
        await session.close()
        await graceful_stop(runner)
    # the informers stopped with the server
    assert not source.nodes.running and not source.pods.running


def big_gang(name: str = "llm-0", gpus: int = 8) -> dict[str, Any]:
    pod = o.pod(name, "ml", gpus=gpus)
    pod["metadata"]["annotations"] = {"corral.dev/gang": "llm", "corral.dev/min-available": "2"}
    return review(pod, namespace="ml")


async def test_ready_when_synced_and_warnings_follow_the_nodes(
    api: ApiServer, webhook: Webhook
) -> None:
    api.store.load([o.node("small", gpus=4), o.namespace("ml")])
    # the informers have not listed yet: not ready, and no warnings without a view
    slow = api.faults.delay(0.4, method="GET", path="/nodes$")
    await asyncio.sleep(0.05)
    assert not await webhook.ready()
    assert "warnings" not in await webhook.post(big_gang())
    api.faults.remove(slow)
    await eventually(webhook.ready)
    # 2 pods x 8 GPUs: never on 4-GPU nodes
    warnings = (await webhook.post(big_gang()))["warnings"]
    assert "can never start" in warnings[0] and "llm" in warnings[0]
    # a big node joins: the warning goes
    nodes = api.store.resource("nodes")
    api.store.create(nodes, "", o.node("big", gpus=16))

    async def quiet() -> bool:
        return "warnings" not in await webhook.post(big_gang())

    await eventually(quiet)
    # and comes back when it leaves
    api.store.delete(nodes, "", "big")

    async def warned() -> bool:
        return "warnings" in await webhook.post(big_gang())

    await eventually(warned)


async def test_a_job_admitted_over_https_gets_its_podgroup(
    api: ApiServer, webhook: Webhook
) -> None:
    api.store.load([o.node("n", gpus=8), o.namespace("ml")])
    await eventually(webhook.ready)
    rev = fixture("job-create-mpi-train.json")
    rev["request"]["namespace"] = "ml"
    obj = rev["request"]["object"]
    obj["metadata"]["namespace"] = "ml"
    resp = await webhook.post(rev)
    assert resp["allowed"] and decode_patch(resp)
    # the API server stores the Job after admission
    stored = jsonpatch.apply_patch(obj, decode_patch(resp))
    stored["metadata"]["uid"] = "job-uid-1"
    api.store.load([stored])
    rt = api.store.resource(VOLCANO_PODGROUPS.plural, VOLCANO_PODGROUPS.group)
    await eventually(lambda: api.store.find(rt, "ml", "job-mpi-train") is not None)
    pg = api.store.get(rt, "ml", "job-mpi-train")
    assert pg["spec"]["minMember"] == 3
    assert pg["metadata"]["ownerReferences"][0]["uid"] == "job-uid-1"
    async with webhook.session.get(f"{webhook.url}/metrics") as r:
        text = await r.text()
    assert 'corral_webhook_podgroups_total{outcome="created"} 1.0' in text
    # a dry run of the same makes nothing more
    dry = fixture("job-create-mpi-train.json")
    dry["request"]["dryRun"] = True
    dry["request"]["namespace"] = "ml"
    dry["request"]["object"]["metadata"].update(name="other", namespace="ml")
    assert (await webhook.post(dry))["allowed"]
    # the answer is given after the PodGroups it asks for are queued: once the queue has
    # drained, all that request was going to make is made
    await asyncio.wait_for(webhook.reconciler.drain(), 5)
    assert api.store.find(rt, "ml", "job-other") is None
    assert api.requests(path_contains="other") == []
    async with webhook.session.get(f"{webhook.url}/metrics") as r:
        text = await r.text()
    assert 'corral_webhook_podgroups_total{outcome="created"} 1.0' in text


# --- the CLI as a process ----------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def kubeconfig(path: Path, url: str) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "mem", "cluster": {"server": url}}],
        "users": [{"name": "me", "user": {"token": "t"}}],
        "contexts": [{"name": "mem", "context": {"cluster": "mem", "user": "me"}}],
        "current-context": "mem",
    }
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.slow
async def test_serve_against_the_api_server_as_a_process(api: ApiServer, tmp_path: Path) -> None:
    mwc = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "corral-webhook"},
        "webhooks": [
            {
                "name": "pods.corral.dev",
                "clientConfig": {"service": {"name": "corral-webhook", "namespace": "gangs"}},
            }
        ],
    }
    api.store.load([o.node("n", gpus=4), o.namespace("gangs"), o.namespace("ml"), mwc])
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "webhook.cli",
        "serve",
        "--self-signed",
        "--namespace",
        "gangs",
        "--kubeconfig",
        str(kubeconfig(tmp_path / "kubeconfig", api.accept("t").url)),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--shutdown-delay",
        "0",
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
        env={**env, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stderr is not None
    logs: list[dict[str, Any]] = []
    try:
        port = 0
        async with asyncio.timeout(20):
            while not port:
                line = await proc.stderr.readline()
                assert line, f"the webhook exited: {logs}"
                logs.append(json.loads(line))
                if logs[-1]["msg"] == "serving":
                    port = int(logs[-1]["address"].rsplit(":", 1)[1])
        assert logs[-1]["cluster"] == "InformerSource"
        # its CA is in the Secret it made, and in its webhook configuration
        secret = api.store.get(api.store.resource("secrets"), "gangs", "corral-webhook-tls")
        ca = base64.b64decode(secret["data"]["ca.crt"])
        got = api.store.get(
            api.store.resource("mutatingwebhookconfigurations", "admissionregistration.k8s.io"),
            "",
            "corral-webhook",
        )
        assert base64.b64decode(got["webhooks"][0]["clientConfig"]["caBundle"]) == ca
        ctx = ssl.create_default_context(cadata=ca.decode())
        ctx.check_hostname = False  # the certificate names the Service, not 127.0.0.1
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as s:
            url = f"https://127.0.0.1:{port}"

            async def ready() -> bool:
                async with s.get(f"{url}/readyz") as r:
                    return r.status == 200

            await eventually(ready, 20)
            async with s.post(f"{url}/mutate", json=big_gang()) as r:
                resp = (await r.json())["response"]
            assert "can never start" in resp["warnings"][0]
            # its PodGroup: the pod is stored, the webhook reads its uid and makes it
            api.store.load([{**big_gang()["request"]["object"]}])
            rt = api.store.resource(VOLCANO_PODGROUPS.plural, VOLCANO_PODGROUPS.group)
            await eventually(lambda: api.store.find(rt, "ml", "llm") is not None, 20)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        rest = await proc.stderr.read()
        logs.extend(json.loads(line) for line in rest.splitlines() if line)
    assert [e["msg"] for e in logs][-2:] == ["signal received; shutting down", "stopped"]
