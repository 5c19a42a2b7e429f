"""One trace replay set up as the FGD paper runs it: the seed's arrivals and node ranks,
the target workload M from the original pod list, and the policy. ``gangplace
simulate``, ``gangplace limit``, ``corral-descheduler simulate`` and the benchmarks all
start their runs here, so a seed means the same run everywhere."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gangplace.engine import Snapshot
from gangplace.engine.fragmentation import TargetWorkload
from gangplace.engine.policies import PolicyContext, make_policy
from gangplace.engine.scoring import Scorer
from gangplace.sim.arrivals import Arrivals, TracePod, paper_arrivals
from gangplace.sim.replay import Hook, ReplayResult, replay
from gangplace.sim.trace_csv import load_nodes

__all__ = ["TraceRun", "TraceSetupError", "prepare_trace", "run_trace"]


class TraceSetupError(ValueError):
    """A cluster the paper's run cannot start from (it has no GPU)."""


@dataclass(slots=True)
class TraceRun:
    """One replay set up as the paper runs it, ready for :func:`replay`: the cluster with
    the seed's node ranks, the seed's arrivals, M from the original pod list, and the
    policy. A caller that moves pods (``corral-descheduler simulate``) builds its hook
    from these before it replays."""

    snap: Snapshot
    arrivals: Arrivals
    workload: TargetWorkload
    scorer: Scorer

    @property
    def capacity_milli(self) -> int:
        return int(self.snap.gpu_total.sum()) * 1000

    def replay(
        self, hook: Hook | None = None, progress: Callable[[int, int], None] | None = None
    ) -> ReplayResult:
        pods = self.arrivals.pods
        return replay(self.snap, pods, self.scorer, self.workload, hook=hook, progress=progress)


def prepare_trace(
    nodes_or_snapshot: Path | Snapshot,
    pods: list[TracePod],
    policy: str,
    seed: int,
    inflate: float = 1.3,
) -> TraceRun:
    """Arrivals and node ranks for ``seed``, M from the original pod list, the policy."""
    snap = (
        nodes_or_snapshot
        if isinstance(nodes_or_snapshot, Snapshot)
        else Snapshot(load_nodes(nodes_or_snapshot))
    )
    capacity = int(snap.gpu_total.sum()) * 1000
    if capacity == 0:
        raise TraceSetupError("the cluster has no GPU nodes")
    arr = paper_arrivals(pods, snap.n_nodes, capacity, seed, inflate)
    snap.node_rank = arr.node_rank
    workload = TargetWorkload.from_shapes([p.shape for p in pods])
    scorer = make_policy(policy, PolicyContext(workload, arr.rng))
    return TraceRun(snap, arr, workload, scorer)


def run_trace(
    nodes_or_snapshot: Path | Snapshot,
    pods: list[TracePod],
    policy: str,
    seed: int,
    inflate: float = 1.3,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """One replay as the paper runs it: arrivals and node ranks for ``seed``, M from the
    original pod list, then the policy."""
    return prepare_trace(nodes_or_snapshot, pods, policy, seed, inflate).replay(progress=progress)
