"""Replay hooks that rescue failed arrivals by moving pods.

:class:`OracleHook` is the limit of any move-based descheduler on a replay: the same
arrivals in the same order, no placed pod ever dropped, and an arrival that fits
nowhere is placed if *any* rearrangement of the pods already placed plus it fits. Each
such check ends one of three ways, all counted:

* **placed**: the engine's move search (:func:`fit_with_moves`), optionally the fewest
  moves on small neighbourhoods (the mover,
  :func:`~gangplace.mover.place_with_moves.place_with_moves`), or the configuration
  model (:class:`~gangplace.sim.exact.ExactFit`) found a packing, and it is carried out;
* **proved infeasible**: the configuration LP's bound, or an earlier proof for a shape
  needing no more (the placed pods only grow, so a proof never expires);
* **timed out**: neither within the time limit; the arrival is left unplaced, so the
  oracle's figure is one an actual sequence of moves reaches, and the demand of the
  timed-out arrivals says how far below it the limit could lie at most.

:class:`MovesHook` is the practical version: on a failed arrival, the fewest moves
(within a budget of pods moved over the whole replay) that let it fit.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gangplace.engine.model import PodShape
from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.snapshot import Snapshot
from gangplace.mover.hood_moves import DEFAULT_NODE_LIMIT, DEFAULT_SIZES, HoodStats
from gangplace.mover.place_with_moves import MoverLimits, place_with_moves
from gangplace.mover.search_moves import fit_with_moves
from gangplace.mover.shape_dominance import needs_at_least
from gangplace.sim.arrivals import TracePod
from gangplace.sim.exact import ExactFit
from gangplace.sim.fit_bound import FEASIBLE, INFEASIBLE, FitModel
from gangplace.sim.replay import ReplayContext, ReplayResult, summarise

__all__ = [
    "MOVE_METHODS",
    "CheckStats",
    "MovesHook",
    "OracleHook",
    "RelaxedGreedy",
    "relaxed_greedy",
]


@dataclass(slots=True)
class CheckStats:
    """How the oracle decided each arrival that did not fit as the cluster stood: every
    check ends placed, proved infeasible, or timed out."""

    checks: int = 0
    placed_by_search: int = 0  # the engine's move search found room
    placed_by_model: int = 0  # the configuration model's packing, carried out
    placed_how: Counter[str] = field(default_factory=Counter)
    proved_cached: int = 0  # a shape needing no more was proved before
    proved_model: int = 0  # the configuration LP's bound
    timeouts: int = 0  # the model decided nothing within the time limit
    timeouts_repeat: int = 0  # of which: as a shape that just timed out, not tried again
    timeout_gpu_milli: int = 0  # GPU demand of the timed-out arrivals
    pods_moved: int = 0
    model_seconds: float = 0.0
    search_seconds: float = 0.0
    longest_check_seconds: float = 0.0
    proved_shapes: list[PodShape] = field(default_factory=list)

    @property
    def placed(self) -> int:
        return self.placed_by_search + self.placed_by_model

    @property
    def proved(self) -> int:
        return self.proved_cached + self.proved_model

    def to_dict(self) -> dict[str, Any]:
        return {
            "checks": self.checks,
            "placed": self.placed,
            "placed_by_search": self.placed_by_search,
            "placed_by_model": self.placed_by_model,
            "placed_how": dict(self.placed_how),
            "proved_infeasible": self.proved,
            "proved_by": {"earlier_proof": self.proved_cached, "model": self.proved_model},
            "timeouts": self.timeouts,
            "timeouts_repeat": self.timeouts_repeat,
            "timed_out_treated_as": "not placed",
            "timeout_gpu_milli": self.timeout_gpu_milli,
            "pods_moved": self.pods_moved,
            "model_seconds": round(self.model_seconds, 2),
            "search_seconds": round(self.search_seconds, 2),
            "longest_check_seconds": round(self.longest_check_seconds, 2),
        }


class _FailedArrival:
    """Spots the arrival that just failed (the replay appends it to ``ctx.failed``)."""

    def __init__(self) -> None:
        self.seen = 0

    def take(self, ctx: ReplayContext) -> TracePod | None:
        if len(ctx.failed) == self.seen:
            return None
        self.seen = len(ctx.failed)
        return ctx.failed[-1]

    def rescued(self, ctx: ReplayContext, rec: PodRecord) -> None:
        ctx.failed.pop()
        ctx.pods.append(rec)
        self.seen = len(ctx.failed)


class _FailedHere:
    """The shapes a search failed on, and how many pods had been placed then: a later
    arrival needing at least as much is not searched again until ``retry_after`` more
    pods have been placed (a back-off: near a full cluster most failures come between
    placements, and the same search fails again)."""

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        self.failed: list[tuple[PodShape, int]] = []

    def covers(self, ctx: ReplayContext, shape: PodShape) -> bool:
        now = len(ctx.pods)
        self.failed = [(q, v) for q, v in self.failed if now - v < self.retry_after]
        return any(needs_at_least(ctx.snap, shape, q) for q, _ in self.failed)

    def add(self, ctx: ReplayContext, shape: PodShape) -> None:
        self.failed.append((shape, len(ctx.pods)))


class OracleHook:
    """The replay hook of the oracle (see the module docstring)."""

    def __init__(
        self,
        snap: Snapshot,
        arrivals: Sequence[TracePod],
        *,
        time_limit: float = 10.0,
        neighbourhoods: Sequence[int] = (),
        max_pods: int = 8,
        depth: int = 1,
        max_nodes: int = 24,
        search: bool = True,
        guided: bool = False,
        retry_after: int = 25,
        exact_moves: bool = False,
    ) -> None:
        self.exact = ExactFit(snap, [a.shape for a in arrivals])
        self.exact_moves = exact_moves
        self.time_limit = time_limit
        self.neighbourhoods = tuple(neighbourhoods)
        self.max_pods, self.depth, self.max_nodes = max_pods, depth, max_nodes
        self.search = search
        self.guided = guided
        self.stats = CheckStats()
        self._failed = _FailedArrival()
        self._here = _FailedHere(retry_after)

    def __call__(self, ctx: ReplayContext) -> None:
        tp = self._failed.take(ctx)
        if tp is None:
            return
        st = self.stats
        st.checks += 1
        shape = tp.shape
        snap = ctx.snap
        if any(needs_at_least(snap, shape, q) for q in st.proved_shapes):
            st.proved_cached += 1
            return
        if self._here.covers(ctx, shape):
            # The model just ran out of time on a shape this one needs at least as much
            # as, with fewer than ``retry_after`` pods placed since: timed out again.
            st.timeouts += 1
            st.timeouts_repeat += 1
            st.timeout_gpu_milli += shape.gpu_demand_milli
            return
        rec = PodRecord("trace", f"{tp.name}-{ctx.step - 1}", shape)
        t0 = time.perf_counter()
        try:
            self._decide(ctx, shape, rec)
        finally:
            st.longest_check_seconds = max(st.longest_check_seconds, time.perf_counter() - t0)

    def _decide(self, ctx: ReplayContext, shape: PodShape, rec: PodRecord) -> None:
        st = self.stats
        snap = ctx.snap
        deadline = time.perf_counter() + self.time_limit
        if self.search:
            t = time.perf_counter()
            rep = fit_with_moves(
                snap,
                shape,
                ctx.policy,
                rec,
                max_pods=self.max_pods,
                depth=self.depth,
                max_nodes=self.max_nodes,
            )
            st.search_seconds += time.perf_counter() - t
            if rep is not None:
                st.placed_by_search += 1
                st.pods_moved += len(rep.moved)
                self._failed.rescued(ctx, rec)
                return
        if self.exact_moves:
            t = time.perf_counter()
            room = place_with_moves(snap, [rec], limits=MoverLimits(max_pods=self.max_pods))
            st.search_seconds += time.perf_counter() - t
            if room is not None:
                st.placed_by_search += 1
                st.placed_how["neighbourhood moves"] += 1
                st.pods_moved += len(room.moved)
                self._failed.rescued(ctx, rec)
                return
        t = time.perf_counter()
        try:
            lp = self.exact.check(snap, shape, max(deadline - t, 0.1), ip=False)
            if lp.status == INFEASIBLE:
                st.proved_model += 1
                st.proved_shapes.append(shape)
                return
            if lp.status == FEASIBLE:
                tries: list[list[int] | None] = (
                    [self.exact.guided(snap, shape)] if self.guided else []
                )
                tries += [
                    self.exact.neighbourhood(snap, shape, k)
                    for k in self.neighbourhoods
                    if k < snap.n_nodes
                ]
                for nodes in [*tries, None]:
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        break
                    res = self.exact.check(snap, shape, left, nodes=nodes)
                    if res.status == FEASIBLE and res.plan is not None:
                        moved = self.exact.apply(snap, res.plan, shape, rec)
                        st.placed_by_model += 1
                        where = (
                            "cluster"
                            if nodes is None
                            else (
                                "guided"
                                if self.guided and nodes is tries[0]
                                else f"{len(nodes)} nodes"
                            )
                        )
                        st.placed_how[f"{where}, {res.how}"] += 1
                        st.pods_moved += len(moved)
                        self._failed.rescued(ctx, rec)
                        return
                    if res.status == INFEASIBLE and nodes is None:
                        st.proved_model += 1
                        st.proved_shapes.append(shape)
                        return
            st.timeouts += 1
            st.timeout_gpu_milli += shape.gpu_demand_milli
            self._here.add(ctx, shape)
        finally:
            st.model_seconds += time.perf_counter() - t


MOVE_METHODS = ("search", "exact", "both")


class MovesHook:
    """On a failed arrival, the fewest moves that let it fit, while the replay's budget
    of moved pods lasts (``budget`` pods over the whole replay, at most ``per_arrival``
    for one arrival).

    ``method`` says how the moves are found: ``"search"``, the engine's search
    (:func:`fit_with_moves`: evictions on the nodes nearest to fitting, the evicted pods
    placed again by the policy, ``depth`` levels down); ``"exact"``, the mover
    (:func:`~gangplace.mover.place_with_moves.place_with_moves`: the fewest moves on
    neighbourhoods of ``sizes`` nodes solved exactly, ``node_limit`` branch-and-bound nodes per
    neighbourhood), which the descheduler's planner uses too; ``"both"``, the search
    first and the mover when it finds nothing."""

    def __init__(
        self,
        budget: int,
        per_arrival: int = 4,
        depth: int = 1,
        max_nodes: int = 24,
        retry_after: int = 1,
        *,
        method: str = "search",
        sizes: Sequence[int] = DEFAULT_SIZES,
        node_limit: int = DEFAULT_NODE_LIMIT,
    ):
        if method not in MOVE_METHODS:
            raise ValueError(f"method {method!r}: expected one of {', '.join(MOVE_METHODS)}")
        if budget < 0 or per_arrival < 1:
            raise ValueError("budget must be >= 0 and per_arrival >= 1")
        self.budget = budget
        self.per_arrival = per_arrival
        self.depth, self.max_nodes = depth, max_nodes
        self.method = method
        self.sizes = tuple(sizes)
        self.node_limit = node_limit
        self.pods_moved = 0
        # Whether the budget ever cut a search short (else a larger one replays the same).
        self.budget_bound = False
        self.rescued = 0
        self.rescued_by: Counter[str] = Counter()
        self.seconds = 0.0
        self.hood = HoodStats()
        self._failed = _FailedArrival()
        self._here = _FailedHere(retry_after)

    def __call__(self, ctx: ReplayContext) -> None:
        tp = self._failed.take(ctx)
        left = self.budget - self.pods_moved
        if tp is None or self._here.covers(ctx, tp.shape):
            return
        if left < self.per_arrival:
            self.budget_bound = True
        if left <= 0:
            return
        rec = PodRecord("trace", f"{tp.name}-{ctx.step - 1}", tp.shape)
        t = time.perf_counter()
        cap = min(left, self.per_arrival)
        moved: list[PodRecord] | None = None
        how = ""
        if self.method in ("search", "both"):
            rep = fit_with_moves(
                ctx.snap,
                tp.shape,
                ctx.policy,
                rec,
                max_pods=cap,
                depth=self.depth,
                max_nodes=self.max_nodes,
            )
            moved = rep.moved if rep is not None else None
            how = "search"
        if moved is None and self.method in ("exact", "both"):
            limits = MoverLimits(max_pods=cap, sizes=self.sizes, node_limit=self.node_limit)
            room = place_with_moves(ctx.snap, [rec], limits=limits, stats=self.hood)
            moved = room.moved if room is not None else None
            how = "exact"
        self.seconds += time.perf_counter() - t
        if moved is None:
            self._here.add(ctx, tp.shape)
            return
        self.pods_moved += len(moved)
        self.rescued += 1
        self.rescued_by[how] += 1
        self._failed.rescued(ctx, rec)


@dataclass(slots=True)
class RelaxedGreedy:
    """The greedy rule with the aggregated LP as the fit test: an arrival is taken when
    the LP admits the taken pods plus it. A reference, not a bound (the LP may admit
    what no packing holds, and greedy is not monotone)."""

    result: ReplayResult
    lp_calls: int
    timeouts: int
    proved: int
    seconds: float


def relaxed_greedy(
    snap: Snapshot,
    arrivals: Sequence[TracePod],
    known_feasible: Counter[PodShape],
    time_limit: float = 20.0,
) -> RelaxedGreedy:
    """Replay ``arrivals`` on counts alone: take an arrival when the taken pods plus it
    are within ``known_feasible`` (pod counts some real placement holds, e.g. a replay's
    final cluster: any part of a packing packs), else when the LP admits them. A check
    that times out leaves the arrival out (counted)."""
    start = time.perf_counter()
    model = FitModel(snap, {a.shape for a in arrivals}, len(arrivals))
    taken: Counter[PodShape] = Counter()
    proved: list[PodShape] = []
    n = len(arrivals)
    arrived = np.zeros(n, dtype=np.int64)
    allocated = np.zeros(n, dtype=np.int64)
    demand = used = 0
    calls = timeouts = n_proved = 0
    for i, tp in enumerate(arrivals):
        s = tp.shape
        demand += s.gpu_demand_milli
        ok = taken[s] + 1 <= known_feasible.get(s, 0)
        if not ok and not any(needs_at_least(snap, s, q) for q in proved):
            taken[s] += 1
            calls += 1
            status, _ = model.check(taken, time_limit)
            taken[s] -= 1
            if status == FEASIBLE:
                ok = True
            elif status == INFEASIBLE:
                proved.append(s)
                n_proved += 1
            else:
                timeouts += 1
        if ok:
            taken[s] += 1
            used += s.gpu_demand_milli
        arrived[i], allocated[i] = demand, used
    cap = int(snap.gpu_total.sum()) * 1000
    res = ReplayResult(
        policy="relaxed-greedy",
        capacity_milli=cap,
        arrived=arrived,
        allocated=allocated,
        fragmented=np.zeros(n),
        idle=cap - allocated,
        pods=n,
        pods_unallocated=n - sum(taken.values()),
        seconds=0.0,
    )
    res.curve = summarise(res)
    res.seconds = time.perf_counter() - start
    return RelaxedGreedy(res, calls, timeouts, n_proved, res.seconds)
