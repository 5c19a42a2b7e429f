"""The scorer the simulated scheduler uses, chosen in the config.

``binpack`` and ``spread`` are the engine's. ``fgd`` scores a node by how little the
FGD fragmentation of the cluster grows when the pod lands there (Weng et al., ATC '23),
measured with the engine's what-if form of :func:`node_fragmentation`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from gangplace.engine import BinpackScorer, PodShape, Scorer, Snapshot, SpreadScorer
from gangplace.engine.fragmentation import TargetWorkload, node_fragmentation
from gangplace.engine.scoring import best_fit_gpus

from .config import SchedulingConfig

__all__ = ["FgdScorer", "make_scorer"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def gpus_after(snap: Snapshot, shape: PodShape, nodes: IntArray) -> IntArray:
    """Per-device free GPU of ``nodes`` after one pod of ``shape`` takes the devices
    :func:`best_fit_gpus` would give it (vectorised; same choice, row by row)."""
    g = snap.gpu_free[nodes].copy()
    if not shape.is_gpu or nodes.size == 0:
        return g
    if shape.gpu_milli >= 1000:
        full = g >= 1000
        take = full & (np.cumsum(full, axis=1) <= shape.gpu_count)
        g -= take * 1000
    else:
        cand = np.where(g >= shape.gpu_milli, g, 1 << 40)
        idx = np.argmin(cand, axis=1)
        rows = np.arange(nodes.size)
        ok = cand[rows, idx] < (1 << 40)
        g[rows[ok], idx[ok]] -= shape.gpu_milli
    return g


class FgdScorer:
    """Least growth of F_n(M) first; scores lie in [0, 100] like the engine's scorers."""

    name = "fgd"

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload

    def score(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> FloatArray:
        if nodes.size == 0 or not self.workload.shapes:
            return np.zeros(nodes.size)
        cpu_j = snap.res_index["cpu"]
        free_cpu = snap.alloc[nodes, cpu_j] - snap.used[nodes, cpu_j]
        before = node_fragmentation(snap, self.workload, nodes)
        after = node_fragmentation(
            snap,
            self.workload,
            nodes,
            free_cpu=free_cpu - shape.request("cpu"),
            gpu_free=gpus_after(snap, shape, nodes),
        )
        span = 1000.0 * max(int(snap.gpu_total.max()) if snap.n_nodes else 1, 1)
        delta = np.clip(after - before, -span, span)
        out: FloatArray = 50.0 * (1.0 - delta / span)
        return out

    def choose_gpus(self, snap: Snapshot, shape: PodShape, node: int) -> tuple[int, ...]:
        return best_fit_gpus(snap, shape, node)


def make_scorer(cfg: SchedulingConfig, workload: TargetWorkload) -> Scorer:
    if cfg.policy == "fgd":
        return FgdScorer(workload)
    if cfg.policy == "spread":
        return SpreadScorer(cfg.weights)
    return BinpackScorer(cfg.weights)
