"""What the runner asks of the cluster (:class:`RunnerPort`) and the plain results it
gets back.

The runner is I/O-free: it talks to one port, which the Kubernetes layer implements
(:class:`~descheduler.running.kube_io.KubeIO`) and tests fake on :class:`NoOpPort`. Every
method is there on every port, so the runner needs no "can it do this?" checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from descheduler.planning.plan_model import Move, Plan
from descheduler.planning.state import ClusterState

__all__ = [
    "GangEvent",
    "GangOutcome",
    "MoveOutcome",
    "NoOpPort",
    "PodResult",
    "Resumed",
    "RunnerPort",
]


class MoveOutcome(StrEnum):
    """What happened to one pod (the Kubernetes layer's evictor reports these)."""

    EVICTED = "evicted"
    SUSPENDED = "suspended"  # its workload was suspended: the pod goes without a failure
    GONE = "gone"  # already deleted: as good as evicted
    DRY_RUN = "dry-run"
    REFUSED = "refused"  # a disruption budget said no (HTTP 429)
    SKIPPED = "skipped"  # a limit of the evictor
    FAILED = "failed"  # any other error
    ABORTED = "aborted"  # not attempted
    # its workload was suspended, the pods did not go within moves.suspend_grace, and the
    # suspend was undone: the pod runs on
    ROLLED_BACK = "rolled-back"


@dataclass(frozen=True, slots=True)
class PodResult:
    namespace: str
    name: str
    outcome: MoveOutcome
    message: str = ""


@dataclass(frozen=True, slots=True)
class GangEvent:
    """An Event about a gang: on its PodGroup when it has one, else on its first pod."""

    type: str  # Normal or Warning
    reason: str
    message: str
    namespace: str
    podgroup: str | None
    podgroup_api: str | None
    pods: tuple[str, ...]
    workloads: tuple[str, ...] = ()  # ns/Kind/name: a suspend move's Events go on these


@dataclass(frozen=True, slots=True)
class Resumed:
    """What a run did about one suspension corral made (see :mod:`descheduler.planning.resume`):
    ``action`` resume, forget or heal; ``ok`` False with the error in ``message``."""

    workload: str
    action: str
    reason: str
    ok: bool = True
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "action": self.action,
            "reason": self.reason,
            "ok": self.ok,
            "message": self.message,
        }


@dataclass(slots=True)
class GangOutcome:
    move: Move
    # evicted, suspended, rolled-back, dry-run, skipped, failed, partially-moved,
    # not-attempted
    status: str
    message: str = ""
    results: list[PodResult] = field(default_factory=list)


class RunnerPort(Protocol):
    """The runner's side effects. ``evict_gang(move, message)`` evicts the move's pods
    in order and stops at the first that does not go; ``suspend_gang`` suspends a
    suspend move's workloads. ``precheck(group)`` says why a group must be skipped
    (live disruption budgets, a gang that no longer waits), or None. ``is_leader`` is
    asked before each gang (a lost Lease stops the run), and so is ``interrupted``,
    which names why the run must stop (SIGTERM) or returns None. ``begin(plan)`` is
    called once a plan with moves is made, before any eviction (not in dry-run);
    ``mark_moved`` records a gang's move before its pods go; ``mark_room(move, now)``
    records that room is being made for ``move.for_gang``; ``finish(plan)`` says the
    run ended on its own (not in dry-run; a run cut short from outside never calls it,
    so the next run shares its limits). ``resume()`` ends the suspensions that are due
    (before planning), ``settle(plan, outcomes)`` waits for the gangs room was made for
    and resumes as they bind (after the moves). ``gang_lock`` is held while one gang is
    moved (its mark, its evictions, its Event): whoever cancels the run from outside (a
    lost Lease) takes it first, so the gang being moved is finished and no other is
    begun. ``retry_pause``: seconds between retries of a gang evicted only in part."""

    retry_pause: float
    gang_lock: asyncio.Lock | None

    async def fetch_state(self) -> ClusterState: ...
    async def resume(self) -> list[Resumed]: ...
    async def begin(self, plan: Plan) -> None: ...
    async def precheck(self, group: Sequence[Move]) -> str | None: ...
    async def mark_moved(self, move: Move, now: datetime) -> None: ...
    async def evict_gang(self, move: Move, message: str) -> Sequence[PodResult]: ...
    async def suspend_gang(self, move: Move, message: str) -> Sequence[PodResult]: ...
    async def mark_room(self, move: Move, now: datetime) -> None: ...
    async def emit_event(self, event: GangEvent) -> None: ...
    async def settle(self, plan: Plan, outcomes: Sequence[GangOutcome]) -> list[Resumed]: ...
    async def finish(self, plan: Plan) -> None: ...
    def is_leader(self) -> bool: ...
    def interrupted(self) -> str | None: ...


class NoOpPort:
    """A port that records nothing, checks nothing and always leads; fakes override
    what they play. ``fetch_state`` and ``evict_gang`` have no harmless default."""

    retry_pause: float = 1.0
    gang_lock: asyncio.Lock | None = None

    async def fetch_state(self) -> ClusterState:
        raise NotImplementedError(f"{type(self).__name__}.fetch_state")

    async def resume(self) -> list[Resumed]:
        return []

    async def begin(self, plan: Plan) -> None:
        return None

    async def precheck(self, group: Sequence[Move]) -> str | None:
        return None

    async def mark_moved(self, move: Move, now: datetime) -> None:
        return None

    async def evict_gang(self, move: Move, message: str) -> Sequence[PodResult]:
        raise NotImplementedError(f"{type(self).__name__}.evict_gang")

    async def suspend_gang(self, move: Move, message: str) -> Sequence[PodResult]:
        why = "this runner cannot suspend workloads"
        return [PodResult(p.namespace, p.name, MoveOutcome.FAILED, why) for p in move.pods]

    async def mark_room(self, move: Move, now: datetime) -> None:
        return None

    async def emit_event(self, event: GangEvent) -> None:
        return None

    async def settle(self, plan: Plan, outcomes: Sequence[GangOutcome]) -> list[Resumed]:
        return []

    async def finish(self, plan: Plan) -> None:
        return None

    def is_leader(self) -> bool:
        return True

    def interrupted(self) -> str | None:
        return None
