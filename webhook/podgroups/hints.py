"""An owner named by a later admission (an :class:`~webhook.podgroup_intent.OwnerHint`:
one of the gang's pods, or a child workload, with the owner's uid), on the request path.

* It gives a pending intent its owner's uid, so the PodGroup's ownerReference needs no
  read (:mod:`~webhook.podgroups.owner_lookup` wakes on it).
* It revives an intent parked because its owner never showed up in time (a workload
  suspended for a while whose pods come now).
* A pod whose PodGroup is neither pending, parked nor known to exist queues a look at
  its workload (:mod:`~webhook.podgroups.missing`).

Only pending intents take hints: a remembered hint could be stale (a workload deleted
and made again under the same name has a new uid)."""

from __future__ import annotations

from webhook.podgroup_intent import OwnerHint, PodGroupIntent
from webhook.podgroups.intake import submit
from webhook.podgroups.reconcile_context import ReconcileContext
from webhook.podgroups.work_item import WorkItem, is_pod, names_owner

__all__ = ["hint"]


def hint(ctx: ReconcileContext, hint: OwnerHint) -> None:
    """Act on ``hint``; see the module docstring. Never blocks, never raises."""
    if not hint.owner.uid:
        return
    pend = ctx.queue.get((*hint.key, ""))
    if pend is None:
        parked = ctx.known.parked_for(hint.key)
        if parked is not None and names_owner(parked.owner, hint.owner):
            # The owner showed up after all (a workload suspended for a while).
            ctx.known.unpark(hint.key)
            intent = PodGroupIntent(
                parked.api_version,
                parked.plural,
                parked.namespace,
                parked.name,
                parked.body,
                hint.owner,
            )
            submit(ctx, intent, dry_run=False)
        elif parked is None:
            _look_at_workload(ctx, hint)
        return
    if pend.owner is not None and pend.owner.uid:
        return
    if names_owner(pend.intent.owner, hint.owner):
        pend.owner = hint.owner
        pend.woken.set()


def _look_at_workload(ctx: ReconcileContext, hint: OwnerHint) -> None:
    """Queue a look at the workload of a pod whose PodGroup is not known to exist."""
    if ctx.calls.ensure is None or is_pod(hint.owner) or ctx.known.made(hint.key, hint.owner.uid):
        return
    placeholder = PodGroupIntent(
        hint.api_version, hint.plural, hint.namespace, hint.name, {}, hint.owner
    )
    ctx.queue.put((*hint.key, ""), WorkItem(placeholder, hint.owner, ctx.clock(), ensure=hint))
