"""Trace replay with moves: the simulation harness's replay (``gangplace.sim``: pods
arrive in the paper's order, each placed by the policy or left unallocated) with the
descheduler's planner as its hook, run between arrivals at chosen points, and its moves
made on the replay's cluster. The loop, the arrivals and the curve are the harness's;
what is here is what the descheduler adds: the planning rounds.

At each point the planner sees the replay's snapshot as a cluster state (every placed
pod Running, made by a controller, so it may be moved), plans with the replay's own
policy and target workload M -- so it predicts what the replay's scheduler does -- and
every move is made as planned: each unit's pods leave their nodes and land where the
engine placed them again. In a trace every pod is its own unit; gangs move whole. A
pod that failed at its arrival is never retried: moves only help later arrivals.

The clock is virtual: planning round r happens at ``T0 + r x runner.interval``, so the
cool-down (``eviction.cooldown``, read from the ``corral.dev/last-moved`` annotation the
replay writes on moved pods, as the runner writes it on PodGroups) counts in rounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from gangplace.engine import Snapshot
from gangplace.engine.timeparse import format_time
from gangplace.sim.arrivals import TracePod
from gangplace.sim.replay import ReplayContext, ReplayResult, arrival_steps
from gangplace.sim.trace_run import prepare_trace

from descheduler.config import DeschedulerConfig
from descheduler.planning.plan_model import Plan
from descheduler.planning.planner import MoveError, apply_moves, plan
from descheduler.planning.state import ANNOTATION_LAST_MOVED, ClusterState

__all__ = ["T0", "MoveError", "PlannerHook", "Round", "replay_with_moves"]

# The virtual clock's start; only differences matter.
T0 = datetime(2026, 1, 1, tzinfo=UTC)
# What a trace pod is taken to be: a Running pod made by a controller.
OWNER_KIND = "ReplicaSet"
OWNER_GROUP = "apps"


@dataclass(slots=True)
class Round:
    """One planning round: when, what it moved, what the planner expected it to gain."""

    step: int  # arrivals so far
    arrived_pct: float  # GPU demand arrived, % of capacity
    pods_moved: int
    units_moved: int
    gain_gpus: float  # the moves' planned gain: F(M) + weighted CPU-stranded GPU (GPUs)
    frag_fall_gpus: float  # F(M) before minus after the round's moves (GPUs)
    idle_gpu_pct: float  # idle GPU when the round starts, % of capacity
    seconds: float
    notes: list[str] = field(default_factory=list)
    by_method: dict[str, int] = field(default_factory=dict)  # pods moved per method

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "arrived_pct": round(self.arrived_pct, 2),
            "pods_moved": self.pods_moved,
            "pods_moved_by_method": dict(self.by_method),
            "units_moved": self.units_moved,
            "gain_gpus": round(self.gain_gpus, 3),
            "frag_fall_gpus": round(self.frag_fall_gpus, 3),
            "idle_gpu_pct": round(self.idle_gpu_pct, 2),
            "seconds": round(self.seconds, 3),
        }


class PlannerHook:
    """The replay hook: plans at ``points`` (arrival counts) and makes the moves."""

    def __init__(
        self, config: DeschedulerConfig, points: Sequence[int], capacity_milli: int
    ) -> None:
        self.config = config
        self.points = set(points)
        self.capacity = capacity_milli
        self.rounds: list[Round] = []
        self.moved_pods: set[str] = set()  # keys of every pod moved at least once
        self._seen = 0  # pods of ctx.pods already made Running
        self.last_plan: Plan | None = None

    @property
    def pods_moved(self) -> int:
        return sum(r.pods_moved for r in self.rounds)

    def by_method(self) -> dict[str, int]:
        """Pods moved per method over every round (the replay's pods are ReplicaSet
        pods: evicted)."""
        out = {"suspend": 0, "evict": 0}
        for r in self.rounds:
            for k, n in r.by_method.items():
                out[k] = out.get(k, 0) + n
        return out

    @property
    def plan_seconds(self) -> float:
        return sum(r.seconds for r in self.rounds)

    def now(self) -> datetime:
        return T0 + timedelta(seconds=len(self.rounds) * self.config.runner.interval)

    def _adopt(self, ctx: ReplayContext, now: datetime) -> None:
        stamp = format_time(now)
        for p in ctx.pods[self._seen :]:
            p.phase = "Running"
            p.owner_kind = OWNER_KIND
            p.owner_group = OWNER_GROUP
            p.owner_name = p.name
            p.created = stamp
        self._seen = len(ctx.pods)
        names = ctx.snap.node_names
        for p in ctx.pods:  # node_name follows the snapshot (moves change it)
            p.node_name = names[p.node] if p.node >= 0 else ""

    def __call__(self, ctx: ReplayContext) -> None:
        if ctx.step not in self.points:
            return
        start = time.perf_counter()
        now = self.now()
        self._adopt(ctx, now)
        snap = ctx.snap
        idle = float(np.maximum(snap.gpu_free, 0).sum())
        state = ClusterState(snapshot=snap, now=now)
        result = plan(state, self.config, scorer=ctx.policy, workload=ctx.workload, largest=False)
        by_key = {p.key: p for p in ctx.pods}
        apply_moves(snap, result.moves, by_key, strict=True)
        stamp = format_time(now)
        for m in result.moves:
            for pm in m.pods:
                pod = by_key[pm.key]
                pod.node_name = snap.node_names[pod.node]
                pod.annotations[ANNOTATION_LAST_MOVED] = stamp
                self.moved_pods.add(pm.key)
        arrived = ctx.arrived_milli
        self.rounds.append(
            Round(
                step=ctx.step,
                arrived_pct=100.0 * arrived / self.capacity if self.capacity else 0.0,
                pods_moved=result.pods_moved,
                units_moved=len(result.moves),
                gain_gpus=sum(m.gain_gpus for m in result.moves),
                frag_fall_gpus=result.fragmentation_before - result.fragmentation_after,
                idle_gpu_pct=100.0 * idle / self.capacity if self.capacity else 0.0,
                seconds=time.perf_counter() - start,
                notes=list(result.notes),
                by_method=result.by_method(),
            )
        )
        self.last_plan = result


def replay_with_moves(
    cluster: Path | Snapshot,
    pods: list[TracePod],
    policy: str,
    seed: int,
    inflate: float,
    config: DeschedulerConfig,
    pcts: Sequence[float],
    progress: Callable[[int, int], None] | None = None,
) -> tuple[ReplayResult, PlannerHook]:
    """One replay as ``gangplace simulate`` runs it (the same seed, arrivals and
    policy), with the planner at ``pcts`` (% of capacity arrived). ``seconds`` in the
    result includes the planning."""
    run = prepare_trace(cluster, pods, policy, seed, inflate)
    points = arrival_steps(run.arrivals.pods, run.capacity_milli, pcts)
    hook = PlannerHook(config, points, run.capacity_milli)
    return run.replay(hook=hook, progress=progress), hook
