"""The PodGroup controller in the webhook's aiohttp app: its typed key, its lifecycle
(started with the app, stopped after it stops answering), and what an admission answer
does with it on the request path.

:func:`setup` wires it into an app (:func:`webhook.server.init_app` calls it);
:func:`after_admit` is the request path's step once :func:`webhook.admission.entry.admit`
has answered: it hands the intents and owner hints over, and for a gang's first pod
waits -- bounded by ``podGroupWait`` -- for its PodGroup
(:mod:`~webhook.podgroups.first_pod`)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import orjson
from aiohttp import web

from webhook.admission.review import AdmitResult
from webhook.config import WebhookConfig
from webhook.metrics import WebhookMetrics
from webhook.podgroups.reconciler import PodGroupReconciler

__all__ = ["RECONCILER", "after_admit", "setup"]

log = logging.getLogger(__name__)

RECONCILER = web.AppKey("reconciler", PodGroupReconciler)


def setup(app: web.Application, reconciler: PodGroupReconciler) -> None:
    """Hold ``reconciler`` in ``app`` and run its background controller for the app's
    life. Call it before the app's other cleanup contexts, so the controller starts
    first and stops last."""
    app[RECONCILER] = reconciler
    app.cleanup_ctx.append(_running)


async def _running(app: web.Application) -> AsyncIterator[None]:
    reconciler = app[RECONCILER]
    await reconciler.start()
    yield
    await reconciler.stop()


async def after_admit(
    reconciler: PodGroupReconciler,
    result: AdmitResult,
    config: WebhookConfig,
    metrics: WebhookMetrics,
    out: bytes,
) -> bytes:
    """Hand ``result``'s intents and hints to ``reconciler``; the answer to send, ``out``
    or, for a first pod whose PodGroup was not made in time, ``out`` with a warning."""
    for intent in result.intents:
        reconciler.submit(intent, dry_run=result.dry_run)
    for hint in result.hints:
        reconciler.hint(hint)
    if _waits_for_podgroup(result, config):
        return await _podgroup_first(reconciler, result, config, metrics, out)
    return out


def _waits_for_podgroup(result: AdmitResult, config: WebhookConfig) -> bool:
    """Whether this answer waits for the pod's PodGroup (see :func:`_podgroup_first`)."""
    return (
        config.pod_group_wait_seconds > 0
        and result.kind == "Pod"
        and result.operation == "CREATE"
        and not result.dry_run
        and bool(result.intents or result.hints)
        and result.allowed
    )


async def _podgroup_first(
    reconciler: PodGroupReconciler,
    result: AdmitResult,
    config: WebhookConfig,
    metrics: WebhookMetrics,
    out: bytes,
) -> bytes:
    """Answer a pod only once its gang's PodGroup exists, within ``podGroupWait``:
    Volcano's ``/pods/validate`` (on by default through Volcano 1.11) refuses a pod
    whose PodGroup is not there yet. Known PodGroups cost nothing. Not made in time,
    or not made at all: the pod is allowed all the same, with a warning -- never a
    500, never a timeout of the API server's call (failurePolicy Fail would refuse the
    pod); Volcano may then refuse it, and its controller (or the user) makes it again
    once the PodGroup, still being made in the background, is there."""
    try:
        got = await reconciler.before_answer(
            result.intents, result.hints, config.pod_group_wait_seconds
        )
    except Exception:  # never fail a review over it
        log.exception("waiting for the PodGroup failed; answering")
        got = "failed"
    if got == "ready":
        return out
    metrics.podgroup_wait(got)
    if got == "made":
        return out
    names = sorted({i.name for i in result.intents} | {h.name for h in result.hints})
    why = "not made yet" if got == "late" else "could not be made"
    warning = (
        f"corral: PodGroup {', '.join(names)} {why} (podGroupWait {config.pod_group_wait}); "
        "Volcano may refuse this pod until it is there"
    )
    log.warning(
        "pod answered before its PodGroup",
        extra={"fields": {"uid": result.uid, "podgroup": names, "wait": got}},
    )
    response = result.review["response"]
    response["warnings"] = [*(response.get("warnings") or ()), warning]
    return orjson.dumps(result.review)
