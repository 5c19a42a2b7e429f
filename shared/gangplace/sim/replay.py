"""Trace replay: pods arrive one at a time and a policy places each, as in the FGD paper.

:func:`replay` is a pure loop over a snapshot. Each pod goes to the node its policy
picks among the nodes that fit (the engine's single-pod placer, ``place_pod``); a pod
that fits nowhere stays unallocated and is never retried.
Between arrivals an optional *hook* sees the snapshot and the placed pods and may move
pods (remove, then place again) -- the descheduler runs its planner there. After every
arrival (and the hook) one row records the GPU demand arrived so far, the GPU
allocated, the fragmentation F(M) and the idle GPU; :func:`summarise` turns the rows
into the paper's curve, a point per 1% of arrived demand.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gangplace.engine.fragmentation import TargetWorkload, frag_amount, table_for
from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.scoring import Scorer
from gangplace.engine.single_pod import place_pod
from gangplace.engine.snapshot import Snapshot
from gangplace.sim.arrivals import TracePod

__all__ = [
    "CurvePoint",
    "Hook",
    "ReplayContext",
    "ReplayResult",
    "arrival_steps",
    "replay",
    "summarise",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(slots=True)
class ReplayContext:
    """What a hook sees between arrivals, and how it moves pods."""

    snap: Snapshot
    policy: Scorer
    workload: TargetWorkload
    step: int = 0  # arrivals so far
    arrived_milli: int = 0  # GPU demand (k x d) arrived so far, unplaced pods included
    pods: list[PodRecord] = field(default_factory=list)  # every pod placed so far
    failed: list[TracePod] = field(default_factory=list)

    def bound(self) -> list[PodRecord]:
        """The pods that hold resources now."""
        return [p for p in self.pods if p.node >= 0]

    def evict(self, pod: PodRecord) -> None:
        self.snap.remove(pod)

    def move(self, pod: PodRecord, node: int, gpus: Sequence[int]) -> None:
        """Rebind ``pod`` to ``node`` on ``gpus`` (the caller checked it fits there)."""
        if pod.node >= 0:
            self.snap.remove(pod)
        self.snap.place(pod.shape, node, tuple(gpus), pod=pod)

    def place(self, pod: PodRecord) -> bool:
        """Place an unbound pod where the replay's policy says; False if none fits."""
        return place_pod(self.snap, pod.shape, self.policy, pod) is not None


Hook = Callable[[ReplayContext], None]


@dataclass(frozen=True, slots=True)
class CurvePoint:
    arrived_pct: int
    allocated_gpu_pct: float
    unallocated_gpu_pct: float
    failed_gpu_pct: float  # demand arrived but not placed, as % of capacity
    fragmented_gpu_pct: float
    frag_rate_pct: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "arrived_pct": self.arrived_pct,
            "allocated_gpu_pct": self.allocated_gpu_pct,
            "unallocated_gpu_pct": self.unallocated_gpu_pct,
            "failed_gpu_pct": self.failed_gpu_pct,
            "fragmented_gpu_pct": self.fragmented_gpu_pct,
            "frag_rate_pct": self.frag_rate_pct,
        }


@dataclass(slots=True)
class ReplayResult:
    policy: str
    capacity_milli: int
    arrived: IntArray  # per arrival: k x d arrived so far (failed pods included)
    allocated: IntArray  # per arrival: milli-GPU allocated
    fragmented: FloatArray  # per arrival: F(M), milli-GPU
    idle: IntArray  # per arrival: idle milli-GPU
    pods: int
    pods_unallocated: int
    seconds: float
    curve: list[CurvePoint] = field(default_factory=list)

    @property
    def final(self) -> CurvePoint:
        return self.curve[-1]

    def to_dict(self, with_curve: bool = True) -> dict[str, Any]:
        f = self.final
        out: dict[str, Any] = {
            "policy": self.policy,
            "pods": self.pods,
            "allocated_gpu_pct": f.allocated_gpu_pct,
            "unallocated_gpu_pct": f.unallocated_gpu_pct,
            "fragmented_gpu_pct": f.fragmented_gpu_pct,
            "frag_rate_pct": f.frag_rate_pct,
            "failed_gpu_pct": f.failed_gpu_pct,
            "pods_unallocated": self.pods_unallocated,
            "seconds": round(self.seconds, 3),
        }
        if with_curve:
            out["curve"] = [p.to_dict() for p in self.curve]
        return out


class _Tracker:
    """Per-node idle GPU and F_n(M), kept current by rescoring only changed nodes."""

    def __init__(self, snap: Snapshot, workload: TargetWorkload) -> None:
        self.snap = snap
        self.table = table_for(snap, workload)
        self.cpu_j = snap.res_index["cpu"]
        self.seen = snap.node_version.copy()
        every = np.arange(snap.n_nodes)
        self.frag = self._frag(every)
        self.idle = np.maximum(snap.gpu_free, 0).sum(axis=1)
        self.frag_total = float(self.frag.sum())
        self.idle_total = int(self.idle.sum())

    def _frag(self, nodes: IntArray) -> FloatArray:
        s = self.snap
        cpu = s.alloc[nodes, self.cpu_j] - s.used[nodes, self.cpu_j]
        return frag_amount(self.table, cpu, s.gpu_free[nodes], s.gpu_model[nodes])

    def update(self) -> None:
        changed = np.flatnonzero(self.snap.node_version != self.seen)
        if changed.size == 0:
            return
        self.seen[changed] = self.snap.node_version[changed]
        new_frag = self._frag(changed)
        new_idle = np.maximum(self.snap.gpu_free[changed], 0).sum(axis=1)
        self.frag_total += float(new_frag.sum() - self.frag[changed].sum())
        self.idle_total += int(new_idle.sum() - self.idle[changed].sum())
        self.frag[changed] = new_frag
        self.idle[changed] = new_idle
        if changed.size > 64:  # resum now and then, so rounding cannot drift
            self.frag_total = float(self.frag.sum())


