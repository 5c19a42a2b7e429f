"""Carrying an exact plan out: the snapshot rearranged into the plan the exact check
(:mod:`gangplace.sim.exact`) found, node by node and GPU by GPU, keeping every pod that
may stay where it is, and checked to be a real packing. Apart from the check itself,
which only decides; this is the part that moves pods. The plan's shape (:class:`Config`,
:class:`ExactPlan`) is defined here, and the check is read through :class:`PlanFit`, so
this module needs nothing of the check's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gangplace.engine.model import PodShape
from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.snapshot import Snapshot
from gangplace.mover.packing_check import verify_nodes
from gangplace.sim.fit_bound import NodeTypes

__all__ = ["Config", "ExactPlan", "PlanFit", "apply_plan", "lay_out"]


@dataclass(frozen=True, slots=True)
class Config:
    """What one node holds: pods per shape (the model's shape order) and, for each GPU
    that GPU-sharing pods use, the shapes of the shares on it."""

    counts: tuple[int, ...]
    bins: tuple[tuple[int, ...], ...]


@dataclass(slots=True)
class ExactPlan:
    """An integer arrangement: the configurations of each node type (with repeats)."""

    per_type: dict[int, list[Config]]
    nodes: list[int] | None = None  # the nodes it lays out (None: all)
    by_node: dict[int, Config] | None = None  # each node's configuration, when known


class PlanFit(Protocol):
    """What carrying a plan out reads of the exact check that found it
    (:class:`~gangplace.sim.exact.ExactFit`): its shapes, their order and GPUs, the node
    types, and how it counts the pods."""

    @property
    def shapes(self) -> list[PodShape]: ...

    @property
    def index(self) -> dict[PodShape, int]: ...

    @property
    def whole(self) -> npt.NDArray[np.int64]: ...

    @property
    def types(self) -> NodeTypes: ...

    def demand(
        self, snap: Snapshot, extra: PodShape | None, nodes: list[int] | None = None
    ) -> npt.NDArray[np.int64]: ...

    def config_of(self, pods: Iterable[PodRecord]) -> Config: ...


def apply_plan(
    fit: PlanFit, snap: Snapshot, plan: ExactPlan, extra: PodShape | None, pod: PodRecord | None
) -> list[PodRecord]:
    """Rearrange ``snap`` into ``plan`` (found by ``fit``) (plus one pod of ``extra``, as ``pod``),
    keeping every pod that may stay where it is; the pods that changed node or
    devices (not counting ``pod``)."""
    S = len(fit.shapes)
    by_node = snap.pods_by_node()
    target: dict[int, list[int]] = {}  # node -> counts it will hold
    layout: dict[int, Config] = {}
    universe = set(range(snap.n_nodes) if plan.nodes is None else plan.nodes)
    need = fit.demand(snap, extra, None if plan.nodes is None else plan.nodes)
    if plan.by_node is not None:
        for n, cfg in plan.by_node.items():
            target[n] = list(cfg.counts)
            layout[n] = cfg
    for t in range(len(fit.types.count) if plan.by_node is None else 0):
        cfgs = plan.per_type.get(t, [])
        nodes = [int(n) for n in fit.types.members[t] if int(n) in universe]
        cur = {n: fit.config_of(by_node[n]) for n in nodes}
        free = set(nodes)
        left: list[Config] = []
        exact: dict[tuple[int, ...], list[int]] = {}
        for n in nodes:
            exact.setdefault(cur[n].counts, []).append(n)
        for cfg in cfgs:
            hit = exact.get(cfg.counts)
            while hit and hit[-1] not in free:
                hit.pop()
            if hit:
                n = hit.pop()
                free.discard(n)
                target[n] = list(cfg.counts)
                layout[n] = cfg
            else:
                left.append(cfg)
        left.sort(key=lambda c: -sum(c.counts))
        for cfg in left:
            pick = sorted(free)
            if len(left) * len(pick) > 20000:
                pick = pick[:8]  # many to place: the overlap on a few nodes only
            n = max(
                pick,
                key=lambda m: sum(
                    min(a, b) for a, b in zip(cur[m].counts, cfg.counts, strict=True)
                ),
            )
            free.discard(n)
            target[n] = list(cfg.counts)
            layout[n] = cfg
        for n in free:
            target[n] = [0] * S
    for n in universe:
        target.setdefault(n, [0] * S)
    # Trim what the plan covers beyond the demand, first where pods would arrive.
    have = np.zeros(S, dtype=np.int64)
    for v in target.values():
        have += np.array(v, dtype=np.int64)
    cur_counts = {n: Counter(fit.index[p.shape] for p in by_node[n]) for n in target}
    for j in [int(x) for x in np.flatnonzero(have > need)]:
        surplus = int(have[j] - need[j])
        order = sorted(target, key=lambda n: target[n][j] <= cur_counts[n][j])
        for n in order:
            if surplus == 0:
                break
            arriving = target[n][j] - cur_counts[n][j]
            cut = min(surplus, arriving if arriving > 0 else target[n][j])
            target[n][j] -= cut
            surplus -= cut
    # Pods that stay, pods that go, slots to fill.
    moving: dict[int, list[PodRecord | None]] = {}
    changed: list[int] = []
    for n, tgt in target.items():
        cc = cur_counts[n]
        if all(tgt[j] == cc.get(j, 0) for j in range(S)):
            continue
        changed.append(n)
        seen: Counter[int] = Counter()
        for p in by_node[n]:
            j = fit.index[p.shape]
            seen[j] += 1
            if seen[j] > tgt[j]:
                moving.setdefault(j, []).append(p)
    if extra is not None:
        moving.setdefault(fit.index[extra], []).append(pod)
    before = {id(p): (p.node, p.gpus) for n in changed for p in by_node[n]}
    # Everything on a changed node comes off, then each changed node is laid out.
    for n in changed:
        for p in by_node[n]:
            snap.remove(p)
    for n in changed:
        stay: dict[int, list[PodRecord]] = {}
        seen2: Counter[int] = Counter()
        for p in by_node[n]:
            j = fit.index[p.shape]
            seen2[j] += 1
            if seen2[j] <= target[n][j]:
                stay.setdefault(j, []).append(p)
        pods_here: dict[int, list[PodRecord | None]] = {}
        for j in range(S):
            k = target[n][j]
            if not k:
                continue
            mine: list[PodRecord | None] = list(stay.get(j, []))
            while len(mine) < k:
                mine.append(moving[j].pop())
            pods_here[j] = mine
        lay_out(fit, snap, n, layout.get(n), target[n], pods_here, before)
    if any(v for v in moving.values()):
        raise RuntimeError("plan left pods without a node (a bug in the exact check)")
    verify_nodes(snap, changed, "the exact plan")
    return [p for n in changed for p in by_node[n] if (p.node, p.gpus) != before[id(p)]]


def lay_out(
    fit: PlanFit,
    snap: Snapshot,
    n: int,
    cfg: Config | None,
    counts: list[int],
    pods: dict[int, list[PodRecord | None]],
    before: Mapping[int, tuple[int, tuple[int, ...]]],
) -> None:
    """Bind ``pods`` to node ``n`` (empty of them now): the shares on the GPUs of the
    configuration's bins (each bin on the physical GPU that held most of its pods),
    the whole-GPU pods on the rest."""
    G = int(snap.gpu_total[n])
    bins: list[list[int]] = []
    if cfg is not None:
        quota = list(counts)
        for b in cfg.bins:
            keep = []
            for j in b:
                if quota[j] > 0:
                    quota[j] -= 1
                    keep.append(j)
            if keep:
                bins.append(keep)
    # Shares that the trimmed bins do not hold (none, unless counts exceed them).
    want = Counter(j for b in bins for j in b)
    for j, ps in pods.items():
        if fit.shapes[j].is_shared_gpu and len(ps) > want[j]:
            raise RuntimeError("a configuration's bins hold fewer shares than it counts")
    # Physical GPU for each bin: the one most of its staying pods are on.
    free_gpus = set(range(G))
    share_pool = {j: list(ps) for j, ps in pods.items() if fit.shapes[j].is_shared_gpu}
    placed_on: list[tuple[int, list[int]]] = []
    votes = []
    for bi, members in enumerate(bins):
        tally: Counter[int] = Counter()
        for j in members:
            for p in share_pool.get(j, []):
                if p is not None and id(p) in before and before[id(p)][0] == n:
                    tally[before[id(p)][1][0]] += 1
        for g, v in tally.items():
            votes.append((-v, bi, g))
    votes.sort()
    gpu_of: dict[int, int] = {}
    for _, bi, g in votes:
        if bi not in gpu_of and g in free_gpus:
            gpu_of[bi] = g
            free_gpus.discard(g)
    for bi in range(len(bins)):
        if bi not in gpu_of:
            g = min(free_gpus)
            gpu_of[bi] = g
            free_gpus.discard(g)
        placed_on.append((gpu_of[bi], bins[bi]))
    for g, on_gpu in placed_on:
        for j in on_gpu:
            ps = share_pool[j]
            # Prefer a pod that was on this very GPU.
            pick = next(
                (
                    i
                    for i, p in enumerate(ps)
                    if p is not None and id(p) in before and before[id(p)] == (n, (g,))
                ),
                len(ps) - 1,
            )
            p = ps.pop(pick)
            snap.place(fit.shapes[j], n, (g,), pod=p)
    for j, ps in pods.items():
        if fit.shapes[j].is_shared_gpu:
            continue
        k = int(fit.whole[j])
        for p in ps:
            gpus: tuple[int, ...] = ()
            if k:
                old = before.get(id(p)) if p is not None else None
                if old is not None and old[0] == n and set(old[1]) <= free_gpus:
                    gpus = old[1]
                else:
                    gpus = tuple(sorted(free_gpus)[:k])
                if len(gpus) < k:
                    raise RuntimeError("a configuration uses more GPUs than its node has")
                free_gpus.difference_update(gpus)
            snap.place(fit.shapes[j], n, gpus, pod=p)
