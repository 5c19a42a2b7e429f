"""The request-path create: a gang's PodGroup made before its first pod is answered.

Volcano's ``/pods/validate`` (on by default through Volcano 1.11) refuses a pod whose
PodGroup is not there yet, so the answer to a pod CREATE waits -- with a deadline --
for the PodGroups its admission named (already given to
:func:`~webhook.podgroups.intake.submit` and :func:`~webhook.podgroups.hints.hint`):

* one known to exist costs nothing (later pods of the gang make no call);
* a workload's, pending with its owner's uid named by this pod, is created now rather
  than behind the queue;
* a bare-pod gang's cannot wait for its owner -- the pod being answered -- so it is
  created now without ownerReferences, and the pods join it as owners afterwards (the
  background work of each, :mod:`~webhook.podgroups.create`);
* one still to be read from the pod's workload (:mod:`~webhook.podgroups.missing`) or
  waiting for its owner's uid is waited for as the background work makes it.

Either create is one task per PodGroup, shared by every pod of the gang that asks
meanwhile and shielded, so a pod that stops waiting leaves it running for the next;
the background work (:mod:`~webhook.podgroups.create`) waits for it instead of making a
second."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence

from webhook.podgroup_intent import OwnerHint, OwnerRef, PodGroupIntent
from webhook.podgroups.reconcile_context import ReconcileContext
from webhook.podgroups.reconciler_port import Wait, retryable, status_of
from webhook.podgroups.work_item import WorkItem, is_pod, podgroup_name, settled, slot_of

__all__ = ["before_answer"]

log = logging.getLogger(__name__)


async def before_answer(
    ctx: ReconcileContext,
    intents: Sequence[PodGroupIntent],
    hints: Sequence[OwnerHint],
    timeout: float,
) -> Wait:
    """Wait, at most ``timeout`` seconds, until the PodGroups a pod's admission named
    exist; see the module docstring. Bounded, never raises."""
    waits: list[Awaitable[bool | None]] = []
    for pend in _waited(ctx, intents, hints):
        owner = pend.owner or pend.intent.owner
        if pend.ensure is not None or (owner is not None and not owner.uid and not is_pod(owner)):
            waits.append(settled(pend))
        elif owner is not None and not owner.uid:  # a bare pod: this one
            if not ctx.known.exists(pend.intent.key):
                waits.append(_early_create(ctx, pend.intent, None))
        elif not ctx.known.made(pend.intent.key, owner.uid if owner else ""):
            waits.append(_early_create(ctx, pend.intent, owner))
    if not waits:
        return "ready"
    try:
        got = await asyncio.wait_for(asyncio.gather(*waits), timeout)
    except TimeoutError:
        return "late"
    if any(g is False for g in got):
        return "failed"
    return "made" if any(got) else "ready"


def _waited(
    ctx: ReconcileContext, intents: Sequence[PodGroupIntent], hints: Sequence[OwnerHint]
) -> list[WorkItem]:
    """The work in progress on the PodGroups a pod's admission named."""
    out: list[WorkItem] = []
    # An update intent (a resumed or scaled workload) creates the PodGroup when it is not
    # there: waited for like any other. A removal is not.
    for intent in intents:
        if not intent.remove:
            pend = ctx.queue.get(slot_of(intent))
            if pend is not None:  # else known to exist for this owner
                out.append(pend)
    for hint in hints:
        pend = ctx.queue.get((*hint.key, ""))
        if pend is not None and not pend.intent.remove:
            out.append(pend)
    return out


def _early_create(
    ctx: ReconcileContext, intent: PodGroupIntent, owner: OwnerRef | None
) -> Awaitable[bool]:
    """The one create of a gang's PodGroup on the request path, shared by its pods
    and shielded: a pod that stops waiting leaves it running for the next."""
    key = intent.key
    early = ctx.early
    task = early.get(key)
    if task is None:
        task = asyncio.create_task(_create(ctx, intent, owner), name="podgroup-early")
        early[key] = task
        task.add_done_callback(lambda t: early.pop(key, None) if early.get(key) is t else None)
    return asyncio.shield(task)


async def _create(ctx: ReconcileContext, intent: PodGroupIntent, owner: OwnerRef | None) -> bool:
    """Create ``intent`` with ``owner`` (a workload with its uid), or without
    ownerReferences (a bare-pod gang: its pods join it as owners later, the background
    work of each, :meth:`~webhook.podgroups.calls.PodGroupApi.existing`). 409 is
    success: what is there is the background work's to inspect."""
    body = intent.render(owner)
    for attempt in range(1, ctx.policy.attempts + 1):
        try:
            await ctx.calls.create(intent, body)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            status = status_of(e)
            if status == 409:
                ctx.known.saw(intent.key)
                return True
            if not retryable(status) or attempt == ctx.policy.attempts:
                log.warning(
                    "PodGroup not made before its first pod was answered",
                    extra={
                        "fields": {
                            "podgroup": podgroup_name(intent.key),
                            "status": status,
                            "error": str(e),
                        }
                    },
                )
                return False
            await ctx.backoff(attempt)
            continue
        ctx.known.saw(intent.key)
        if owner is not None:
            ctx.known.mark_made(intent.key, owner.uid)
        elif intent.owner is None:
            ctx.known.mark_made(intent.key, "")  # a gang nobody owns
        else:
            ctx.known.mark_unowned(intent.key)
        log.info(
            "PodGroup created before its first pod was answered",
            extra={"fields": {"podgroup": podgroup_name(intent.key)}},
        )
        ctx.report(intent, "created")
        return True
    return False
