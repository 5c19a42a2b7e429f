"""The health and metrics endpoints every corral process serves, for the kubelet's
probes and Prometheus' scrapes:

- ``GET /healthz``: alive. ``ok``, or the process's state as JSON when it has one;
- ``GET /readyz``: ready for traffic. ``ok``, or 503 with the reason it is not;
- ``GET /metrics``: the Prometheus text format.

One piece for both components, so they answer probes and scrapes the same way; each
says what its state, its readiness and its metrics are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson
from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["add_health_routes", "health_app"]


def _json(obj: Any) -> str:
    return orjson.dumps(obj).decode()


def add_health_routes(
    app: web.Application,
    *,
    metrics: Callable[[], bytes],
    not_ready: Callable[[], str | None] = lambda: None,
    status: Callable[[], Mapping[str, Any]] | None = None,
) -> None:
    """Serve ``/healthz``, ``/readyz`` and ``/metrics`` on ``app``, beside its own routes.

    ``metrics`` renders the registry (called on each scrape, so it may refresh gauges
    first); ``not_ready`` says why the process is not ready, or None when it is;
    ``status`` is the JSON ``/healthz`` answers (default: the text ``ok``).
    """

    async def healthz(request: web.Request) -> web.Response:
        if status is None:
            return web.Response(text="ok")
        return web.json_response(status(), dumps=_json)

    async def readyz(request: web.Request) -> web.Response:
        why = not_ready()
        if why is not None:
            return web.Response(status=503, text=why)
        return web.Response(text="ok")

    async def scrape(request: web.Request) -> web.Response:
        resp = web.Response(body=metrics())
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", scrape)


def health_app(
    *,
    metrics: Callable[[], bytes],
    not_ready: Callable[[], str | None] = lambda: None,
    status: Callable[[], Mapping[str, Any]] | None = None,
) -> web.Application:
    """An app serving only the three routes, for a process with no other HTTP."""
    app = web.Application()
    add_health_routes(app, metrics=metrics, not_ready=not_ready, status=status)
    return app
