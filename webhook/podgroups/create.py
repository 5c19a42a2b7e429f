"""Making one gang's PodGroup in the background.

* Garbage-collected with the workload: the PodGroup's ownerReference points to the
  top-level owner, whose uid comes from a hint or a read
  (:mod:`~webhook.podgroups.owner_lookup`). An owner that never shows up (admission was
  refused further down the chain) gets no PodGroup: its intent is parked until a hint
  names the owner (:mod:`~webhook.podgroups.hints`), and a PodGroup made for it on the
  request path is cleaned up (:mod:`~webhook.podgroups.unowned`).
* Retried with capped exponential backoff and jitter on 429, 5xx and transport errors;
  other 4xx are final (a 404 usually means the CRD is not installed).
* Idempotent: 409 Conflict is read (:mod:`~webhook.podgroups.conflict`) -- ours, joined,
  updated or someone else's end the work; a stale one of a deleted workload is waited
  out; one gone since is created again.
* One create per PodGroup: a create in flight on the request path
  (:mod:`~webhook.podgroups.first_pod`) is waited for rather than repeated."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from webhook.podgroup_intent import Existing, OwnerRef
from webhook.podgroups.conflict import EXISTING_OUTCOME, inspect
from webhook.podgroups.owner_lookup import find_owner
from webhook.podgroups.reconcile_context import ReconcileContext
from webhook.podgroups.reconciler_port import retryable, status_of
from webhook.podgroups.unowned import discard_unowned
from webhook.podgroups.work_item import WorkItem, podgroup_name

__all__ = ["make"]

log = logging.getLogger(__name__)


async def make(ctx: ReconcileContext, pend: WorkItem) -> None:
    """Make the PodGroup of ``pend``, or find it there; see the module docstring."""
    intent = pend.intent
    owner = await find_owner(
        pend, resolve=ctx.calls.resolve_owner, policy=ctx.policy, clock=ctx.clock, rng=ctx.rng
    )
    if owner is False:
        log.warning(
            "owner never appeared; no PodGroup until one of its pods names it",
            extra={
                "fields": {
                    "podgroup": podgroup_name(intent.key),
                    "owner": intent.owner and f"{intent.owner.kind}/{intent.owner.name}",
                }
            },
        )
        ctx.known.park(intent)
        ctx.report(intent, "no-owner")
        await discard_unowned(ctx, intent)
        return
    assert owner is None or isinstance(owner, OwnerRef)
    uid = owner.uid if owner else ""
    early = ctx.early.get(intent.key)
    if early is not None:
        # A pod's admission is creating it on the request path: no second create.
        with contextlib.suppress(Exception):
            await asyncio.shield(early)
    if ctx.known.made(intent.key, uid) and not intent.update:
        _exists(ctx, pend)
        return
    body = intent.render(owner)
    for attempt in range(1, ctx.policy.attempts + 1):
        try:
            await ctx.calls.create(intent, body)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            status = status_of(e)
            if status == 409:
                try:
                    found = await inspect(ctx, intent, owner)
                except asyncio.CancelledError:
                    raise
                except Exception as err:  # read like a failed create
                    e, status, found = err, status_of(err), None
                    if status == 409:
                        status = None  # it kept changing under us: try again
                if found is Existing.GONE:
                    continue
                if found is Existing.STALE:
                    if attempt == ctx.policy.attempts:
                        log.error(
                            "a PodGroup of an earlier owner of the same name is still "
                            "there; gave up waiting for the garbage collector",
                            extra={
                                "fields": {
                                    "podgroup": podgroup_name(intent.key),
                                    "attempts": attempt,
                                }
                            },
                        )
                        ctx.report(intent, "stale")
                        return
                    await ctx.backoff(attempt)
                    continue
                if found is not None:
                    ctx.known.mark_made(intent.key, uid)
                    ctx.known.owned_now(intent.key)
                    _exists(ctx, pend)
                    ctx.report(intent, EXISTING_OUTCOME[found])
                    return
            if not retryable(status) or attempt == ctx.policy.attempts:
                log.error(
                    "PodGroup create failed",
                    extra={
                        "fields": {
                            "podgroup": podgroup_name(intent.key),
                            "status": status,
                            "error": str(e),
                            "attempts": attempt,
                        }
                    },
                )
                ctx.report(intent, "failed")
                return
            await ctx.backoff(attempt)
            continue
        ctx.known.mark_made(intent.key, uid)
        _exists(ctx, pend)
        log.info("PodGroup created", extra={"fields": {"podgroup": podgroup_name(intent.key)}})
        ctx.report(intent, "created")
        return
    # Only a PodGroup that kept vanishing between the 409 and the look gets here.
    log.error("PodGroup create failed", extra={"fields": {"podgroup": podgroup_name(intent.key)}})
    ctx.report(intent, "failed")


def _exists(ctx: ReconcileContext, pend: WorkItem) -> None:
    """The PodGroup of ``pend`` is there: tell the pods that wait for it."""
    ctx.known.saw(pend.intent.key)
    pend.made = True
    pend.settled.set()
