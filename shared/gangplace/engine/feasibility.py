"""Which nodes can host a pod: vectorised filters over every node at once.

Filters split in two: *static* ones (readiness, cordon, a node left out of moves for
holding more than it has, node selector, required node affinity, taints, GPU model)
that no placement changes and are cached per shape, and
*dynamic* ones (free resources, free GPU devices) recomputed from the arrays. When no
node fits, :func:`explain` says why in the kube-scheduler's manner.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import numpy.typing as npt

from gangplace.engine.model import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodShape,
    Taint,
    Toleration,
)
from gangplace.engine.snapshot import Snapshot

__all__ = ["explain", "fits", "gpu_capacity", "member_capacity", "static_mask"]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

_UNSCHEDULABLE = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
# A node whose pods hold more than it has (gangplace.engine.node_checks): no pod is
# placed onto it.
OVERCOMMITTED = "overcommitted"


def _tolerates(tolerations: tuple[Toleration, ...], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def _requirement_mask(snap: Snapshot, req: NodeSelectorRequirement) -> BoolArray:
    codes, vocab = snap.label_codes(req.key)
    op = req.operator
    if op == "Exists":
        return codes >= 0
    if op == "DoesNotExist":
        return codes < 0
    if op in ("In", "NotIn"):
        wanted = [vocab[v] for v in req.values if v in vocab]
        hit = np.isin(codes, wanted) if wanted else np.zeros(snap.n_nodes, dtype=bool)
        return hit if op == "In" else ~hit
    # Gt / Lt compare the label, read as an integer, with the one value given; a label
    # that is absent or not an integer matches neither.
    bound = int(req.values[0])
    by_code = np.full(len(vocab) + 1, np.nan)
    for v, c in vocab.items():
        if (n := _int_or_none(v)) is not None:
            by_code[c] = n
    numbers = by_code[codes]  # code -1 reads the trailing NaN
    with np.errstate(invalid="ignore"):
        return numbers > bound if op == "Gt" else numbers < bound


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _field_mask(snap: Snapshot, req: NodeSelectorRequirement) -> BoolArray:
    # The only field Kubernetes supports in matchFields is metadata.name (In / NotIn).
    if req.key != "metadata.name":
        return np.zeros(snap.n_nodes, dtype=bool)
    hit = np.zeros(snap.n_nodes, dtype=bool)
    for v in req.values:
        i = snap.node_index.get(v)
        if i is not None:
            hit[i] = True
    return hit if req.operator == "In" else ~hit


def _term_mask(snap: Snapshot, term: NodeSelectorTerm) -> BoolArray:
    mask = np.ones(snap.n_nodes, dtype=bool)
    if not term.match_expressions and not term.match_fields:
        return ~mask  # an empty term matches no node, as in Kubernetes
    for r in term.match_expressions:
        mask &= _requirement_mask(snap, r)
    for r in term.match_fields:
        mask &= _field_mask(snap, r)
    return mask


def _selector_mask(snap: Snapshot, shape: PodShape) -> BoolArray:
    mask = np.ones(snap.n_nodes, dtype=bool)
    for key, value in shape.node_selector:
        codes, vocab = snap.label_codes(key)
        mask &= codes == vocab.get(value, -2)
    return mask


def _affinity_mask(snap: Snapshot, shape: PodShape) -> BoolArray:
    if not shape.affinity:
        return np.ones(snap.n_nodes, dtype=bool)
    mask = np.zeros(snap.n_nodes, dtype=bool)
    for term in shape.affinity:
        mask |= _term_mask(snap, term)
    return mask


def _taint_mask(snap: Snapshot, shape: PodShape) -> BoolArray:
    taints, matrix = snap.taint_matrix()
    if not taints:
        return np.ones(snap.n_nodes, dtype=bool)
    bad = np.array([not _tolerates(shape.tolerations, t) for t in taints], dtype=bool)
    hit: BoolArray = np.any(matrix[:, bad], axis=1)
    return ~hit


def _gpu_static_mask(snap: Snapshot, shape: PodShape) -> BoolArray:
    if not shape.is_gpu:
        return np.ones(snap.n_nodes, dtype=bool)
    mask = snap.gpu_total >= shape.gpu_count
    if shape.gpu_resource is not None:
        names = snap.gpu_resource_names
        code = names.index(shape.gpu_resource) if shape.gpu_resource in names else -2
        mask &= snap.gpu_resource == code
    if shape.gpu_models:
        codes = [snap.gpu_models.index(m) for m in shape.gpu_models if m in snap.gpu_models]
        mask &= np.isin(snap.gpu_model, codes)
    return mask


def static_mask(snap: Snapshot, shape: PodShape) -> BoolArray:
    """Nodes that pass every filter no placement can change (cached per shape)."""
    cache = snap.static_cache()
    hit = cache.get(shape)
    if hit is None:
        mask = snap.ready & ~snap.fenced
        if not _tolerates(shape.tolerations, _UNSCHEDULABLE):
            mask &= ~snap.unschedulable
        mask &= _selector_mask(snap, shape)
        mask &= _affinity_mask(snap, shape)
        mask &= _taint_mask(snap, shape)
        mask &= _gpu_static_mask(snap, shape)
        _, known = snap.vector(shape)
        if not known:
            mask[:] = False
        mask.setflags(write=False)
        cache[shape] = mask
        hit = mask
    return hit


def gpu_capacity(snap: Snapshot, shape: PodShape, nodes: IntArray | slice) -> IntArray:
    """How many more pods of ``shape`` the GPU devices of ``nodes`` could take."""
    free = snap.gpu_free[nodes]
    cap: IntArray
    if shape.gpu_milli >= 1000:
        cap = (free >= 1000).sum(axis=1) // shape.gpu_count
    else:
        cap = (np.where(free > 0, free, 0) // shape.gpu_milli).sum(axis=1)
    return cap


def member_capacity(
    snap: Snapshot, shape: PodShape, nodes: IntArray | slice = slice(None)
) -> IntArray:
    """How many pods of ``shape`` each node could still take (0 where filtered out)."""
    vec, _ = snap.vector(shape)
    cols = np.flatnonzero(vec)
    free = snap.alloc[nodes][:, cols] - snap.used[nodes][:, cols]
    cap = (np.maximum(free, 0) // vec[cols]).min(axis=1) if cols.size else None
    if shape.is_gpu:
        g = gpu_capacity(snap, shape, nodes)
        cap = g if cap is None else np.minimum(cap, g)
    if cap is None:
        cap = np.full(snap.alloc[nodes].shape[0], 1 << 30, dtype=np.int64)
    return np.where(static_mask(snap, shape)[nodes], cap, 0).astype(np.int64)


def fits(snap: Snapshot, shape: PodShape, nodes: IntArray | slice = slice(None)) -> BoolArray:
    """Which of ``nodes`` (default: all) can host one more pod of ``shape`` now."""
    mask = static_mask(snap, shape)[nodes].copy()
    vec, _ = snap.vector(shape)
    cols = np.flatnonzero(vec)
    if cols.size:
        free = snap.alloc[nodes][:, cols] - snap.used[nodes][:, cols]
        mask &= (free >= vec[cols]).all(axis=1)
    if shape.is_gpu:
        ok = (snap.gpu_free[nodes] >= shape.gpu_milli).sum(axis=1) >= shape.gpu_count
        mask &= ok
    return mask


def _node_reasons(
    snap: Snapshot, shape: PodShape, i: int, selected: BoolArray, affine: BoolArray
) -> list[str]:
    """Why node ``i`` cannot host ``shape``: the first failing static filter, else every
    resource that is short (kube-scheduler reports all insufficient resources)."""
    node = snap.nodes[i]
    if not node.ready:
        return ["not ready"]
    if node.unschedulable and not _tolerates(shape.tolerations, _UNSCHEDULABLE):
        return ["unschedulable"]
    if snap.fenced[i]:
        return [OVERCOMMITTED]
    for t in node.taints:
        if t.effect != "PreferNoSchedule" and not _tolerates(shape.tolerations, t):
            return [
                f"untolerated taint {t.key}={t.value}" if t.value else f"untolerated taint {t.key}"
            ]
    one = np.array([i])
    if not selected[i]:
        return ["node selector mismatch"]
    if not affine[i]:
        return ["node affinity mismatch"]
    reasons: list[str] = []
    if shape.is_gpu:
        gpu_name = shape.gpu_resource or (
            snap.gpu_resource_names[0] if snap.gpu_resource_names else "nvidia.com/gpu"
        )
        if node.gpu_count == 0:
            return [f"no {gpu_name}"]
        if shape.gpu_resource is not None and node.gpu_resource != shape.gpu_resource:
            return [f"no {gpu_name}"]
        if shape.gpu_models and node.gpu_model not in shape.gpu_models:
            return ["GPU model not allowed"]
        if not fits_gpu_only(snap, shape, one):
            reasons.append(f"insufficient {gpu_name}")
    for r, v in shape.requests:
        j = snap.res_index.get(r)
        if j is None:
            reasons.append(f"insufficient {r}")
        elif snap.alloc[i, j] - snap.used[i, j] < v:
            reasons.append("too many pods" if r == "pods" else f"insufficient {r}")
    return reasons or ["unknown"]


def fits_gpu_only(snap: Snapshot, shape: PodShape, nodes: IntArray) -> bool:
    return bool(((snap.gpu_free[nodes] >= shape.gpu_milli).sum(axis=1) >= shape.gpu_count).all())


def _taint_text(t: Taint) -> str:
    return f"untolerated taint {t.key}={t.value}" if t.value else f"untolerated taint {t.key}"


def _count_reasons(
    snap: Snapshot,
    shape: PodShape,
    bad: BoolArray,
    selected: BoolArray,
    affine: BoolArray,
    counts: Counter[str],
) -> None:
    """``counts`` of :func:`_node_reasons` over the nodes of ``bad``, filter by filter
    over all nodes at once: a node takes the first static filter it fails, else every
    resource it is short of."""
    left = bad.copy()

    def take(mask: BoolArray, reason: str) -> None:
        hit = left & mask
        n = int(hit.sum())
        if n:
            counts[reason] += n
            left[hit] = False

    take(~snap.ready, "not ready")
    if not _tolerates(shape.tolerations, _UNSCHEDULABLE):
        take(snap.unschedulable, "unschedulable")
    take(snap.fenced, OVERCOMMITTED)
    taints, matrix = snap.taint_matrix()
    if taints:
        untolerated = np.flatnonzero([not _tolerates(shape.tolerations, t) for t in taints])
        if untolerated.size:
            per_node = matrix[:, untolerated]
            n_bad = per_node.sum(axis=1)
            one = left & (n_bad == 1)
            for col, n in Counter(per_node[one].argmax(axis=1).tolist()).items():
                counts[_taint_text(taints[int(untolerated[col])])] += n
            left &= ~one
            # Two or more: the first in the node's own order names it.
            for i in np.flatnonzero(left & (n_bad > 1)):
                counts.update(_node_reasons(snap, shape, int(i), selected, affine))
            left &= n_bad == 0
    take(~selected, "node selector mismatch")
    take(~affine, "node affinity mismatch")
    given = np.zeros(snap.n_nodes, dtype=np.int64)  # reasons given to each node left
    if shape.is_gpu:
        gpu_name = shape.gpu_resource or (
            snap.gpu_resource_names[0] if snap.gpu_resource_names else "nvidia.com/gpu"
        )
        no_gpu = snap.gpu_total == 0
        if shape.gpu_resource is not None:
            names = snap.gpu_resource_names
            code = names.index(shape.gpu_resource) if shape.gpu_resource in names else -2
            no_gpu = no_gpu | (snap.gpu_resource != code)
        take(no_gpu, f"no {gpu_name}")
        if shape.gpu_models:
            codes = [snap.gpu_models.index(m) for m in shape.gpu_models if m in snap.gpu_models]
            take(~np.isin(snap.gpu_model, codes), "GPU model not allowed")
        short = (snap.gpu_free >= shape.gpu_milli).sum(axis=1) < shape.gpu_count
        hit = left & short
        if (n := int(hit.sum())) > 0:
            counts[f"insufficient {gpu_name}"] += n
            given += hit
    for r, v in shape.requests:
        j = snap.res_index.get(r)
        # A resource no node has is short everywhere.
        hit = left.copy() if j is None else left & (snap.alloc[:, j] - snap.used[:, j] < v)
        if (n := int(hit.sum())) > 0:
            counts["too many pods" if r == "pods" and j is not None else f"insufficient {r}"] += n
            given += hit
    if (n := int((left & (given == 0)).sum())) > 0:
        counts["unknown"] += n


def explain(snap: Snapshot, shape: PodShape, pod_name: str, limit: int = 4) -> str:
    """``0/12 nodes can host pod worker: 8 insufficient nvidia.com/gpu, 4 untolerated
    taint gpu=reserved`` -- the reasons counted over nodes, most common first."""
    ok = fits(snap, shape)
    n_ok = int(ok.sum())
    counts: Counter[str] = Counter()
    if n_ok < snap.n_nodes:
        selected, affine = _selector_mask(snap, shape), _affinity_mask(snap, shape)
        _count_reasons(snap, shape, ~ok, selected, affine, counts)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{n} {why}" for why, n in ranked[:limit]]
    if len(ranked) > limit:
        parts.append(f"{sum(n for _, n in ranked[limit:])} other")
    head = f"{n_ok}/{snap.n_nodes} nodes can host pod {pod_name}"
    return f"{head}: {', '.join(parts)}" if parts else head
