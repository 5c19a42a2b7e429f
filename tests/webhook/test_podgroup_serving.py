"""The PodGroup controller in the webhook's app: it runs for the app's life, starting
before the app's background tasks and stopping after them, so work handed over while
they stop is still done; without one, the app serves all the same."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from webhook.config import WebhookConfig
from webhook.podgroup_intent import OwnerRef, PodGroupIntent
from webhook.podgroups.reconciler import PodGroupReconciler, RetryPolicy
from webhook.podgroups.serving import RECONCILER
from webhook.server import init_app

API = "scheduling.volcano.sh/v1beta1"
JOB = OwnerRef("batch/v1", "Job", "a", "uid-1")


def intent(name: str) -> PodGroupIntent:
    body = {"apiVersion": API, "kind": "PodGroup", "metadata": {"name": name, "namespace": "ml"}}
    return PodGroupIntent(API, "podgroups", "ml", name, body, JOB)


async def test_the_controller_outlives_the_background_tasks() -> None:
    created: list[str] = []

    async def create(i: PodGroupIntent, body: dict[str, Any]) -> None:
        created.append(i.name)

    rec = PodGroupReconciler(create, policy=RetryPolicy(attempts=1))
    started = asyncio.Event()

    async def background() -> None:
        rec.submit(intent("while-running"), dry_run=False)
        started.set()
        try:
            await asyncio.Event().wait()
        finally:  # stopping: the controller is still there to take this
            rec.submit(intent("while-stopping"), dry_run=False)

    app = init_app(WebhookConfig(), reconciler=rec, background=[background])
    assert app[RECONCILER] is rec
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await asyncio.wait_for(started.wait(), 2)
        await asyncio.wait_for(rec.drain(), 2)
        assert created == ["while-running"]
    finally:
        await runner.cleanup()
    assert created == ["while-running", "while-stopping"]
    assert rec.pending == 0


async def test_no_controller_no_key() -> None:
    app = init_app(WebhookConfig())
    assert app.get(RECONCILER) is None
    runner = web.AppRunner(app)
    await runner.setup()
    await runner.cleanup()
