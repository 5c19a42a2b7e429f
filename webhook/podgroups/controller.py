"""The background controller: workers that take PodGroup work off the queue and hand
each item to its behaviour, a small reconcile function per module:

* removal of a suspended workload's PodGroup -- :mod:`~webhook.podgroups.removal`;
* a pod's gang whose PodGroup is read from its workload -- :mod:`~webhook.podgroups.missing`;
* everything else: make it, or find it there -- :mod:`~webhook.podgroups.create`.

A newer update or removal queued for the same PodGroup meanwhile
(:attr:`~webhook.podgroups.work_item.WorkItem.again`) is worked on after the current one,
so the last one wins. When the work on an item ends, whoever waits for it on the request
path (:mod:`~webhook.podgroups.first_pod`) is told. A bug in a behaviour is logged and
reported as ``failed``; it never stops a worker."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from webhook.podgroups.create import make
from webhook.podgroups.missing import make_from_workload
from webhook.podgroups.reconcile_context import ReconcileContext
from webhook.podgroups.removal import remove_suspended
from webhook.podgroups.work_item import WorkItem, podgroup_name

__all__ = ["PodGroupController", "reconcile"]

log = logging.getLogger(__name__)


async def reconcile(ctx: ReconcileContext, pend: WorkItem) -> None:
    """One work item, by its behaviour."""
    if pend.intent.remove:
        await remove_suspended(ctx, pend.intent)
    elif pend.ensure is not None:
        await make_from_workload(ctx, pend)
    else:
        await make(ctx, pend)


class PodGroupController:
    """The workers over ``ctx.queue``, started and stopped with the server."""

    def __init__(self, ctx: ReconcileContext, *, workers: int) -> None:
        self._ctx = ctx
        self._n_workers = workers
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._worker(), name=f"podgroup-worker-{i}")
                for i in range(self._n_workers)
            ]

    async def stop(self, drain_timeout: float = 5.0) -> None:
        """Finish what is queued (up to ``drain_timeout`` seconds), then stop, with the
        creates in flight on the request path."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ctx.queue.drained(), drain_timeout)
        early = list(self._ctx.early.values())
        for t in [*self._tasks, *early]:
            t.cancel()
        for t in [*self._tasks, *early]:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks = []
        self._ctx.early.clear()

    async def _worker(self) -> None:
        ctx = self._ctx
        while True:
            slot, pend = await ctx.queue.take()
            try:
                while pend is not None:
                    await reconcile(ctx, pend)
                    if pend.again is None:
                        break
                    pend.intent, pend.again = pend.again, None
                    if pend.intent.owner is not None and pend.intent.owner.uid:
                        pend.owner = pend.intent.owner
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug here must not kill the worker
                log.exception(
                    "podgroup reconcile failed",
                    extra={"fields": {"podgroup": podgroup_name(slot)}},
                )
                if pend is not None:
                    ctx.report(pend.intent, "failed")
            finally:
                if pend is not None:
                    pend.settled.set()
                ctx.queue.done(slot)
