"""Taking an intent on the request path: never blocks, never raises.

* Idempotent: intents for the same PodGroup collapse while pending, one made for this
  owner (by uid) is not made again.
* Never for dry-run requests.
* A newer update or removal of a PodGroup in progress is kept for after the current
  work (:attr:`~webhook.podgroups.work_item.WorkItem.again`): the last one wins.
* An intent supersedes one parked for the same PodGroup."""

from __future__ import annotations

import logging

from webhook.podgroup_intent import PodGroupIntent
from webhook.podgroups.reconcile_context import ReconcileContext
from webhook.podgroups.work_item import WorkItem, podgroup_name, slot_of

__all__ = ["submit"]

log = logging.getLogger(__name__)


def submit(ctx: ReconcileContext, intent: PodGroupIntent, *, dry_run: bool) -> bool:
    """Queue ``intent``; False when it is dropped (dry run, duplicate, queue full)."""
    if dry_run:
        return False
    key = intent.key
    owner = intent.owner
    ctx.known.unpark(key)  # a newer intent for the same PodGroup supersedes it
    if intent.remove:
        if ctx.calls.remove is None or owner is None or not owner.uid:
            return False
        ctx.known.forget(key, owner.uid)
    elif not intent.update:
        if owner is not None and owner.uid and ctx.known.made(key, owner.uid):
            return False
        if owner is None and ctx.known.made(key, ""):
            return False
    slot = slot_of(intent)
    pend = ctx.queue.get(slot)
    if pend is not None and (intent.update or intent.remove):
        pend.again = intent
        return True
    if pend is not None:
        if (pend.owner is None or not pend.owner.uid) and owner is not None and owner.uid:
            pend.owner = owner
            pend.woken.set()
        return False
    if not ctx.queue.put(slot, WorkItem(intent, owner, ctx.clock())):
        log.warning(
            "podgroup queue full; dropped", extra={"fields": {"podgroup": podgroup_name(key)}}
        )
        ctx.report(intent, "dropped")
        return False
    return True
