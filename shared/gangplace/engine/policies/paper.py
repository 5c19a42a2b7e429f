"""The baseline policies of the FGD paper's simulator, score for score.

Scores are the paper's integers (fractions truncated), so ties are common and go to
the lowest node rank, as they do there. Sharing pods take the tightest device that fits
(lowest index on ties) except under Random, which draws one. See the data folder's
SIMULATOR.md for the formulas; the unit tests check its worked examples.
"""

from __future__ import annotations

import numpy as np

from gangplace.engine.model import PodShape
from gangplace.engine.policies.base import (
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    CachedScorer,
    FloatArray,
    IntArray,
    RandomSource,
    exclusive_gpus,
    free_cpu,
    tightest_gpu,
)
from gangplace.engine.scoring import select_node
from gangplace.engine.snapshot import Snapshot

__all__ = [
    "BestFitPolicy",
    "DotProdPolicy",
    "GpuClusteringPolicy",
    "GpuPackingPolicy",
    "RandomPolicy",
]


def _idle(snap: Snapshot, nodes: IntArray) -> IntArray:
    out: IntArray = np.maximum(snap.gpu_free[nodes], 0).sum(axis=1)
    return out


def _paper_gpus(snap: Snapshot, shape: PodShape, node: int) -> tuple[int, ...]:
    if not shape.is_gpu:
        return ()
    free = snap.gpu_free[node]
    if shape.gpu_milli >= 1000:
        return exclusive_gpus(free, shape.gpu_count)
    return tightest_gpu(free, shape.gpu_milli)


