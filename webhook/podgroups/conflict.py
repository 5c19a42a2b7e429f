"""What a PodGroup that made the create answer 409 is to the intent.

Read through the injected ``existing`` call (:class:`~webhook.podgroup_intent.Existing`):
ours; a bare-pod gang's, which this pod joins as one more owner (so the PodGroup lives
as long as any of its pods); someone else's, left alone; a stale one of a deleted
workload of the same name, which the garbage collector is about to remove; or gone
since. For an intent made with ``update=True`` (an UPDATE of the workload changed its
replica counts -- following a scaled workload), the injected ``update`` call brings an
existing PodGroup of the same owner to the new minMember and minResources instead."""

from __future__ import annotations

from webhook.podgroup_intent import Existing, OwnerRef, PodGroupIntent
from webhook.podgroups.reconcile_context import ReconcileContext
from webhook.podgroups.reconciler_port import PodGroupOutcome

__all__ = ["EXISTING_OUTCOME", "inspect"]


async def inspect(
    ctx: ReconcileContext, intent: PodGroupIntent, owner: OwnerRef | None
) -> Existing:
    """What is there (may raise like the create)."""
    if intent.update and ctx.calls.update is not None:
        return await ctx.calls.update(intent, owner, intent.render(owner))
    if ctx.calls.existing is None:
        return Existing.OURS  # nothing to tell them apart with: 409 is success
    return await ctx.calls.existing(intent, owner)


# The outcome reported for a PodGroup found there that the work is done with.
EXISTING_OUTCOME: dict[Existing, PodGroupOutcome] = {
    Existing.OURS: "exists",
    Existing.UPDATED: "updated",
    Existing.JOINED: "joined",
    Existing.OTHER: "foreign",
}