def arrival_steps(
    arrivals: Sequence[TracePod], capacity_milli: int, pcts: Sequence[float]
) -> list[int]:
    """The values of :attr:`ReplayContext.step` at which the arrived GPU demand first
    reaches each percentage of capacity (the curve's x axis): a hook that acts "at 90%
    arrived" acts at these. Points past the end are dropped; two percentages reached by
    the same arrival give one step."""
    demand = np.cumsum([p.shape.gpu_demand_milli for p in arrivals], dtype=np.int64)
    out: set[int] = set()
    for pct in pcts:
        i = int(np.searchsorted(demand, pct / 100.0 * capacity_milli, side="left"))
        if i < len(arrivals):
            out.add(i + 1)
    return sorted(out)


def replay(
    snap: Snapshot,
    arrivals: Sequence[TracePod],
    policy: Scorer,
    workload: TargetWorkload,
    *,
    hook: Hook | None = None,
    progress: Callable[[int, int], None] | None = None,
    namespace: str = "trace",
) -> ReplayResult:
    """Replay ``arrivals`` on ``snap`` (changed in place) with ``policy``."""
    start = time.perf_counter()
    capacity = int(snap.gpu_total.sum()) * 1000
    ctx = ReplayContext(snap, policy, workload)
    tracker = _Tracker(snap, workload)
    n = len(arrivals)
    arrived = np.zeros(n, dtype=np.int64)
    allocated = np.zeros(n, dtype=np.int64)
    fragmented = np.zeros(n, dtype=np.float64)
    idle = np.zeros(n, dtype=np.int64)
    demand = 0
    tick = max(1, n // 200)
    for i, tp in enumerate(arrivals):
        demand += tp.shape.gpu_demand_milli
        rec = PodRecord(namespace, f"{tp.name}-{i}", tp.shape)
        if place_pod(snap, tp.shape, policy, rec) is None:
            ctx.failed.append(tp)
        else:
            ctx.pods.append(rec)
        ctx.step = i + 1
        ctx.arrived_milli = demand
        if hook is not None:
            hook(ctx)
        tracker.update()
        arrived[i] = demand
        idle[i] = tracker.idle_total
        allocated[i] = capacity - tracker.idle_total
        fragmented[i] = tracker.frag_total
        if progress is not None and (i % tick == 0 or i == n - 1):
            progress(i + 1, n)
    result = ReplayResult(
        policy=getattr(policy, "name", type(policy).__name__),
        capacity_milli=capacity,
        arrived=arrived,
        allocated=allocated,
        fragmented=fragmented,
        idle=idle,
        pods=n,
        pods_unallocated=len(ctx.failed),
        seconds=0.0,
    )
    result.curve = summarise(result)
    result.seconds = time.perf_counter() - start
    return result


def _mean(x: list[float]) -> float:
    return sum(x) / len(x)


def summarise(res: ReplayResult) -> list[CurvePoint]:
    """The paper's discrete curve: for each whole percent x of arrived demand, the mean
    over the arrivals whose arrived % rounds to x (else within 1 point of x).

    Rounding is the paper's: arrived % to an integer, allocated % to 2 places (Python's
    round, half to even), then the mean, rounded to 2 places."""
    if res.arrived.size == 0 or res.capacity_milli == 0:
        return [CurvePoint(0, 0.0, 100.0, 0.0, 0.0, 0.0)]
    unit = res.capacity_milli / 100.0
    cap_gpu = res.capacity_milli
    arr = [round(a / unit) for a in res.arrived.tolist()]
    alloc = [round(u / unit, 2) for u in res.allocated.tolist()]
    failed = [
        (a - u) / unit for a, u in zip(res.arrived.tolist(), res.allocated.tolist(), strict=True)
    ]
    frag = res.fragmented.tolist()
    idle = res.idle.tolist()
    by_pct: dict[int, list[int]] = {}
    for i, x in enumerate(arr):
        by_pct.setdefault(x, []).append(i)
    points: list[CurvePoint] = []
    for x in range(0, max(arr) + 1):
        rows = by_pct.get(x)
        if not rows:
            rows = [i for i, a in enumerate(arr) if abs(a - x) <= 1]
        if not rows:
            continue
        al = round(_mean([alloc[i] for i in rows]), 2)
        rates = [100.0 * frag[i] / idle[i] for i in rows if idle[i] > 0]
        points.append(
            CurvePoint(
                arrived_pct=x,
                allocated_gpu_pct=al,
                unallocated_gpu_pct=round(100.0 - al, 2),
                failed_gpu_pct=round(_mean([failed[i] for i in rows]), 2),
                fragmented_gpu_pct=round(100.0 * _mean([frag[i] for i in rows]) / cap_gpu, 2),
                frag_rate_pct=round(_mean(rates), 2) if rates else 0.0,
            )
        )
    return points
