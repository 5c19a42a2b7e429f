"""One oracle run on a trace, with the references measured on the same run."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gangplace.engine.model import PodShape
from gangplace.sim.fit_bound import OfflineBound, offline_bound
from gangplace.sim.limit import CheckStats, OracleHook, RelaxedGreedy, relaxed_greedy
from gangplace.sim.relayout_heuristic import relayout_idle_pct
from gangplace.sim.replay import ReplayResult
from gangplace.sim.trace_run import TraceRun

__all__ = ["LimitRun", "run_limit"]


@dataclass(slots=True)
class LimitRun:
    result: ReplayResult  # the oracle's replay
    checks: CheckStats
    offline: OfflineBound | None
    relayout_pct: float  # the relayout heuristic on the oracle's final cluster
    seconds: float
    relaxed: RelaxedGreedy | None = None

    def to_dict(self) -> dict[str, Any]:
        cap = self.result.capacity_milli
        out: dict[str, Any] = {
            "oracle_unallocated_gpu_pct": self.result.final.unallocated_gpu_pct,
            "checks": self.checks.to_dict(),
            "timed_out_gpu_pct": round(100.0 * self.checks.timeout_gpu_milli / cap, 2),
            "relayout_unallocated_gpu_pct": self.relayout_pct,
            "seconds": round(self.seconds, 1),
        }
        if self.relaxed is not None:
            r = self.relaxed
            out["relaxed_greedy"] = {
                "unallocated_gpu_pct": r.result.final.unallocated_gpu_pct,
                "lp_calls": r.lp_calls,
                "proved": r.proved,
                "timeouts": r.timeouts,
                "seconds": round(r.seconds, 1),
            }
        if self.offline is not None:
            o = self.offline
            out["offline"] = {
                "lp_unallocated_gpu_pct": round(100.0 - 100.0 * o.lp_milli / cap, 2),
                "milp_bound_unallocated_gpu_pct": round(
                    100.0 - 100.0 * o.milp_bound_milli / cap, 2
                ),
                "milp_best_unallocated_gpu_pct": round(100.0 - 100.0 * o.milp_best_milli / cap, 2),
                "status": o.status,
                "seconds": round(o.seconds, 1),
            }
        return out


def run_limit(
    run: TraceRun,
    *,
    time_limit: float = 10.0,
    neighbourhoods: tuple[int, ...] = (),
    search: bool = True,
    max_pods: int = 8,
    depth: int = 1,
    offline_time_limit: float | None = 60.0,
    relaxed: bool = False,
    retry_after: int = 25,
    exact_moves: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> LimitRun:
    """The oracle on ``run`` (its snapshot is changed), then the offline bound over the
    arrivals (None when ``offline_time_limit`` is None), the relayout heuristic, and with
    ``relaxed`` the greedy rule with the LP as its fit test (the oracle's final pods are
    known to pack, so only the rest are asked)."""
    start = time.perf_counter()
    hook = OracleHook(
        run.snap,
        run.arrivals.pods,
        time_limit=time_limit,
        neighbourhoods=neighbourhoods,
        search=search,
        max_pods=max_pods,
        depth=depth,
        retry_after=retry_after,
        exact_moves=exact_moves,
    )
    res = run.replay(hook=hook, progress=progress)
    off = None
    if offline_time_limit is not None:
        counts: Counter[PodShape] = Counter(p.shape for p in run.arrivals.pods)
        off = offline_bound(run.snap, counts, offline_time_limit)
    relay = relayout_idle_pct(run.snap)
    greedy = None
    if relaxed:
        held: Counter[PodShape] = Counter(p.shape for p in run.snap.pods if p.node >= 0)
        greedy = relaxed_greedy(run.snap, run.arrivals.pods, held, time_limit)
    return LimitRun(res, hook.stats, off, relay, time.perf_counter() - start, greedy)