class RandomPolicy:
    """01-Random: one feasible node drawn uniformly (in node-rank order) from the
    replay's Go stream; a sharing pod's device by reservoir sampling."""

    name = "random"

    def __init__(self, rng: RandomSource) -> None:
        self.rng = rng

    def select(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> int:
        order = np.argsort(snap.node_rank[nodes], kind="stable")
        return int(order[self.rng.intn(nodes.size)])

    def score(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> FloatArray:
        out = np.zeros(nodes.size, dtype=np.float64)
        if nodes.size:
            out[self.select(snap, shape, nodes)] = 100.0
        return out

    def choose_gpus(self, snap: Snapshot, shape: PodShape, node: int) -> tuple[int, ...]:
        if not shape.is_gpu:
            return ()
        free = snap.gpu_free[node]
        if shape.gpu_milli >= 1000:
            return exclusive_gpus(free, shape.gpu_count)
        pick = -1
        for seen, g in enumerate(np.flatnonzero(free >= shape.gpu_milli).tolist(), start=1):
            if self.rng.intn(seen) == 0:
                pick = g
        return (pick,) if pick >= 0 else ()


class DotProdPolicy:
    """02-DotProd (Tetris): the smaller the dot product of free and requested CPU and
    GPU, each over the paper's maximum node, the better: floor(100 (1 - x / 2))."""

    name = "dotprod"

    def score(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> FloatArray:
        c = float(shape.request("cpu")) / MAX_SPEC_CPU
        g = float(shape.gpu_demand_milli) / MAX_SPEC_GPU
        x = 0.0 + (free_cpu(snap, nodes) / MAX_SPEC_CPU) * c
        x = x + (_idle(snap, nodes) / MAX_SPEC_GPU) * g
        out: FloatArray = np.trunc(100.0 * (1.0 - x / 2.0))
        return out

    def choose_gpus(self, snap: Snapshot, shape: PodShape, node: int) -> tuple[int, ...]:
        return _paper_gpus(snap, shape, node)


class BestFitPolicy:
    """05-BestFit: least CPU and GPU left after placing, min-max normalised over the
    candidates (integer division, which can merge neighbours into ties)."""

    name = "bestfit"

    def raw(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> IntArray:
        cpu_left = (free_cpu(snap, nodes) - shape.request("cpu")) / MAX_SPEC_CPU * 0.5
        gpu_left = (_idle(snap, nodes) - shape.gpu_demand_milli) / MAX_SPEC_GPU * 0.5
        out: IntArray = np.trunc((1.0 - (0.0 + cpu_left + gpu_left)) * 100.0).astype(np.int64)
        return out

    def score(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> FloatArray:
        """The raw (unnormalised) score: a node's own, comparable across calls."""
        return self.raw(snap, shape, nodes).astype(np.float64)

    def select(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> int:
        s = self.raw(snap, shape, nodes)
        lo, hi = int(s.min()), int(s.max())
        norm = np.zeros(s.size, dtype=np.float64) if hi == lo else ((s - lo) * 100 // (hi - lo))
        return select_node(snap, nodes, np.asarray(norm, dtype=np.float64))

    def choose_gpus(self, snap: Snapshot, shape: PodShape, node: int) -> tuple[int, ...]:
        return _paper_gpus(snap, shape, node)


def _pod_type(shape: PodShape) -> int:
    """GpuClustering's pod type as a bit: sharing, then one bit per GPU count."""
    return 1 if shape.gpu_milli < 1000 else 1 << min(shape.gpu_count, 62)


def _clustering_bonus(types: int, a: int) -> int:
    """75 if the node holds only pods of type a, 50 if a among others, 25 if no GPU pod
    at all, else 0."""
    if types & a:
        return 75 if types == a else 50
    return 25 if types == 0 else 0


class GpuClusteringPolicy(CachedScorer):
    """03-GpuClustering: put pods of one type (sharing, 1, 2, 4, 8 GPUs) together,
    then fuller nodes first: b + 75 / 50 / 25 / 0 with b = 25 (8000 - R) div 8000."""

    name = "gpuclustering"

    def compute(
        self, snap: Snapshot, shape: PodShape, nodes: IntArray
    ) -> tuple[FloatArray, IntArray]:
        none = np.full(nodes.size, -1, dtype=np.int64)
        if not shape.is_gpu:
            return np.zeros(nodes.size), none
        a = _pod_type(shape)
        base = 25 * (MAX_SPEC_GPU - _idle(snap, nodes)) // MAX_SPEC_GPU
        out = np.empty(nodes.size, dtype=np.float64)
        for i, n in enumerate(nodes.tolist()):
            types = 0
            for p in snap.pods_on(n):
                if p.shape.is_gpu:
                    types |= _pod_type(p.shape)
            out[i] = base[i] + _clustering_bonus(types, a)
        return out, none

    def choose_gpus(self, snap: Snapshot, shape: PodShape, node: int) -> tuple[int, ...]:
        return _paper_gpus(snap, shape, node)


class GpuPackingPolicy:
    """04-GpuPacking: shared devices first (the fuller the better), then free devices
    on used nodes, then idle nodes (the smaller the better)."""

    name = "gpupacking"

    def score(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> FloatArray:
        if not shape.is_gpu:
            return np.zeros(nodes.size)
        k, d = shape.gpu_count, shape.gpu_milli
        g = snap.gpu_free[nodes]
        total = snap.gpu_total[nodes]
        all_free = (g == 1000).sum(axis=1) == total
        partial = (g >= d) & (g < 1000)
        n_partial = partial.sum(axis=1)
        smallest = np.sort(np.where(partial, g, 1000), axis=1)[:, :k]
        used_ratio = (smallest * 100 // 1000).sum(axis=1)
        case1 = np.maximum(100 - used_ratio // 10, 50)
        case2 = np.maximum(50 - (k - n_partial), 33)
        case3 = np.maximum(33 - total, total)
        out: FloatArray = np.where(all_free, case3, np.where(n_partial >= k, case1, case2)).astype(
            np.float64
        )
        return out

    def choose_gpus(self, snap: Snapshot, shape: PodShape, node: int) -> tuple[int, ...]:
        return _paper_gpus(snap, shape, node)
