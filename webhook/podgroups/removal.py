"""Removing the PodGroup of a suspended workload.

An intent made with ``remove=True`` (an UPDATE suspended the workload) deletes the
PodGroup through the injected ``remove`` call -- only one corral made that this owner
owns -- retried like a create, and forgets it was made, so that the resume makes it
again. A suspended workload has no PodGroup: Volcano would hold one without pods
``Inqueue`` (docs/safe-moves.md)."""

from __future__ import annotations

import asyncio
import logging

from webhook.podgroup_intent import PodGroupIntent
from webhook.podgroups.reconcile_context import ReconcileContext
from webhook.podgroups.reconciler_port import retryable, status_of
from webhook.podgroups.work_item import podgroup_name

__all__ = ["remove_suspended"]

log = logging.getLogger(__name__)


async def remove_suspended(ctx: ReconcileContext, intent: PodGroupIntent) -> None:
    """Delete a suspended workload's PodGroup, retried like a create."""
    owner = intent.owner
    assert ctx.calls.remove is not None and owner is not None
    for attempt in range(1, ctx.policy.attempts + 1):
        try:
            got = await ctx.calls.remove(intent, owner)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            status = status_of(e)
            if not retryable(status) or attempt == ctx.policy.attempts:
                log.error(
                    "PodGroup of a suspended workload not removed",
                    extra={
                        "fields": {
                            "podgroup": podgroup_name(intent.key),
                            "status": status,
                            "error": str(e),
                        }
                    },
                )
                ctx.report(intent, "failed")
                return
            await ctx.backoff(attempt)
            continue
        # A create that finished meanwhile must not be remembered as made.
        ctx.known.forget(intent.key, owner.uid)
        if got == "removed":
            log.info(
                "PodGroup of a suspended workload removed",
                extra={"fields": {"podgroup": podgroup_name(intent.key)}},
            )
        ctx.report(intent, "foreign" if got == "foreign" else got)
        return
