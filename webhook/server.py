"""The aiohttp application: the only part of the webhook that touches the network.

``POST /mutate`` answers AdmissionReviews with :func:`webhook.admission.entry.admit`;
``GET /healthz`` (alive), ``/readyz`` (cluster view synced, not shutting down) and
``/metrics`` (Prometheus). A body over 3 MiB, a content type other than JSON, a body
that is not JSON or not an AdmissionReview get HTTP 400 with a message; nothing
answers 500: an unexpected error is logged and the review allowed unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from gangplace.health import add_health_routes

from webhook.admission.cluster_fit import ClusterCapacity, NoCluster, SnapshotSource
from webhook.admission.entry import admit
from webhook.admission.review import AdmitResult, ReviewError
from webhook.config import WebhookConfig
from webhook.metrics import WebhookMetrics
from webhook.podgroups.reconciler import PodGroupReconciler
from webhook.podgroups.serving import RECONCILER, after_admit
from webhook.podgroups.serving import setup as setup_podgroups

__all__ = [
    "CONFIG",
    "MAX_BODY",
    "METRICS",
    "RECONCILER",
    "SOURCE",
    "STATE",
    "AdmitFn",
    "ServerState",
    "graceful_stop",
    "init_app",
    "run_until_signal",
    "start",
]

log = logging.getLogger(__name__)

MAX_BODY = 3 * 1024 * 1024
_OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})

AdmitFn = Callable[[Any, ClusterCapacity | None, WebhookConfig], AdmitResult]


@dataclass(slots=True)
class ServerState:
    """What the handlers share beyond the typed keys: lifecycle flags and tasks."""

    admit_fn: AdmitFn = admit
    background: Sequence[Callable[[], Awaitable[None]]] = ()
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    shutting_down: bool = False


CONFIG = web.AppKey("config", WebhookConfig)
SOURCE = web.AppKey("source", SnapshotSource)
METRICS = web.AppKey("metrics", WebhookMetrics)
STATE = web.AppKey("state", ServerState)


def _status(code: int, message: str) -> web.Response:
    """A Kubernetes Status object: what the API server logs when a webhook fails."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": "BadRequest" if code == 400 else "InternalError",
        "code": code,
    }
    return web.Response(status=code, body=orjson.dumps(body), content_type="application/json")


def _uid_of(review: Any) -> str | None:
    if isinstance(review, dict):
        req = review.get("request")
        if isinstance(req, dict) and isinstance(req.get("uid"), str) and req["uid"]:
            return str(req["uid"])
    return None


async def mutate(request: web.Request) -> web.Response:
    app = request.app
    metrics = app[METRICS]
    return await _mutate(request, app, metrics, app[STATE])


async def _mutate(
    request: web.Request,
    app: web.Application,
    metrics: WebhookMetrics,
    state: ServerState,
    *,
    json_checked: bool = False,
) -> web.Response:
    if not json_checked and request.content_type != "application/json":
        metrics.observe("unknown", "other", "bad_request", 0.0)
        return _status(400, f"content type {request.content_type!r}: expected application/json")
    length = request.content_length
    if length is not None and length > MAX_BODY:
        metrics.observe("unknown", "other", "bad_request", 0.0)
        return _status(400, f"body of {length} bytes is over the limit of {MAX_BODY} bytes")
    content = request.content
    try:
        if length is not None and content.is_eof():
            # The whole body came with the headers (a review fits a TLS record or
            # two): take it as it is, without read()'s copy into a growing buffer.
            body = content.read_nowait()
        else:
            body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        metrics.observe("unknown", "other", "bad_request", 0.0)
        return _status(400, f"body is over the limit of {MAX_BODY} bytes")
    t0 = time.perf_counter()
    review: Any = None
    try:
        review = orjson.loads(body)
        result = state.admit_fn(review, app[SOURCE].state(), app[CONFIG])
    except orjson.JSONDecodeError as e:
        metrics.observe("unknown", "other", "bad_request", time.perf_counter() - t0)
        return _status(400, f"body is not JSON: {e}")
    except ReviewError as e:
        metrics.observe("unknown", "other", "bad_request", time.perf_counter() - t0)
        return _status(400, f"not an admission.k8s.io/v1 AdmissionReview: {e}")
    except Exception:
        uid = _uid_of(review)
        log.exception("admission failed; allowing unchanged", extra={"fields": {"uid": uid}})
        metrics.observe("unknown", "other", "error", time.perf_counter() - t0)
        if uid is None:
            return _status(400, "the review could not be read")
        fallback = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": True},
        }
        return web.Response(body=orjson.dumps(fallback), content_type="application/json")

    try:
        out = orjson.dumps(result.review)
    except TypeError:  # cannot happen for admit's output; a custom admit_fn may err
        log.exception("response not serialisable; allowing unchanged")
        out = orjson.dumps(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": result.uid, "allowed": True},
            }
        )
    reconciler = app.get(RECONCILER)
    if reconciler is not None:
        out = await after_admit(reconciler, result, app[CONFIG], metrics, out)
    op = result.operation if result.operation in _OPERATIONS else "other"
    metrics.observe(
        op,
        result.kind,
        result.outcome,
        time.perf_counter() - t0,
        len(result.patch),
        len(result.warnings),
    )
    if result.outcome == "denied" or result.warnings:
        log.info(
            "review answered",
            extra={
                "fields": {
                    "uid": result.uid,
                    "kind": result.kind,
                    "outcome": result.outcome,
                    "reason": result.reason,
                    "warnings": list(result.warnings),
                }
            },
        )
    elif log.isEnabledFor(logging.DEBUG):
        log.debug(
            "review answered",
            extra={
                "fields": {
                    "uid": result.uid,
                    "kind": result.kind,
                    "outcome": result.outcome,
                    "patch_ops": len(result.patch),
                    "reason": result.reason,
                }
            },
        )
    resp = web.Response(body=out, content_type="application/json")
    if state.shutting_down:
        resp.force_close()
    return resp


