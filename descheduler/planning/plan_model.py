"""The planner's output: moves gang by gang, and what they change.

A :class:`Move` is one unit (a whole gang, the members of a gang above its
minAvailable, or a pod without a gang) with the nodes the engine predicts its pods
will land on. Evicting a move's pods is all-or-nothing for the runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from gangplace.engine.report import FragmentationReport
from gangplace.engine.timeparse import format_time

__all__ = [
    "LargestFit",
    "Move",
    "MoveKind",
    "MoveMethod",
    "NotMoved",
    "Plan",
    "PodMove",
    "Unserved",
]

MoveKind = Literal["make-room", "defragment", "release-stale"]
MoveMethod = Literal["suspend", "evict"]


@dataclass(frozen=True, slots=True)
class PodMove:
    """One pod to evict; ``target`` is where the simulation put it again (None for a
    released stale gang, whose pods wait for the whole gang to start again)."""

    namespace: str
    name: str
    uid: str
    node: str
    target: str | None
    gpu_milli: int
    target_gpus: tuple[int, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class Move:
    kind: MoveKind
    unit: str  # the unit's key: ns/gang, or ns/pod:name for a pod without a gang
    namespace: str
    gang: str | None  # gang name; None for a pod without gang keys
    queue: str
    pods: list[PodMove]
    partial: bool  # only members above minAvailable move
    cost: float
    reason: str
    for_gang: str | None = None  # the waiting gang this move makes room for
    gain_gpus: float = 0.0  # defragment: how much F(M) falls, in GPUs
    podgroup: str | None = None  # the PodGroup to annotate and report on, if any
    podgroup_api: str | None = None
    method: MoveMethod = "evict"
    priority: int = 0  # the unit's priority (its highest member's)
    workloads: list[str] = field(default_factory=list)  # suspend: ns/Kind/name of each
    how: str = ""  # why this method
    # GPU-hours of work the move throws away: what its pods did since their last
    # checkpoint (gangplace.engine.checkpoints).
    at_risk: float = 0.0
    # capacity_room: seconds the room is held for ``for_gang`` (0: not held); the
    # workloads suspended stay so until it binds or the hold ends
    hold_for: float = 0.0
    # capacity_room.nominate: the waiting gang's pod name -> the node the plan put it on,
    # written to each pod's status.nominatedNodeName while the room is held ({}: none)
    nominate: dict[str, str] = field(default_factory=dict)

    def workload_names(self) -> list[str]:
        """``Kind ns/name`` of each workload a suspend move suspends."""
        out = []
        for key in self.workloads:
            ns, kind, name = key.split("/", 2)
            out.append(f"{kind} {ns}/{name}")
        return out

    @property
    def gpus(self) -> float:
        return sum(p.gpu_milli for p in self.pods) / 1000.0

    def to_dict(self) -> dict[str, Any]:
        out = self._dict()
        if self.nominate:
            out["nominate"] = [
                {"namespace": self.for_gang_namespace, "name": k, "node": v}
                for k, v in sorted(self.nominate.items())
            ]
        return out

    @property
    def for_gang_namespace(self) -> str:
        return (self.for_gang or self.unit).split("/", 1)[0]

    def _dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "method": self.method,
            "priority": self.priority,
            "workloads": self.workload_names(),
            "unit": self.unit,
            "namespace": self.namespace,
            "gang": self.gang,
            "queue": self.queue,
            "partial": self.partial,
            "for_gang": self.for_gang,
            "cost": round(self.cost, 3),
            "gpu_hours_at_risk": round(self.at_risk, 3),
            "hold_seconds": self.hold_for,
            "gpus": self.gpus,
            "gain_gpus": round(self.gain_gpus, 3),
            "reason": self.reason,
            "podgroup": self.podgroup,
            "pods": [
                {
                    "namespace": p.namespace,
                    "name": p.name,
                    "uid": p.uid,
                    "node": p.node,
                    "target": p.target,
                    "gpus": p.gpu_milli / 1000.0,
                }
                for p in self.pods
            ],
        }


@dataclass(frozen=True, slots=True)
class Unserved:
    """A waiting gang the plan does not make room for, and why."""

    gang: str
    reason: str


@dataclass(frozen=True, slots=True)
class NotMoved:
    """A running unit the rules do not let move, and why; ``suspended``: its workload
    is suspended (it neither runs nor waits)."""

    unit: str
    priority: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "priority": self.priority, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class LargestFit:
    """Per GPU model: the most GPUs one pod could get on one node."""

    model: str
    now: int
    after: int


@dataclass(slots=True)
class Plan:
    now: datetime
    moves: list[Move] = field(default_factory=list)
    waiting_before: list[str] = field(default_factory=list)
    waiting_after: list[str] = field(default_factory=list)
    unserved: list[Unserved] = field(default_factory=list)
    fragmentation_before: float = 0.0
    fragmentation_after: float = 0.0
    report_before: FragmentationReport | None = None
    report_after: FragmentationReport | None = None
    largest: list[LargestFit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    not_moved: list[NotMoved] = field(default_factory=list)
    suspended: list[NotMoved] = field(default_factory=list)

    @property
    def plan_id(self) -> str:
        """Names the plan in Events: ``plan-20261202T124500Z``."""
        return "plan-" + format_time(self.now).replace("-", "").replace(":", "")

    @property
    def evictions(self) -> list[dict[str, str | None]]:
        return [
            {"namespace": p.namespace, "name": p.name, "gang": m.gang}
            for m in self.moves
            for p in m.pods
        ]

    @property
    def pods_moved(self) -> int:
        return sum(len(m.pods) for m in self.moves)

    @property
    def cost(self) -> float:
        return sum(m.cost for m in self.moves)

    @property
    def at_risk(self) -> float:
        """GPU-hours of work the plan's moves throw away."""
        return sum(m.at_risk for m in self.moves)

    def to_dict(self) -> dict[str, Any]:
        before = self.report_before.to_dict() if self.report_before else None
        after = self.report_after.to_dict() if self.report_after else None
        return {
            "plan": self.plan_id,
            "now": format_time(self.now),
            "evictions": self.evictions,
            "waiting_gangs_before": self.waiting_before,
            "waiting_gangs_after": self.waiting_after,
            "fragmentation_before": round(self.fragmentation_before, 3),
            "fragmentation_after": round(self.fragmentation_after, 3),
            "moves": [m.to_dict() for m in self.moves],
            "unserved": [{"gang": u.gang, "reason": u.reason} for u in self.unserved],
            "largest_pod_gpus": [
                {"model": x.model, "now": x.now, "after": x.after} for x in self.largest
            ],
            "report_before": before,
            "report_after": after,
            "cost": round(self.cost, 3),
            "gpu_hours_at_risk": round(self.at_risk, 3),
            "moves_by_method": self.by_method(),
            "not_moved": [x.to_dict() for x in self.not_moved],
            "suspended_gangs": [x.to_dict() for x in self.suspended],
            "notes": self.notes,
        }

    def by_method(self) -> dict[str, int]:
        """Pods moved per method."""
        out = {"suspend": 0, "evict": 0}
        for m in self.moves:
            out[m.method] += len(m.pods)
        return out
