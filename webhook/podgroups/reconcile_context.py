"""What every behaviour of the PodGroup controller works with, in one record: the calls
it is given (:mod:`~webhook.podgroups.reconciler_port`), how it retries, what it
remembers (:mod:`~webhook.podgroups.known`), the work queue both the request path and
the background share (:mod:`~webhook.podgroups.work_queue`), the creates in flight on the
request path, and where outcomes go. Each behaviour is a function of this record and a
work item, in a module of its own."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from webhook.podgroup_intent import PodGroupIntent
from webhook.podgroups.known import KnownPodGroups
from webhook.podgroups.reconciler_port import (
    CreateFn,
    EnsureFn,
    ExistingFn,
    PodGroupOutcome,
    RemoveFn,
    ResolveOwnerFn,
    RetryPolicy,
    UpdateFn,
)
from webhook.podgroups.work_item import Key
from webhook.podgroups.work_queue import WorkQueue

__all__ = ["Calls", "ReconcileContext"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Calls:
    """The calls to the API server the controller is given (their contracts:
    :mod:`~webhook.podgroups.reconciler_port`); all but ``create`` optional."""

    create: CreateFn
    resolve_owner: ResolveOwnerFn | None = None
    existing: ExistingFn | None = None
    update: UpdateFn | None = None
    remove: RemoveFn | None = None
    ensure: EnsureFn | None = None


@dataclass(slots=True, eq=False)
class ReconcileContext:
    """The controller's shared state; see the module docstring."""

    calls: Calls
    policy: RetryPolicy
    known: KnownPodGroups
    queue: WorkQueue
    sleep: Callable[[float], Awaitable[None]]
    clock: Callable[[], float]
    rng: random.Random
    on_outcome: Callable[[PodGroupIntent, PodGroupOutcome], None] | None = None
    # Creates on the request path in flight, by PodGroup (webhook.podgroups.first_pod).
    early: dict[Key, asyncio.Task[bool]] = field(default_factory=dict)

    async def backoff(self, attempt: int) -> None:
        """Sleep before try ``attempt + 1`` (RetryPolicy.delay: jittered, capped)."""
        await self.sleep(self.policy.delay(attempt, self.rng))

    def report(self, intent: PodGroupIntent, outcome: PodGroupOutcome) -> None:
        """Tell ``on_outcome`` (metrics, logs); a failing callback is logged, not raised."""
        if self.on_outcome is not None:
            try:
                self.on_outcome(intent, outcome)
            except Exception:
                log.exception("podgroup outcome callback failed")
