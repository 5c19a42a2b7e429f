"""Making sure each gang's PodGroup exists, off the request path.

Admission only *describes* the PodGroup it wants (a
:class:`~webhook.podgroup_intent.PodGroupIntent`); the :class:`PodGroupReconciler`
makes it through injected async calls (:mod:`~webhook.podgroups.reconciler_port`), so
an admission answer never waits on the API server -- except, bounded by
``podGroupWait``, a gang's first pod. It is the one object the server holds: the
request path's entry points and the background controller's lifecycle over one shared
state (:class:`~webhook.podgroups.reconcile_context.ReconcileContext`, its queue
:class:`~webhook.podgroups.work_queue.WorkQueue` of
:class:`~webhook.podgroups.work_item.WorkItem`). Each behaviour is a module:

On the request path (never blocks, never raises):

* :mod:`~webhook.podgroups.intake` -- an intent queued, idempotently; never for dry-run
  requests; a newer update or removal kept for after the current work.
* :mod:`~webhook.podgroups.hints` -- an owner named by a later admission: a pending
  intent's owner uid, a parked intent revived, a look at the workload of a pod whose
  PodGroup is not known.
* :mod:`~webhook.podgroups.first_pod` -- the request-path create: a gang's PodGroup made
  before its first pod is answered (Volcano's ``/pods/validate`` refuses a pod whose
  PodGroup is not there yet), within a deadline.

In the background (:mod:`~webhook.podgroups.controller`: the workers, and which
behaviour an item goes to):

* :mod:`~webhook.podgroups.create` -- made with its owner's ownerReference (the uid from
  :mod:`~webhook.podgroups.owner_lookup`), retried with backoff; parked when the owner
  never shows up.
* :mod:`~webhook.podgroups.conflict` -- what a PodGroup already there (409) is: ours,
  joined by a bare-pod gang's pod, updated to a scaled workload, someone else's, a
  stale one being garbage-collected, or gone.
* :mod:`~webhook.podgroups.removal` -- deleted with a suspended workload.
* :mod:`~webhook.podgroups.unowned` -- deleted again when made without owners for a pod
  that never appeared.
* :mod:`~webhook.podgroups.missing` -- made when its pods come without one, read from
  the live workload.

What it remembers between admissions is :mod:`~webhook.podgroups.known`.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence

from webhook.podgroup_intent import OwnerHint, PodGroupIntent
from webhook.podgroups import first_pod, intake
from webhook.podgroups import hints as owner_hints
from webhook.podgroups.controller import PodGroupController
from webhook.podgroups.known import KnownPodGroups
from webhook.podgroups.reconcile_context import Calls, ReconcileContext
from webhook.podgroups.reconciler_port import (
    CreateFn,
    EnsureFn,
    ExistingFn,
    PodGroupOutcome,
    RemoveFn,
    ResolveOwnerFn,
    RetryPolicy,
    UpdateFn,
    Wait,
    status_of,
)
from webhook.podgroups.work_queue import WorkQueue

__all__ = [
    "CreateFn",
    "EnsureFn",
    "ExistingFn",
    "PodGroupOutcome",
    "PodGroupReconciler",
    "RemoveFn",
    "ResolveOwnerFn",
    "RetryPolicy",
    "UpdateFn",
    "Wait",
    "status_of",
]


class PodGroupReconciler:
    """The PodGroups of the gangs admission describes; see the module docstring."""

    def __init__(
        self,
        create: CreateFn,
        resolve_owner: ResolveOwnerFn | None = None,
        *,
        policy: RetryPolicy | None = None,
        workers: int = 4,
        queue_size: int = 10_000,
        remember: int = 50_000,
        on_outcome: Callable[[PodGroupIntent, PodGroupOutcome], None] | None = None,
        existing: ExistingFn | None = None,
        update: UpdateFn | None = None,
        remove: RemoveFn | None = None,
        ensure: EnsureFn | None = None,
        parked: int = 10_000,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        seed: int | None = None,
    ) -> None:
        policy = policy or RetryPolicy()
        self._ctx = ReconcileContext(
            calls=Calls(create, resolve_owner, existing, update, remove, ensure),
            policy=policy,
            known=KnownPodGroups(
                remember=remember, parked=parked, ttl=policy.exists_ttl, clock=clock
            ),
            queue=WorkQueue(queue_size),
            sleep=sleep,
            clock=clock,
            rng=random.Random(seed),
            on_outcome=on_outcome,
        )
        self._controller = PodGroupController(self._ctx, workers=workers)

    # --- the request path ---------------------------------------------------------------

    def submit(self, intent: PodGroupIntent, *, dry_run: bool) -> bool:
        """Queue ``intent``; False when it is dropped (dry run, duplicate, queue full)."""
        return intake.submit(self._ctx, intent, dry_run=dry_run)

    def hint(self, hint: OwnerHint) -> None:
        """Act on an owner a pod's admission named (:mod:`~webhook.podgroups.hints`)."""
        owner_hints.hint(self._ctx, hint)

    async def before_answer(
        self,
        intents: Sequence[PodGroupIntent],
        hints: Sequence[OwnerHint],
        timeout: float,
    ) -> Wait:
        """Wait, at most ``timeout`` seconds, until the PodGroups a pod's admission named
        exist (:mod:`~webhook.podgroups.first_pod`)."""
        return await first_pod.before_answer(self._ctx, intents, hints, timeout)

    # --- the background controller's lifecycle -----------------------------------------

    async def start(self) -> None:
        await self._controller.start()

    async def stop(self, drain_timeout: float = 5.0) -> None:
        """Finish what is queued (up to ``drain_timeout`` seconds), then stop."""
        await self._controller.stop(drain_timeout)

    async def drain(self) -> None:
        """Wait until nothing is queued or in progress."""
        await self._ctx.queue.drained()

    @property
    def pending(self) -> int:
        return len(self._ctx.queue)

    @property
    def parked(self) -> int:
        """Intents waiting for a hint about an owner that did not show up in time."""
        return self._ctx.known.parked
