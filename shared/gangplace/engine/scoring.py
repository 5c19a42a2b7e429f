"""Node scorers: higher is better, computed for many nodes at once.

A scorer gives each candidate node a score for one more pod of a shape, and picks the
GPU devices on the chosen node. A node's score may depend only on that node's state
and the shape, so a placement loop can rescore just the node it changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from gangplace.engine.model import PodShape
from gangplace.engine.snapshot import Snapshot

__all__ = [
    "DEFAULT_WEIGHTS",
    "BinpackScorer",
    "Scorer",
    "SpreadScorer",
    "best_fit_gpus",
    "select_node",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Binpack weights: CPU and memory as Volcano's binpack plugin weighs them; GPUs form a
# term of their own, from per-device usage, whenever the pod asks for a GPU.
DEFAULT_WEIGHTS: Mapping[str, float] = {"cpu": 0.7, "memory": 0.3, "gpu": 1.0}


@runtime_checkable
class Scorer(Protocol):
    name: str

    def score(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> FloatArray:
        """Scores of ``nodes`` (all of which fit ``shape``), higher is better."""
        ...

    def choose_gpus(self, snap: Snapshot, shape: PodShape, node: int) -> tuple[int, ...]:
        """The devices of ``node`` that a pod of ``shape`` should take."""
        ...


def best_fit_gpus(snap: Snapshot, shape: PodShape, node: int) -> tuple[int, ...]:
    """Whole GPUs: the lowest-indexed fully free devices. A share: the device with the
    least free room that still fits, lowest index on ties (keeps whole GPUs whole)."""
    if not shape.is_gpu:
        return ()
    free = snap.gpu_free[node]
    if shape.gpu_milli >= 1000:
        full = np.flatnonzero(free >= 1000)
        return tuple(int(g) for g in full[: shape.gpu_count])
    ok = np.flatnonzero(free >= shape.gpu_milli)
    if ok.size == 0:
        return ()
    return (int(ok[np.argmin(free[ok])]),)


def select_node(snap: Snapshot, nodes: IntArray, scores: FloatArray) -> int:
    """Position (in ``nodes``) of the best score; ties go to the lowest node rank."""
    best = np.flatnonzero(scores == scores.max())
    if best.size == 1:
        return int(best[0])
    return int(best[np.argmin(snap.node_rank[nodes[best]])])


class _Weighted:
    def __init__(self, weights: Mapping[str, float] | None = None) -> None:
        w = dict(DEFAULT_WEIGHTS if weights is None else weights)
        for k, v in w.items():
            if v < 0:
                raise ValueError(f"weight for {k!r} must be >= 0, got {v}")
        self.weights = w

    def _fractions(
        self, snap: Snapshot, shape: PodShape, nodes: IntArray
    ) -> tuple[FloatArray, float]:
        """Weighted sum over requested resources of (used + request) / allocatable."""
        vec, _ = snap.vector(shape)
        total = np.zeros(nodes.size, dtype=np.float64)
        weight_sum = 0.0
        for r, w in self.weights.items():
            if w <= 0 or r == "gpu":
                continue
            j = snap.res_index.get(r)
            if j is None or vec[j] == 0:
                continue
            alloc = snap.alloc[nodes, j].astype(np.float64)
            after = (snap.used[nodes, j] + vec[j]).astype(np.float64)
            total += w * np.divide(after, alloc, out=np.ones_like(after), where=alloc > 0)
            weight_sum += w
        wg = self.weights.get("gpu", 0.0)
        if wg > 0 and shape.is_gpu:
            cap = snap.gpu_total[nodes].astype(np.float64) * 1000.0
            used = cap - snap.gpu_free_total(nodes)
            after = used + shape.gpu_demand_milli
            total += wg * np.divide(after, cap, out=np.ones_like(after), where=cap > 0)
            weight_sum += wg
        return total, weight_sum


class BinpackScorer(_Weighted):
    """Most-allocated first: fills nodes before opening new ones (Volcano's binpack)."""

    name = "binpack"

    def score(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> FloatArray:
        total, wsum = self._fractions(snap, shape, nodes)
        return 100.0 * total / wsum if wsum else np.zeros(nodes.size)

    def choose_gpus(self, snap: Snapshot, shape: PodShape, node: int) -> tuple[int, ...]:
        return best_fit_gpus(snap, shape, node)


class SpreadScorer(_Weighted):
    """Least-allocated first: spreads load (the kube-scheduler's LeastAllocated)."""

    name = "spread"

    def score(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> FloatArray:
        total, wsum = self._fractions(snap, shape, nodes)
        return 100.0 * (1.0 - total / wsum) if wsum else np.zeros(nodes.size)

    def choose_gpus(self, snap: Snapshot, shape: PodShape, node: int) -> tuple[int, ...]:
        return best_fit_gpus(snap, shape, node)
