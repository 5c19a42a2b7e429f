"""GPU fragmentation as the FGD paper defines it (Weng et al., USENIX ATC 2023).

For a node n and a task shape m = (cpu c, GPUs k, thousandths per GPU d, models S):
all idle GPU of n is *fragment* for m when m cannot run there (CPU-only task, model
not allowed, too little CPU, fewer than k GPUs with d free); when m can run, only the
GPUs with less than d free are. A target workload M weighs shapes by frequency p_m:
F_n(M) = sum_m p_m F_n(m), F(M) = sum_n F_n(M). Memory plays no part, as in the paper.

The functions work on raw arrays too, so a scorer can measure a node *after* a
hypothetical placement without touching the snapshot.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .model import PodShape
from .snapshot import Snapshot

__all__ = [
    "TargetWorkload",
    "TaskShape",
    "fragmentation",
    "node_fragmentation",
    "node_satisfiable",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, order=True)
class TaskShape:
    """The paper's view of a pod: CPU (milli), thousandths per GPU, GPU count, models."""

    cpu: int
    gpu_milli: int
    gpu_count: int
    models: tuple[str, ...] = ()

    @classmethod
    def of(cls, shape: PodShape) -> TaskShape:
        if not shape.is_gpu:
            return cls(shape.request("cpu"), 0, 0, ())
        return cls(shape.request("cpu"), shape.gpu_milli, shape.gpu_count, shape.gpu_models)


@dataclass(frozen=True, slots=True)
class TargetWorkload:
    """Typical task shapes with their frequencies (summing to 1)."""

    shapes: tuple[TaskShape, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.shapes) != len(self.weights):
            raise ValueError("one weight per shape")

    @classmethod
    def from_shapes(
        cls, shapes: Iterable[PodShape | TaskShape], coverage: float = 0.95
    ) -> TargetWorkload:
        """The most frequent shapes covering ``coverage`` of the pods (ties broken by
        the larger shape), as the paper builds M from a pod list."""
        counts = Counter(s if isinstance(s, TaskShape) else TaskShape.of(s) for s in shapes)
        if not counts:
            return cls((), ())
        total = sum(counts.values())
        ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        chosen: list[tuple[TaskShape, int]] = []
        covered = 0
        for shape, n in ranked:
            chosen.append((shape, n))
            covered += n
            if covered >= coverage * total:
                break
        kept = sum(n for _, n in chosen)
        return cls(tuple(s for s, _ in chosen), tuple(n / kept for _, n in chosen))

    @classmethod
    def of(cls, weighted: Sequence[tuple[TaskShape, float]]) -> TargetWorkload:
        total = sum(w for _, w in weighted)
        return cls(tuple(s for s, _ in weighted), tuple(w / total for _, w in weighted))


def _model_mask(snap: Snapshot, models: tuple[str, ...], nodes: IntArray | slice) -> BoolArray:
    codes = [snap.gpu_models.index(m) for m in models if m in snap.gpu_models]
    return np.isin(snap.gpu_model[nodes], codes)


def node_fragmentation(
    snap: Snapshot,
    workload: TargetWorkload,
    nodes: IntArray | slice = slice(None),
    *,
    free_cpu: IntArray | None = None,
    gpu_free: IntArray | None = None,
) -> FloatArray:
    """F_n(M) in thousandths of a GPU for ``nodes``; ``free_cpu`` / ``gpu_free`` may
    replace the snapshot's figures for those nodes (a what-if)."""
    cpu_j = snap.res_index["cpu"]
    if free_cpu is None:
        free_cpu = snap.alloc[nodes, cpu_j] - snap.used[nodes, cpu_j]
    g = snap.gpu_free[nodes] if gpu_free is None else gpu_free
    r_g = np.where(g > 0, g, 0)
    idle: FloatArray = r_g.sum(axis=-1).astype(np.float64)
    out: FloatArray = np.zeros_like(idle)
    for shape, p in zip(workload.shapes, workload.weights, strict=True):
        if shape.gpu_milli == 0:
            out += p * idle
            continue
        ok = ((r_g >= shape.gpu_milli).sum(axis=-1) >= shape.gpu_count) & (free_cpu >= shape.cpu)
        if shape.models:
            ok &= _model_mask(snap, shape.models, nodes)
        sliver = np.where(r_g < shape.gpu_milli, r_g, 0).sum(axis=-1)
        out += p * np.where(ok, sliver, idle)
    return out


def node_satisfiable(
    snap: Snapshot, workload: TargetWorkload, nodes: IntArray | slice = slice(None)
) -> BoolArray:
    """Nodes where at least one GPU shape of M could start now (CPU and GPUs both)."""
    cpu_j = snap.res_index["cpu"]
    free_cpu = snap.alloc[nodes, cpu_j] - snap.used[nodes, cpu_j]
    r_g = np.maximum(snap.gpu_free[nodes], 0)
    any_ok = np.zeros(r_g.shape[0], dtype=bool)
    for shape in workload.shapes:
        if shape.gpu_milli == 0:
            continue
        ok = ((r_g >= shape.gpu_milli).sum(axis=1) >= shape.gpu_count) & (free_cpu >= shape.cpu)
        if shape.models:
            ok &= _model_mask(snap, shape.models, nodes)
        any_ok |= ok
    return any_ok


def fragmentation(snap: Snapshot, workload: TargetWorkload) -> float:
    """Cluster F(M) in GPUs."""
    return float(node_fragmentation(snap, workload).sum()) / 1000.0
