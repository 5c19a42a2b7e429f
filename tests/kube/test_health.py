"""The health and metrics app both components serve: what a probe and a scrape get."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from gangplace.health import add_health_routes, health_app
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


@asynccontextmanager
async def _serve(app: web.Application) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as session:
            yield session, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


async def test_plain_health_answers_ok_and_readiness_names_why_not(
    registry: CollectorRegistry,
) -> None:
    why: list[str | None] = ["informers not synced"]
    app = health_app(metrics=lambda: generate_latest(registry), not_ready=lambda: why[0])
    async with _serve(app) as (session, url):
        async with session.get(f"{url}/healthz") as r:
            assert (r.status, r.content_type, await r.text()) == (200, "text/plain", "ok")
        async with session.get(f"{url}/readyz") as r:
            assert (r.status, await r.text()) == (503, "informers not synced")
        why[0] = None
        async with session.get(f"{url}/readyz") as r:
            assert (r.status, await r.text()) == (200, "ok")


async def test_health_with_a_state_answers_it_as_json_read_at_each_probe(
    registry: CollectorRegistry,
) -> None:
    runs = [0]

    def status() -> dict[str, Any]:
        return {"status": "ok", "runs": runs[0], "last_error": None}

    app = health_app(metrics=lambda: generate_latest(registry), status=status)
    async with _serve(app) as (session, url):
        runs[0] = 3
        async with session.get(f"{url}/healthz") as r:
            assert r.content_type == "application/json"
            assert await r.json() == {"status": "ok", "runs": 3, "last_error": None}


async def test_each_scrape_renders_the_registry_after_the_callback_refreshes_it(
    registry: CollectorRegistry,
) -> None:
    gauge = Gauge("corral_test_leader", "1 while leading", registry=registry)
    leading = [True]

    def render() -> bytes:
        gauge.set(1 if leading[0] else 0)
        return generate_latest(registry)

    app = web.Application()

    async def own(request: web.Request) -> web.Response:
        return web.Response(text="mine")

    app.router.add_get("/own", own)
    add_health_routes(app, metrics=render)
    async with _serve(app) as (session, url):
        async with session.get(f"{url}/metrics") as r:
            assert r.headers["Content-Type"] == CONTENT_TYPE_LATEST
            assert "corral_test_leader 1.0" in await r.text()
        leading[0] = False
        async with session.get(f"{url}/metrics") as r:
            assert "corral_test_leader 0.0" in await r.text()
        async with session.get(f"{url}/own") as r:
            assert await r.text() == "mine"
        async with session.get(f"{url}/readyz") as r:
            assert (r.status, await r.text()) == (200, "ok")
