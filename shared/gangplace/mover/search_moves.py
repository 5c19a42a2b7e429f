"""The fewest moves that let a pod fit: for a pod that fits nowhere, evict the fewest
pods from one node so that it fits there, and place each evicted pod again elsewhere
(where the policy puts it, or -- when it fits nowhere either -- by the same search one
level down). Every answer comes from the engine's filters and the policy's placement,
so "does it fit" is answered in one place.

A repair is all-or-nothing: either the pod and every pod it displaced end up placed
(the snapshot keeps the moves), or the snapshot is exactly as before. A pod moved in a
repair is not moved again in it, and the pod being fitted is never displaced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gangplace.engine.feasibility import fits, static_mask
from gangplace.engine.model import PodShape
from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.scoring import Scorer
from gangplace.engine.single_pod import place_pod
from gangplace.engine.snapshot import Snapshot

__all__ = ["Repair", "evictions_for", "fit_with_moves", "nearest_to_fitting"]

# A unit a repair may move: every pod is its own unit unless the caller groups them.
Movable = Callable[[PodRecord], bool]


@dataclass(slots=True)
class Repair:
    """What a successful repair did."""

    moved: list[PodRecord] = field(default_factory=list)  # pods that changed place
    nodes_tried: int = 0


def _gpu_evictions(
    snap: Snapshot, shape: PodShape, node: int, on_gpu: dict[int, list[PodRecord]], movable: Movable
) -> list[PodRecord] | None:
    free = snap.gpu_free[node]
    n_gpu = int(snap.gpu_total[node])
    if shape.gpu_milli >= 1000:
        # The k GPUs whose clearing moves the fewest pods (a pod on several GPUs counts once
        # per GPU here; the union is taken below).
        costs = []
        for g in range(n_gpu):
            pods = on_gpu.get(g, [])
            if not all(movable(p) for p in pods):
                continue
            if int(free[g]) + sum(p.shape.gpu_milli for p in pods) < 1000:
                continue  # held by something the snapshot has no pod record of
            costs.append((len(pods), g))
        if len(costs) < shape.gpu_count:
            return None
        costs.sort()
        out: dict[int, PodRecord] = {}
        for _, g in costs[: shape.gpu_count]:
            for p in on_gpu.get(g, []):
                out[id(p)] = p
        return list(out.values())
    best: list[PodRecord] | None = None
    for g in range(n_gpu):
        room = int(free[g])
        if room >= shape.gpu_milli:
            return []
        taken: list[PodRecord] = []
        for p in sorted(on_gpu.get(g, []), key=lambda p: -p.shape.gpu_milli):
            if not movable(p):
                continue
            taken.append(p)
            room += p.shape.gpu_milli
            if room >= shape.gpu_milli:
                break
        if room >= shape.gpu_milli and (best is None or len(taken) < len(best)):
            best = taken
    return best


def evictions_for(
    snap: Snapshot, shape: PodShape, node: int, movable: Movable
) -> list[PodRecord] | None:
    """The fewest pods (greedy) to take off ``node`` so that one pod of ``shape`` fits
    there; None if no set of movable pods would do."""
    pods = snap.pods_on(node)
    on_gpu: dict[int, list[PodRecord]] = {}
    for p in pods:
        for g in p.gpus:
            on_gpu.setdefault(g, []).append(p)
    chosen: list[PodRecord] = []
    if shape.is_gpu:
        got = _gpu_evictions(snap, shape, node, on_gpu, movable)
        if got is None:
            return None
        chosen = got
    vec, _ = snap.vector(shape)
    free = snap.alloc[node] - snap.used[node]
    for p in chosen:
        free = free + snap.vector(p.shape)[0]
    if (free >= vec).all():
        return chosen
    ids = {id(p) for p in chosen}
    rest = [p for p in pods if id(p) not in ids and movable(p)]
    while not (free >= vec).all():
        short = np.flatnonzero(free < vec)
        if not rest:
            return None
        # The pod that covers most of the largest shortfall (relative to the need).
        gap = (vec - free)[short].astype(float)

        def cover(p: PodRecord, short: Any = short, gap: Any = gap) -> float:
            pv = snap.vector(p.shape)[0][short]
            return float(np.minimum(pv, gap).sum() / np.maximum(gap, 1).sum())

        pick = max(rest, key=cover)
        if cover(pick) <= 0:
            return None
        rest.remove(pick)
        chosen.append(pick)
        free = free + snap.vector(pick.shape)[0]
    return chosen


def _size(p: PodRecord) -> tuple[int, int]:
    return (-p.shape.gpu_demand_milli, -p.shape.request("cpu"))


def fit_with_moves(
    snap: Snapshot,
    shape: PodShape,
    policy: Scorer,
    pod: PodRecord | None = None,
    *,
    max_pods: int = 4,
    depth: int = 1,
    max_nodes: int = 24,
    movable: Movable | None = None,
) -> Repair | None:
    """Place one pod of ``shape`` (as ``pod``) by moving at most ``max_pods`` pods, the
    fewest found; None (snapshot unchanged) when no repair within the limits exists.
    ``depth`` is how many times a displaced pod may itself displace others; at most
    ``max_nodes`` target nodes are tried, cheapest first."""
    frozen: set[int] = set()
    ok: Movable = movable or (lambda p: True)
    return _fit(snap, shape, policy, pod, max_pods, depth, max_nodes, frozen, ok)


def nearest_to_fitting(snap: Snapshot, shape: PodShape, want: int) -> list[int]:
    """The ``want`` nodes closest to fitting ``shape`` (the shortfall of its GPU and of
    each resource, as fractions of what it asks, summed): where the fewest evictions are
    likely. Vectorised, so the exact count runs on a few nodes only."""
    vec, _ = snap.vector(shape)
    mask = static_mask(snap, shape) & (snap.alloc >= vec[None, :]).all(axis=1)
    if shape.is_gpu:
        mask &= snap.gpu_total >= shape.gpu_count
    nodes = np.flatnonzero(mask)
    if nodes.size <= want:
        few: list[int] = nodes.tolist()
        return few
    free = snap.alloc[nodes] - snap.used[nodes]
    cols = np.flatnonzero(vec)
    short = np.zeros(nodes.size)
    if cols.size:
        short += (np.maximum(vec[cols] - free[:, cols], 0) / vec[cols]).sum(axis=1)
    if shape.is_gpu:
        gfree = snap.gpu_free[nodes]
        if shape.gpu_milli >= 1000:
            full = (gfree >= 1000).sum(axis=1)
            short += np.maximum(shape.gpu_count - full, 0) / shape.gpu_count * 2
        else:
            short += np.maximum(shape.gpu_milli - gfree.max(axis=1), 0) / shape.gpu_milli * 2
    order = np.lexsort((snap.node_rank[nodes], short))[:want]
    out: list[int] = nodes[order].tolist()
    return out


def _candidates(
    snap: Snapshot, shape: PodShape, movable: Movable, want: int
) -> list[tuple[int, int, list[PodRecord]]]:
    """Target nodes with their evictions, the most promising first: fewest evicted pods
    that fit nowhere as things stand (those need a move of their own), then fewest pods."""
    fits_now: dict[PodShape, bool] = {}

    def stuck(p: PodRecord) -> int:
        hit = fits_now.get(p.shape)
        if hit is None:
            hit = fits_now[p.shape] = bool(fits(snap, p.shape).any())
        return 0 if hit else 1

    out = []
    for n in nearest_to_fitting(snap, shape, want):
        ev = evictions_for(snap, shape, n, movable)
        if ev is not None:
            out.append((sum(stuck(p) for p in ev), len(ev), int(snap.node_rank[n]), ev, n))
    out.sort(key=lambda c: (c[0], c[1], c[2]))
    return [(c[4], c[1], c[3]) for c in out]


def _fit(
    snap: Snapshot,
    shape: PodShape,
    policy: Scorer,
    pod: PodRecord | None,
    max_pods: int,
    depth: int,
    max_nodes: int,
    frozen: set[int],
    movable: Movable,
) -> Repair | None:
    if fits(snap, shape).any():
        place_pod(snap, shape, policy, pod)
        if pod is not None:
            frozen.add(id(pod))
        return Repair()
    if max_pods <= 0:
        return None

    def may(p: PodRecord) -> bool:
        return id(p) not in frozen and movable(p)

    tried = 0
    best: tuple[int, list[tuple[PodRecord, int, tuple[int, ...]]]] | None = None
    for node, cost, ev in _candidates(snap, shape, may, 4 * max_nodes):
        if tried >= max_nodes:
            break
        if cost > max_pods or (best is not None and cost >= best[0]):
            continue
        tried += 1
        token = snap.fork()
        inner_frozen = set(frozen)
        moved = _try_node(
            snap, shape, policy, pod, node, ev, max_pods, depth, max_nodes, inner_frozen, movable
        )
        if moved is None:
            snap.revert(token)
            continue
        # Keep the cheapest: record the result, undo, and redo it at the end.
        plan = [(p, p.node, p.gpus) for p in moved]
        placed_at = (pod.node, pod.gpus) if pod is not None else None
        snap.revert(token)
        best = (len(moved), plan)
        best_node, best_placed = node, placed_at
        if len(moved) <= 1:
            break  # one pod is the least a repair moves
        max_nodes = min(max_nodes, tried + 4)  # a few more tries for a cheaper one
    if best is None:
        return None
    # Redo the best repair: every displaced pod off, the pod on, the pods at their targets.
    for p, _, _ in best[1]:
        if p.node >= 0:
            snap.remove(p)
    if best_placed is not None and pod is not None:
        snap.place(shape, best_placed[0], best_placed[1], pod=pod)
    else:
        snap.place(shape, best_node, policy.choose_gpus(snap, shape, best_node), pod=pod)
    for p, n, g in best[1]:
        snap.place(p.shape, n, g, pod=p)
        frozen.add(id(p))
    if pod is not None:
        frozen.add(id(pod))
    return Repair(moved=[p for p, _, _ in best[1]], nodes_tried=tried)


def _try_node(
    snap: Snapshot,
    shape: PodShape,
    policy: Scorer,
    pod: PodRecord | None,
    node: int,
    evict: Iterable[PodRecord],
    max_pods: int,
    depth: int,
    max_nodes: int,
    frozen: set[int],
    movable: Movable,
) -> list[PodRecord] | None:
    """Evict, place the pod on ``node``, place the evicted pods again; the pods moved,
    or None (the caller reverts)."""
    evict = list(evict)
    for p in evict:
        snap.remove(p)
    gpus = policy.choose_gpus(snap, shape, node)
    if shape.is_gpu and len(gpus) != shape.gpu_count:
        return None
    snap.place(shape, node, gpus, pod=pod)
    if pod is not None:
        frozen.add(id(pod))
    for p in evict:
        frozen.add(id(p))
    moved = list(evict)
    budget = max_pods - len(evict)
    for p in sorted(evict, key=_size):
        if fits(snap, p.shape).any():
            place_pod(snap, p.shape, policy, p)
            continue
        if depth <= 0 or budget <= 0:
            return None
        # One level down the search narrows: a few target nodes for each displaced pod.
        inner = max(2, max_nodes // 8)
        sub = _fit(snap, p.shape, policy, p, budget, depth - 1, inner, frozen, movable)
        if sub is None:
            return None
        budget -= len(sub.moved)
        moved.extend(sub.moved)
    return moved
