"""Cleaning up after a bare-pod gang whose pod never appeared.

The request-path create (:mod:`~webhook.podgroups.first_pod`) makes a bare-pod gang's
PodGroup without ownerReferences, the pod being answered not existing yet. If that pod
never shows up (refused further down the admission chain), nothing owns the PodGroup
and the garbage collector never removes it -- while Volcano would hold it, without
pods, Inqueue. So it is deleted again, if it still has no owner."""

from __future__ import annotations

import asyncio
import logging

from webhook.podgroup_intent import OwnerRef, PodGroupIntent
from webhook.podgroups.reconcile_context import ReconcileContext
from webhook.podgroups.work_item import is_pod, podgroup_name

__all__ = ["discard_unowned"]

log = logging.getLogger(__name__)


async def discard_unowned(ctx: ReconcileContext, intent: PodGroupIntent) -> None:
    """Delete the PodGroup made without owners for ``intent``'s pod, if it still has
    none; a failure is logged and left (nothing else would remove it either)."""
    key = intent.key
    owner = intent.owner
    if ctx.calls.remove is None or owner is None or not is_pod(owner):
        return
    if not ctx.known.take_unowned(key):
        return
    try:
        got = await ctx.calls.remove(intent, OwnerRef(owner.api_version, owner.kind, owner.name))
    except asyncio.CancelledError:
        raise
    except Exception as e:
        log.info(
            "PodGroup made for a pod that never appeared not removed",
            extra={"fields": {"podgroup": podgroup_name(key), "error": str(e)}},
        )
        return
    if got == "removed":
        ctx.known.gone(key)
        log.info(
            "PodGroup made for a pod that never appeared removed",
            extra={"fields": {"podgroup": podgroup_name(key)}},
        )
        ctx.report(intent, "removed")
