"""The server over real HTTPS on 127.0.0.1: reviews, bad bodies, limits, metrics,
readiness, concurrent requests, certificate reload, TLS floor, graceful shutdown."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import ssl
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import pytest
from aiohttp import web
from cryptography import x509

from tests.builders.reviews import FIXTURE_NAMES, fixture
from webhook.admission.cluster_fit import ClusterCapacity
from webhook.admission.entry import admit
from webhook.admission.review import AdmitResult, decode_patch
from webhook.config import WebhookConfig
from webhook.metrics import WebhookMetrics
from webhook.podgroup_intent import PodGroupIntent
from webhook.podgroups.reconciler import PodGroupReconciler, RetryPolicy
from webhook.server import MAX_BODY, AdmitFn, graceful_stop, init_app, start
from webhook.tls.certificates import TlsBundle, issue, new_bundle
from webhook.tls.contexts import client_context, load_pair, server_context
from webhook.tls.rotation import CertReloader

NOW = dt.datetime.now(dt.UTC)
BUNDLE = new_bundle("corral-webhook", "corral-system", NOW, ips=["127.0.0.1"])


@dataclass
class Served:
    url: str
    port: int
    session: aiohttp.ClientSession
    app: web.Application
    runner: web.AppRunner
    metrics: WebhookMetrics


async def serve(
    *,
    config: WebhookConfig | None = None,
    source: Any = None,
    reconciler: PodGroupReconciler | None = None,
    metrics: WebhookMetrics | None = None,
    ctx: ssl.SSLContext | None = None,
    admit_fn: AdmitFn = admit,
    background: Any = (),
) -> Served:
    metrics = metrics or WebhookMetrics()
    if ctx is None:
        ctx = server_context()
        load_pair(ctx, BUNDLE.cert, BUNDLE.key)
    app = init_app(
        config or WebhookConfig(),
        source=source,
        reconciler=reconciler,
        metrics=metrics,
        admit_fn=admit_fn,
        background=background,
    )
    runner, port = await start(app, "127.0.0.1", 0, ctx, shutdown_timeout=5)
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=client_context(BUNDLE.ca_cert))
    )
    return Served(f"https://127.0.0.1:{port}", port, session, app, runner, metrics)


@pytest.fixture
async def server() -> AsyncIterator[Served]:
    s = await serve()
    try:
        yield s
    finally:
        await s.session.close()
        await s.runner.cleanup()


async def post(s: Served, body: Any, **kw: Any) -> tuple[int, Any]:
    data = json.dumps(body) if isinstance(body, (dict, list)) else body
    headers = kw.pop("headers", {"Content-Type": "application/json"})
    async with s.session.post(f"{s.url}/mutate", data=data, headers=headers, **kw) as r:
        return r.status, await r.json(content_type=None)


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text output (0 if absent)."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        m = re.match(r"^([a-zA-Z_:]+)(\{.*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return 0.0


async def test_every_fixture_over_https(server: Served) -> None:
    for name in FIXTURE_NAMES:
        rev = fixture(name)
        status, body = await post(server, rev)
        assert status == 200
        assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
        resp = body["response"]
        assert resp["uid"] == rev["request"]["uid"]
        expected = admit(rev, None, WebhookConfig()).review
        assert body == expected
        if resp["allowed"] and resp.get("patch"):
            jsonpatch.apply_patch(rev["request"]["object"], decode_patch(resp))


@pytest.mark.parametrize(
    ("body", "headers", "fragment"),
    [
        (b"{not json", {"Content-Type": "application/json"}, "body is not JSON"),
        (b"", {"Content-Type": "application/json"}, "body is not JSON"),
        (b'{"kind": "Pod"}', {"Content-Type": "application/json"}, "expected AdmissionReview"),
        (b"[]", {"Content-Type": "application/json"}, "AdmissionReview"),
        (b"{}", {"Content-Type": "text/plain"}, "content type 'text/plain'"),
        (b"{}", {}, "expected application/json"),
    ],
)
async def test_bad_bodies_get_400(
    server: Served, body: bytes, headers: dict[str, str], fragment: str
) -> None:
    status, doc = await post(server, body, headers=headers)
    assert status == 400
    assert doc["kind"] == "Status" and doc["code"] == 400
    assert fragment in doc["message"]


async def test_oversize_bodies_get_400(server: Served) -> None:
    big = b'{"a": "' + b"x" * MAX_BODY + b'"}'
    status, doc = await post(server, big)
    assert status == 400 and "over the limit" in doc["message"]

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked upload
        for _ in range(4):
            yield b"x" * (1024 * 1024)

    status, doc = await post(server, chunks())
    assert status == 400 and "over the limit" in doc["message"]
    # the server is fine afterwards
    status, _ = await post(server, fixture("pod-create-plain-cpu.json"))
    assert status == 200


async def test_other_routes(server: Served) -> None:
    async with server.session.get(f"{server.url}/healthz") as r:
        assert r.status == 200 and await r.text() == "ok"
    async with server.session.get(f"{server.url}/readyz") as r:
        assert r.status == 200
    async with server.session.get(f"{server.url}/mutate") as r:
        assert r.status == 405
    async with server.session.get(f"{server.url}/nope") as r:
        assert r.status == 404


async def test_readiness_follows_the_cluster_view() -> None:
    class Syncing:
        synced = False

        def state(self) -> ClusterCapacity | None:
            return None

        def ready(self) -> bool:
            return self.synced

    src = Syncing()
    s = await serve(source=src)
    try:
        async with s.session.get(f"{s.url}/readyz") as r:
            assert r.status == 503 and "not synced" in await r.text()
        src.synced = True
        async with s.session.get(f"{s.url}/readyz") as r:
            assert r.status == 200
    finally:
        await s.session.close()
        await s.runner.cleanup()


@pytest.mark.slow
async def test_concurrent_requests_and_metrics(server: Served) -> None:
    revs = []
    for i in range(120):
        rev = fixture(FIXTURE_NAMES[i % len(FIXTURE_NAMES)])
        rev["request"]["uid"] = f"uid-{i}"
        revs.append(rev)
    sem = asyncio.Semaphore(32)

    async def one(rev: dict[str, Any]) -> tuple[int, Any]:
        async with sem:
            return await post(server, rev)

    results = await asyncio.gather(*(one(r) for r in revs))
    assert all(st == 200 for st, _ in results)
    assert [b["response"]["uid"] for _, b in results] == [f"uid-{i}" for i in range(120)]
    await post(server, b"junk")

    async with server.session.get(f"{server.url}/metrics") as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = await r.text()
    per_fixture = 120 // len(FIXTURE_NAMES)
    # 4 pod fixtures: 3 patched, 1 refused; the Job patched
    assert (
        metric(
            text, "corral_webhook_requests_total", operation="CREATE", kind="Pod", result="patched"
        )
        == 3 * per_fixture
    )
    assert (
        metric(
            text, "corral_webhook_requests_total", operation="CREATE", kind="Pod", result="denied"
        )
        == per_fixture
    )
    assert (
        metric(
            text, "corral_webhook_requests_total", operation="CREATE", kind="Job", result="patched"
        )
        == per_fixture
    )
    assert metric(text, "corral_webhook_requests_total", result="bad_request") == 1
    assert metric(text, "corral_webhook_requests_total", result="error") == 0
    assert metric(text, "corral_webhook_request_duration_seconds_count", operation="CREATE") == 120
    assert (
        metric(
            text, "corral_webhook_request_duration_seconds_bucket", operation="CREATE", le="0.0001"
        )
        >= 0
    )
    assert 'le="5e-05"' in text  # sub-millisecond buckets
    assert metric(text, "corral_webhook_patches_total", kind="Pod") == 3 * per_fixture
    # 4 per patched review, and the Job's podFailurePolicy rule
    ops = metric(text, "corral_webhook_patch_operations_total")
    assert ops == 4 * per_fixture * 3 + per_fixture


async def test_warnings_are_counted() -> None:
    from gangplace.snapshot_io import load_snapshot

    from webhook.admission.cluster_fit import StaticSource

    s = await serve(source=StaticSource(ClusterCapacity.of(load_snapshot(None))))
    try:
        rev = fixture("pod-create-llm-worker-0.json")
        rev["request"]["object"]["metadata"]["annotations"]["corral.dev/min-available"] = "99"
        status, body = await post(s, rev)
        assert status == 200 and len(body["response"]["warnings"]) == 1
        async with s.session.get(f"{s.url}/metrics") as r:
            text = await r.text()
        assert metric(text, "corral_webhook_warnings_total", kind="Pod") == 1
    finally:
        await s.session.close()
        await s.runner.cleanup()


async def test_podgroups_flow_to_the_reconciler_and_metrics() -> None:
    created: list[dict[str, Any]] = []

    async def create(intent: PodGroupIntent, body: dict[str, Any]) -> None:
        created.append(body)

    metrics = WebhookMetrics()
    rec = PodGroupReconciler(
        create, policy=RetryPolicy(owner_wait=0.2), on_outcome=lambda _i, o: metrics.podgroup(o)
    )
    s = await serve(reconciler=rec, metrics=metrics)
    try:
        await post(s, fixture("pod-create-from-job-mpi-train.json"))  # owner uid known
        dry = fixture("pod-create-llm-worker-0.json")
        dry["request"]["dryRun"] = True
        await post(s, dry)
        await asyncio.wait_for(rec.drain(), 2)
        async with s.session.get(f"{s.url}/metrics") as r:
            text = await r.text()
    finally:
        await s.session.close()
        await s.runner.cleanup()
    assert [c["metadata"]["name"] for c in created] == ["job-mpi-train"]
    assert metric(text, "corral_webhook_podgroups_total", outcome="created") == 1


async def test_a_crashing_admit_is_allowed_unchanged_never_500() -> None:
    def broken(review: Any, cluster: ClusterCapacity | None, config: WebhookConfig) -> AdmitResult:
        raise RuntimeError("bug")

    s = await serve(admit_fn=broken)
    try:
        rev = fixture("pod-create-plain-cpu.json")
        status, body = await post(s, rev)
        assert status == 200
        assert body["response"] == {"uid": rev["request"]["uid"], "allowed": True}
        status, body = await post(s, {"no": "uid"})
        assert status == 400
        async with s.session.get(f"{s.url}/metrics") as r:
            assert metric(await r.text(), "corral_webhook_requests_total", result="error") == 2
    finally:
        await s.session.close()
        await s.runner.cleanup()


# --- TLS --------------------------------------------------------------------------------


async def peer_serial(port: int, ca: bytes) -> int:
    _reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=client_context(ca), server_hostname="127.0.0.1"
    )
    try:
        ssl_obj = writer.get_extra_info("ssl_object")
        der = ssl_obj.getpeercert(binary_form=True)
        return int(x509.load_der_x509_certificate(der).serial_number)
    finally:
        writer.close()
        await writer.wait_closed()


def write_pair(folder: Path, b: TlsBundle) -> None:
    for name, data in (("tls.crt", b.cert), ("tls.key", b.key)):
        tmp = folder / f".{name}.tmp"
        tmp.write_bytes(data)
        tmp.replace(folder / name)


async def test_certificate_reload_without_restart(tmp_path: Path) -> None:
    write_pair(tmp_path, BUNDLE)
    ctx = server_context()
    reloader = CertReloader(ctx, tmp_path / "tls.crt", tmp_path / "tls.key", interval=0.02)
    reloader.load()
    s = await serve(ctx=ctx, background=[reloader.run])
    try:
        first = await peer_serial(s.port, BUNDLE.ca_cert)
        assert first == x509.load_pem_x509_certificate(BUNDLE.cert).serial_number
        # a keep-alive connection opened before the rotation
        status, _ = await post(s, fixture("pod-create-plain-cpu.json"))
        assert status == 200
        cert, key = issue(BUNDLE.ca_cert, BUNDLE.ca_key, ["corral-webhook"], NOW, ips=["127.0.0.1"])
        rotated = TlsBundle(BUNDLE.ca_cert, BUNDLE.ca_key, cert, key)
        write_pair(tmp_path, rotated)
        want = x509.load_pem_x509_certificate(rotated.cert).serial_number
        for _ in range(200):
            if await peer_serial(s.port, BUNDLE.ca_cert) == want:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the new certificate was never served")
        # the old keep-alive connection still works
        status, _ = await post(s, fixture("pod-create-plain-cpu.json"))
        assert status == 200
    finally:
        await s.session.close()
        await s.runner.cleanup()


async def test_tls_below_12_is_refused(server: Served) -> None:
    ctx = client_context(BUNDLE.ca_cert)
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # this client would speak TLS 1.0/1.1 ...
    with warnings.catch_warnings():  # asking for an old protocol on purpose
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, ConnectionResetError)):  # ... the server will not
        await asyncio.open_connection(
            "127.0.0.1", server.port, ssl=ctx, server_hostname="127.0.0.1"
        )
    ctx = client_context(BUNDLE.ca_cert)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    _, writer = await asyncio.open_connection(
        "127.0.0.1", server.port, ssl=ctx, server_hostname="127.0.0.1"
    )
    assert writer.get_extra_info("ssl_object").version() == "TLSv1.2"
    writer.close()


async def test_untrusted_clients_see_an_unknown_certificate(server: Served) -> None:
    stranger = new_bundle("x", "y", NOW)
    with pytest.raises(ssl.SSLCertVerificationError):
        await asyncio.open_connection(
            "127.0.0.1",
            server.port,
            ssl=client_context(stranger.ca_cert),
            server_hostname="127.0.0.1",
        )


# --- graceful shutdown ------------------------------------------------------------------


async def test_shutdown_finishes_in_flight_reviews() -> None:
    s = await serve()
    body = json.dumps(fixture("pod-create-plain-cpu.json")).encode()
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", s.port, ssl=client_context(BUNDLE.ca_cert), server_hostname="127.0.0.1"
    )
    head = (
        f"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    writer.write(head + body[:100])  # a review in flight: half its body sent
    await writer.drain()
    await asyncio.sleep(0.05)
    stopping = asyncio.create_task(graceful_stop(s.runner, delay=0.5))
    await asyncio.sleep(0.1)
    # not ready any more, but still answering -- and telling clients to go elsewhere
    async with s.session.get(f"{s.url}/readyz") as r:
        assert r.status == 503
    async with s.session.post(
        f"{s.url}/mutate", data=body, headers={"Content-Type": "application/json"}
    ) as r:
        assert r.status == 200 and r.headers.get("Connection", "").lower() == "close"
    writer.write(body[100:])
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 5)
    assert status_line.startswith(b"HTTP/1.1 200")
    await asyncio.wait_for(stopping, 10)
    # stopped: no new connections
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", s.port)
    writer.close()
    await s.session.close()
