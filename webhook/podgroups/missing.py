"""A gang's PodGroup made when its pods come without one.

The UPDATE that resumed a workload may never have reached the webhook
(``failurePolicy: Ignore``), or the webhook restarted and remembers nothing: a pod of a
gang whose PodGroup is neither pending, parked nor known to exist queues a look at its
workload (:mod:`~webhook.podgroups.hints`). Here the injected ``ensure`` call
(:class:`~webhook.podgroups.from_workload.OwnerPodGroups` on a cluster) reads the
gang's intent from the live workload -- none while it is suspended -- and it is made as
any other (:mod:`~webhook.podgroups.create`). A gang that is not corral's is
remembered, so its other pods make no more reads."""

from __future__ import annotations

import asyncio
import logging

from webhook.podgroups.create import make
from webhook.podgroups.reconcile_context import ReconcileContext
from webhook.podgroups.work_item import WorkItem, podgroup_name

__all__ = ["make_from_workload"]

log = logging.getLogger(__name__)


async def make_from_workload(ctx: ReconcileContext, pend: WorkItem) -> None:
    """Read ``pend``'s intent from the workload its pod named, and make it."""
    intent = pend.intent
    assert ctx.calls.ensure is not None and pend.ensure is not None
    hint, pend.ensure = pend.ensure, None
    try:
        found = await ctx.calls.ensure(hint)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        log.info(
            "the workload of a pod without a known PodGroup was not read",
            extra={"fields": {"podgroup": podgroup_name(intent.key), "error": str(e)}},
        )
        return
    if found is False:
        ctx.known.mark_made(hint.key, hint.owner.uid)
        pend.made = None
        return
    if found is None or found.key != intent.key or found.remove:
        return
    pend.intent = found
    pend.owner = found.owner
    await make(ctx, pend)
    top = found.owner.uid if found.owner is not None else ""
    if ctx.known.made(found.key, top):
        # Its other pods name the same workload: no more looks at it.
        ctx.known.mark_made(hint.key, hint.owner.uid)
