"""06-FGD: place each pod where the node's fragmentation F_n(M) grows least.

score = floor(100 sigmoid((F_before - F_after) / 1000)), no normalisation; a sharing
pod tries every device that fits and keeps the best (lowest index on ties), whole GPUs
take the lowest fully free devices. Scores are cached per node and shape and rebuilt
only for nodes that changed; identical node states are scored once.
"""

from __future__ import annotations

import numpy as np

from gangplace.engine.fragmentation import TargetWorkload, frag_amount, table_for
from gangplace.engine.model import PodShape
from gangplace.engine.policies.base import CachedScorer, FloatArray, IntArray, free_cpu
from gangplace.engine.snapshot import Snapshot

__all__ = ["FgdPolicy", "frag_delta"]

_DEDUP_AT = 48  # batches at least this large are scored once per distinct node state


def _after_whole(g: IntArray, k: int) -> IntArray:
    """Free devices after taking the k lowest-indexed fully free ones."""
    full = g >= 1000
    take = full & (np.cumsum(full, axis=-1) <= k)
    out: IntArray = np.where(take, 0, g)
    return out


def frag_delta(
    snap: Snapshot,
    workload: TargetWorkload,
    shape: PodShape,
    cpu: IntArray,
    g: IntArray,
    model: IntArray,
) -> tuple[FloatArray, IntArray]:
    """F_before - F_after for one more pod of ``shape`` on node states (cpu, g, model),
    best device for a sharing pod, and that device (-1: not a sharing pod, or no device
    fits). Rows where no device fits a sharing pod get -inf."""
    table = table_for(snap, workload)
    before = frag_amount(table, cpu, g, model)
    c = shape.request("cpu")
    none = np.full(cpu.shape[0], -1, dtype=np.int64)
    if shape.is_shared_gpu:
        d = shape.gpu_milli
        n_dev = g.shape[1]
        variants = np.repeat(g[:, None, :], n_dev, axis=1)
        eye = np.arange(n_dev)
        variants[:, eye, eye] -= d
        after = frag_amount(
            table,
            np.repeat((cpu - c)[:, None], n_dev, axis=1),
            variants,
            np.repeat(model[:, None], n_dev, axis=1),
        )
        delta = np.where(g >= d, before[:, None] - after, -np.inf)
        return delta, none
    if shape.is_gpu:
        after = frag_amount(table, cpu - c, _after_whole(g, shape.gpu_count), model)
    else:
        after = frag_amount(table, cpu - c, g, model)
    return before - after, none


def fgd_score(delta: FloatArray) -> FloatArray:
    """The paper's integer score of a fragmentation change (thousandths of a GPU)."""
    with np.errstate(over="ignore"):
        s = (1.0 / (1.0 + np.exp(-(delta / 1000.0)))) * 100.0
    out: FloatArray = np.where(np.isfinite(delta), np.trunc(s), -1.0)
    return out


class FgdPolicy(CachedScorer):
    """Fragmentation Gradient Descent, exactly as the paper's simulator scores it."""

    name = "fgd"

    def __init__(self, workload: TargetWorkload) -> None:
        super().__init__()
        self.workload = workload

    def node_scores(
        self, snap: Snapshot, shape: PodShape, cpu: IntArray, g: IntArray, model: IntArray
    ) -> tuple[FloatArray, IntArray]:
        """Scores and devices for raw node states (override to change the scoring)."""
        delta, _ = frag_delta(snap, self.workload, shape, cpu, g, model)
        score = fgd_score(delta)
        if score.ndim == 1:
            return score, np.full(score.size, -1, dtype=np.int64)
        best = np.argmax(score, axis=1)
        rows = np.arange(score.shape[0])
        return score[rows, best], best.astype(np.int64)

    def compute(
        self, snap: Snapshot, shape: PodShape, nodes: IntArray
    ) -> tuple[FloatArray, IntArray]:
        cpu = free_cpu(snap, nodes)
        g = snap.gpu_free[nodes]
        model = snap.gpu_model[nodes]
        if nodes.size < _DEDUP_AT:
            return self.node_scores(snap, shape, cpu, g, model)
        keys = np.column_stack([cpu, model, g])
        uniq, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        s, dev = self.node_scores(snap, shape, cpu[first], g[first], model[first])
        del uniq
        return s[inverse], dev[inverse]