def _not_ready(app: web.Application) -> str | None:
    """Why ``/readyz`` answers 503: shutting down, or the cluster view not synced."""
    if app[STATE].shutting_down:
        return "shutting down"
    return None if app[SOURCE].ready() else "cluster view not synced"


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    state = app[STATE]
    state.tasks = [asyncio.create_task(fn()) for fn in state.background]  # type: ignore[arg-type]
    yield
    for t in state.tasks:
        t.cancel()
    for t in state.tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t


async def _on_shutdown(app: web.Application) -> None:
    app[STATE].shutting_down = True


def init_app(
    config: WebhookConfig,
    *,
    source: SnapshotSource | None = None,
    reconciler: PodGroupReconciler | None = None,
    metrics: WebhookMetrics | None = None,
    background: Sequence[Callable[[], Awaitable[None]]] = (),
    admit_fn: AdmitFn = admit,
) -> web.Application:
    """The webhook application.

    ``source`` gives the cluster view (default: none, as with ``--no-cluster``);
    ``reconciler`` creates PodGroups (default: none; give it
    ``on_outcome=lambda _, o: metrics.podgroup(o)`` with the same ``metrics`` to count
    them); ``background`` are coroutines
    run for the app's life (certificate reloads, renewals).
    """
    app = web.Application(client_max_size=MAX_BODY)
    app[CONFIG] = config
    app[SOURCE] = source or NoCluster()
    app[METRICS] = metrics or WebhookMetrics()
    if reconciler is not None:
        # First, so the PodGroup controller starts before the background tasks and
        # stops after them.
        setup_podgroups(app, reconciler)
    app[STATE] = ServerState(admit_fn=admit_fn, background=background)
    app.router.add_post("/mutate", mutate)
    add_health_routes(app, metrics=app[METRICS].render, not_ready=lambda: _not_ready(app))
    app.cleanup_ctx.append(_lifecycle)
    app.on_shutdown.append(_on_shutdown)
    return app


async def start(
    app: web.Application,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None,
    *,
    shutdown_timeout: float = 25.0,
) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner (``await runner.cleanup()`` stops it
    gracefully: no new connections, in-flight reviews finish) and the bound port."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    _route_reviews_directly(runner, app)
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context, backlog=1024)
    await site.start()
    bound = port
    for addr in runner.addresses:
        if isinstance(addr, tuple) and len(addr) >= 2:
            bound = int(addr[1])
            break
    return runner, bound


def _route_reviews_directly(runner: web.AppRunner, app: web.Application) -> None:
    """Hand ``POST /mutate`` (``?timeout=10s`` as the API server adds it, or any query)
    to the review handler without the router: it is every request but a probe, and the
    router's match, freeze and middleware walk cost as much as a small review; a
    content type of exactly ``application/json`` is taken as it is. Anything
    else, or an app given middlewares or response hooks, goes the usual way."""
    server = runner.server
    if server is None or app.middlewares or len(app.on_response_prepare):
        return
    routed = server.request_handler
    metrics, state = app[METRICS], app[STATE]

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        raw = request.raw_path
        cut = raw.find("?")
        if (
            (raw if cut < 0 else raw[:cut]) == "/mutate"
            and request.method == "POST"
            and not (headers := request.headers).get("Expect")
        ):
            # The API server sends exactly this type: no need to parse it.
            exact = headers.get("Content-Type") == "application/json"
            return await _mutate(
                request,  # type: ignore[arg-type]
                app,
                metrics,
                state,
                json_checked=exact,
            )
        return await routed(request)

    server.request_handler = handler


async def graceful_stop(runner: web.AppRunner, delay: float = 0.0) -> None:
    """Stop the way a webhook behind a Service should: report not ready and keep
    answering for ``delay`` seconds (while endpoints drop this pod, the API server may
    still send reviews; each answer now closes its connection so the next review goes
    elsewhere), then stop listening, finish the reviews in progress, and clean up."""
    app = runner.app
    app[STATE].shutting_down = True
    if delay > 0:
        await asyncio.sleep(delay)
    await runner.cleanup()


async def run_until_signal(runner: web.AppRunner, delay: float = 0.0) -> None:
    """Wait for SIGTERM or SIGINT, then :func:`graceful_stop`."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
        log.info("signal received; shutting down", extra={"fields": {"delay_seconds": delay}})
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await graceful_stop(runner, delay)
        log.info("stopped")
