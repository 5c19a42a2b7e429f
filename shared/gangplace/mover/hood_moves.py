"""The fewest moves that let a pod fit, solved exactly on a few nodes at a time.

For a pod that fits nowhere, pick a *neighbourhood*: a few nodes, half of them the
nodes it may use that are nearest to fitting it (where the fewest evictions make room)
and half those with the most room for what the first hold (where evicted pods can
land). Then solve, as one small integer model, "the pods on the first half plus the new
pod, on the whole neighbourhood", node by node and GPU by GPU (CPU, memory and every
other resource, whole GPUs, the shares per GPU, the static filters), keeping the most
pods exactly where they are; the fewest moves on those nodes, proved so when the solver
finishes within its node limit. (``move_room`` lets the pods on the second half move too: exact for
the whole neighbourhood, and much slower on a full cluster.) A pod that changes node,
or GPU on the same node, is a move: on a cluster it has to be recreated either way.
Units move whole (every pod of a unit stays, or every pod is moved), and a unit with a
pod outside the neighbourhood stays.

Neighbourhoods of growing size are tried (2, 4, 8, 16 nodes by default), each with a
limit on the solver's branch-and-bound nodes (not on seconds: the same plan comes out
on a busy machine and a quiet one) and a cap of one move fewer than the best plan so
far; the cheapest plan is carried out, checked node by node (allocatable, every GPU,
the static filters) before it is kept. Either the pod ends up placed and every pod it
displaced placed again, or the snapshot is exactly as it was.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, milp

from gangplace.engine.feasibility import fits, static_mask
from gangplace.engine.model import PodShape
from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.snapshot import Snapshot
from gangplace.mover.lp_rows import Rows
from gangplace.mover.packing_check import verify_nodes
from gangplace.mover.search_moves import Repair, nearest_to_fitting

__all__ = [
    "DEFAULT_NODE_LIMIT",
    "DEFAULT_SIZES",
    "HoodStats",
    "fit_in_neighbourhood",
    "neighbourhood",
]

DEFAULT_SIZES = (2, 4, 8, 16)
# Branch-and-bound nodes per neighbourhood solve: a limit of work, not of wall time, so
# that a plan never depends on how busy the machine is.
DEFAULT_NODE_LIMIT = 50

UnitOf = Callable[[PodRecord], Hashable]
Movable = Callable[[PodRecord], bool]


@dataclass(slots=True)
class HoodStats:
    """What the neighbourhood solves did over a replay."""

    solves: int = 0
    found: int = 0  # solves that found a plan
    timeouts: int = 0  # solves that reached the node limit without one
    timeouts_by_size: dict[int, int] = field(default_factory=dict)
    by_size: dict[int, int] = field(default_factory=dict)  # plans carried out, per size


def neighbourhood(snap: Snapshot, shape: PodShape, k: int) -> list[int]:
    """``k`` nodes: half the nodes ``shape`` may use that are nearest to fitting it (where
    the fewest evictions make room), then the nodes with the most room for what those
    hold (the most of their pods' shapes fit there now, then the most idle GPU, then
    CPU), so that a pod moved off the first has somewhere to go. Never a node left out
    of moves (:mod:`gangplace.engine.node_checks`): nothing moves off it or onto it."""
    near = nearest_to_fitting(snap, shape, k)
    out: dict[int, None] = dict.fromkeys(near[: max(1, (k + 1) // 2)])
    if len(out) >= k:
        return list(out)[:k]
    held = {p.shape for n in out for p in snap.pods_on(n)}
    room = np.zeros(snap.n_nodes)
    for s in held:
        room += fits(snap, s)
    c = snap.res_index["cpu"]
    cpu = (snap.alloc[:, c] - snap.used[:, c]) / np.maximum(snap.alloc[:, c], 1)
    gfree = snap.gpu_free_total().astype(float) / 1000.0
    usable = snap.ready & ~snap.unschedulable
    order = np.lexsort((snap.node_rank, -cpu, -gfree, -room, ~usable))
    for n in order:
        if len(out) >= k:
            break
        if not snap.fenced[n]:  # its pods hold more than it has: no move is provable there
            out.setdefault(int(n), None)
    return list(out)


@dataclass(slots=True)
class _Plan:
    moved: int  # pods the model moves (an upper bound on what applying it moves)
    stay: set[int]  # ids of the movable pods that stay
    slots: list[tuple[int, int, int]]  # (node, shape index, gpu or -1), one per pod placed
    nodes: list[int]


class _Model:
    """The model "the movable pods on ``nodes`` plus one of ``shape``, on ``nodes``",
    keeping the most pods where they are."""

    def __init__(
        self,
        snap: Snapshot,
        shape: PodShape,
        nodes: list[int],
        unit_of: UnitOf,
        movable: Movable,
        unit_size: dict[Hashable, int] | None,
    ) -> None:
        self.snap, self.shape, self.nodes = snap, shape, nodes
        # In slot order: the same model (and answer) however the node lists its pods.
        pods = [p for n in nodes for p in _pods_on(snap, n)]
        members: dict[Hashable, list[PodRecord]] = {}
        for p in pods:
            members.setdefault(unit_of(p), []).append(p)
        self.units: list[list[PodRecord]] = []
        pinned_units: set[Hashable] = set()
        for key, ps in members.items():
            # A unit with a pod elsewhere would have to move there too: it stays.
            ok = all(movable(p) and _modelled(p.shape) for p in ps) and (
                unit_size is None or unit_size[key] == len(ps)
            )
            if ok:
                self.units.append(ps)
            else:
                pinned_units.add(key)
        self.pinned = [p for p in pods if unit_of(p) in pinned_units]
        shapes: dict[PodShape, None] = {shape: None}
        for u in self.units:
            for p in u:
                shapes[p.shape] = None
        self.shapes = list(shapes)

    def solve(self, cap: int, node_limit: int) -> _Plan | str | None:
        """The plan moving the fewest pods (at most ``cap``) found within ``node_limit``
        branch-and-bound nodes, None when none exists on these nodes, "timeout" when the
        limit came first."""
        snap = self.snap
        shapes = self.shapes
        S = len(shapes)
        vecs = np.array([snap.vector(s)[0] for s in shapes], dtype=np.int64)
        cols = [r for r in range(vecs.shape[1]) if vecs[:, r].any()]
        # Exact integer scaling: each resource divided by the gcd of the requests.
        g = np.array([math.gcd(*[int(v) for v in vecs[:, r] if v]) for r in cols], dtype=np.int64)
        vec = vecs[:, cols] // g
        whole = [s.gpu_count if s.is_gpu and s.gpu_milli >= 1000 else 0 for s in shapes]
        milli = [s.gpu_milli if s.is_shared_gpu else 0 for s in shapes]
        index = {s: j for j, s in enumerate(shapes)}

        c: list[float] = []
        ub: list[float] = []
        rows = Rows()

        def var(cost: float, upper: float) -> int:
            c.append(cost)
            ub.append(upper)
            return len(c) - 1

        stay = [var(-float(len(u)), 1.0) for u in self.units]
        unit_var: dict[int, int] = {id(p): stay[i] for i, u in enumerate(self.units) for p in u}
        demand = np.zeros(S, dtype=np.int64)
        demand[index[self.shape]] += 1
        for u in self.units:
            for p in u:
                demand[index[p.shape]] += 1
        total: list[list[tuple[int, float]]] = [[] for _ in range(S)]
        for i, u in enumerate(self.units):
            for p in u:
                total[index[p.shape]].append((stay[i], 1.0))
        slots: list[tuple[int, int, int, int]] = []  # (var, node, shape, -1): no shares
        # Per node and share size: (count var, shape) per shape, (count var, GPU) per GPU.
        shares: list[tuple[int, list[tuple[int, int]], list[tuple[int, int]]]] = []
        for n in self.nodes:
            here = _pods_on(snap, n)
            G = int(snap.gpu_total[n])
            # What the node holds beyond the modelled pods (pinned pods, unrecorded use).
            fixed = snap.used[n].copy()
            gpu_fixed = [1000 - int(snap.gpu_free[n, k]) for k in range(G)]
            for p in here:
                if id(p) in unit_var:
                    fixed -= snap.vector(p.shape)[0]
                    for k in p.gpus:
                        gpu_fixed[k] -= p.shape.gpu_milli
            room = (snap.alloc[n][cols] - fixed[cols]) // g
            ok = [
                j
                for j, s in enumerate(shapes)
                if static_mask(snap, s)[n] and (not s.is_gpu or s.gpu_count <= G)
            ]
            # New pods per shape on the node; shares also per GPU, by their size only (the
            # shapes of one size are alike to a GPU, which keeps the model small).
            new = {j: var(0.0, float(demand[j])) for j in ok}
            for j, v in new.items():
                total[j].append((v, 1.0))
                if not milli[j]:
                    slots.append((v, n, j, -1))
            for r in range(len(cols)):
                ent = [
                    (unit_var[id(p)], float(vec[index[p.shape], r]))
                    for p in here
                    if id(p) in unit_var and vec[index[p.shape], r]
                ]
                ent += [(v, float(vec[j, r])) for j, v in new.items() if vec[j, r]]
                if ent:
                    rows.add(ent, -np.inf, float(room[r]))
            if not G:
                continue
            sizes = sorted({milli[j] for j in new if milli[j]})
            y: dict[tuple[int, int], int] = {}
            for m in sizes:
                of_m = [j for j in new if milli[j] == m]
                most = float(min(sum(int(demand[j]) for j in of_m), 1000 // m))
                for k in range(G):
                    y[m, k] = var(0.0, most)
                rows.add(
                    [(y[m, k], 1.0) for k in range(G)] + [(new[j], -1.0) for j in of_m], 0.0, 0.0
                )
                shares.append((n, [(new[j], j) for j in of_m], [(y[m, k], k) for k in range(G)]))
            # w_k: GPU k is held whole (by a pod that stays or one placed).
            need_whole = any(whole[j] for j in new) or any(
                whole[index[p.shape]] for p in here if id(p) in unit_var
            )
            held = [0] * G  # whole GPUs of pinned pods
            for p in here:
                if id(p) not in unit_var and p.shape.is_gpu and p.shape.gpu_milli >= 1000:
                    for k in p.gpus:
                        held[k] = 1
            w = [var(0.0, 1.0) if need_whole and not held[k] else -1 for k in range(G)]
            load: list[list[tuple[int, float]]] = []
            for k in range(G):
                ent = [
                    (unit_var[id(p)], float(p.shape.gpu_milli))
                    for p in here
                    if id(p) in unit_var and p.shape.is_shared_gpu and p.gpus == (k,)
                ]
                ent += [(y[m, k], float(m)) for m in sizes]
                if w[k] >= 0:
                    ent.append((w[k], 1000.0))
                load.append(ent)
                if ent:
                    rows.add(ent, -np.inf, float(1000 - gpu_fixed[k]))
                for p in here:
                    if (
                        id(p) in unit_var
                        and p.shape.is_gpu
                        and p.shape.gpu_milli >= 1000
                        and k in p.gpus
                    ):
                        if w[k] < 0:
                            raise RuntimeError("a whole GPU held twice")
                        rows.add([(w[k], 1.0), (unit_var[id(p)], -1.0)], 0.0, np.inf)
            if need_whole:
                ent = [(w[k], 1.0) for k in range(G) if w[k] >= 0]
                ent += [
                    (unit_var[id(p)], -float(p.shape.gpu_count))
                    for p in here
                    if id(p) in unit_var and p.shape.is_gpu and p.shape.gpu_milli >= 1000
                ]
                ent += [(v, -float(whole[j])) for j, v in new.items() if whole[j]]
                rows.add(ent, 0.0, np.inf)
            # GPUs alike (the same fixed use, no modelled pod on them): the fuller first.
            modelled_on = {k for p in here if id(p) in unit_var for k in p.gpus}
            alike: dict[int, list[int]] = {}
            for k in range(G):
                if k not in modelled_on and not held[k]:
                    alike.setdefault(gpu_fixed[k], []).append(k)
            for ks in alike.values():
                for k1, k2 in itertools.pairwise(ks):
                    if load[k1] or load[k2]:
                        rows.add(load[k1] + [(v, -a) for v, a in load[k2]], 0.0, np.inf)
        for j in range(S):
            if not total[j]:
                return None
            rows.add(total[j], float(demand[j]), float(demand[j]))
        movable_pods = sum(len(u) for u in self.units)
        if movable_pods:
            rows.add(
                [(stay[i], float(len(u))) for i, u in enumerate(self.units)],
                float(movable_pods - cap),
                np.inf,
            )
        elif cap < 0:
            return None
        nv = len(c)
        res = milp(
            np.array(c),
            constraints=rows.constraint(nv),
            integrality=np.ones(nv),
            bounds=Bounds(np.zeros(nv), np.array(ub)),
            # No presolve: when a solution found on the presolved model needs solving
            # again on the original, HiGHS prints a line to stdout, which would land in
            # a plan's JSON; these models are small, and without it as fast.
            options={"node_limit": node_limit, "mip_rel_gap": 0.0, "presolve": False},
        )
        if res.status == 2:
            return None
        if res.x is None:
            return "timeout"
        x = np.round(res.x).astype(np.int64)
        stays = {id(p) for i, u in enumerate(self.units) if x[stay[i]] for p in u}
        out = [(n, j, k) for v, n, j, k in slots for _ in range(int(x[v]))]
        for n, of_shape, of_gpu in shares:
            js = [j for v, j in of_shape for _ in range(int(x[v]))]
            ks = [k for v, k in of_gpu for _ in range(int(x[v]))]
            out += [(n, j, k) for j, k in zip(js, ks, strict=True)]
        return _Plan(
            movable_pods - sum(len(u) for i, u in enumerate(self.units) if x[stay[i]]),
            stays,
            out,
            self.nodes,
        )


def _pods_on(snap: Snapshot, n: int) -> list[PodRecord]:
    return sorted(snap.pods_on(n), key=lambda p: p.slot)


def _modelled(shape: PodShape) -> bool:
    """Shapes the model lays out: no GPU, whole GPUs, or a share of one GPU."""
    return not shape.is_shared_gpu or shape.gpu_count == 1


def _carry_out(
    snap: Snapshot, model: _Model, plan: _Plan, pod: PodRecord | None
) -> list[PodRecord]:
    """Apply ``plan`` (the caller has forked): the pods that changed node or GPU."""
    shapes = model.shapes
    going = [p for u in model.units for p in u if id(p) not in plan.stay]
    before = {id(p): (p.node, p.gpus) for p in going}
    for p in going:
        snap.remove(p)
    pool: dict[int, list[PodRecord | None]] = {}
    for p in going:
        pool.setdefault(shapes.index(p.shape), []).append(p)
    # The new pod is placed last: a pod back on its own node and GPU is no move.
    pool.setdefault(shapes.index(model.shape), []).append(pod)
    # Slots first matched to the pods that were there already (a pod put back where it
    # was is no move), then the moved pods, the new pod last.
    fill: list[tuple[int, int, int, PodRecord | None]] = []
    rest: list[tuple[int, int, int]] = []
    for n, j, k in sorted(plan.slots, key=lambda t: t[2] < 0):
        ps = pool[j]
        hit = next(
            (
                i
                for i, q in enumerate(ps)
                if q is not None
                and id(q) in before
                and before[id(q)][0] == n
                and (k < 0 or before[id(q)][1] == (k,))
            ),
            None,
        )
        if hit is None:
            rest.append((n, j, k))
        else:
            fill.append((n, j, k, ps.pop(hit)))
    for n, j, k in rest:
        ps = pool[j]
        i = next((i for i, q in enumerate(ps) if q is not None and id(q) in before), len(ps) - 1)
        fill.append((n, j, k, ps.pop(i)))
    # Shares first (they are on the GPUs the plan says), then whole GPUs on what is free.
    for n, j, k, q in sorted(fill, key=lambda t: t[2] < 0):
        s = shapes[j]
        gpus: tuple[int, ...] = (k,) if k >= 0 else ()
        if k < 0 and s.is_gpu:
            free = [g for g in range(int(snap.gpu_total[n])) if snap.gpu_free[n, g] >= 1000]
            old = before.get(id(q)) if q is not None else None
            if old is not None and old[0] == n and set(old[1]) <= set(free):
                gpus = old[1]
            else:
                gpus = tuple(free[: s.gpu_count])
            if len(gpus) != s.gpu_count:
                raise RuntimeError("a move plan uses more whole GPUs than its node has free")
        snap.place(s, n, gpus, pod=q)
    if any(pool.values()):
        raise RuntimeError("a move plan left pods without a node")

    def placed(q: PodRecord) -> bool:  # the new pod, and those the plan moved
        return q is pod or (id(q) in before and before[id(q)] != (q.node, q.gpus))

    verify_nodes(snap, plan.nodes, "a move plan", placed)
    return [p for p in going if (p.node, p.gpus) != before[id(p)]]


def fit_in_neighbourhood(
    snap: Snapshot,
    shape: PodShape,
    pod: PodRecord | None = None,
    *,
    max_pods: int = 8,
    sizes: Sequence[int] = DEFAULT_SIZES,
    node_limit: int = DEFAULT_NODE_LIMIT,
    unit_of: UnitOf | None = None,
    movable: Movable | None = None,
    move_room: bool = False,
    stats: HoodStats | None = None,
) -> Repair | None:
    """Place one pod of ``shape`` (as ``pod``) by moving at most ``max_pods`` pods, the
    fewest found over neighbourhoods of ``sizes`` nodes (``node_limit`` branch-and-bound
    nodes each);
    None, with the snapshot unchanged, when none is found. ``unit_of`` groups pods that
    move together (default: each pod alone); pods ``movable`` rejects stay. Only the pods
    on the half of a neighbourhood nearest to fitting may move, unless ``move_room``:
    then any pod on it may (exact on those nodes, and much slower on a full cluster)."""
    unit: UnitOf = unit_of or id
    ok: Movable = movable or (lambda p: True)
    sizes_of: dict[Hashable, int] | None = None
    if unit_of is not None:
        sizes_of = {}
        for q in snap.pods:
            if q.node >= 0:
                key = unit_of(q)
                sizes_of[key] = sizes_of.get(key, 0) + 1
    st = stats if stats is not None else HoodStats()
    if not _modelled(shape) or max_pods < 0:
        return None
    best: tuple[_Model, _Plan] | None = None
    seen: set[tuple[int, ...]] = set()
    for k in sorted(set(sizes)):
        nodes = neighbourhood(snap, shape, k)
        key = tuple(sorted(nodes))
        if not nodes or key in seen:
            continue
        seen.add(key)
        cap = max_pods if best is None else best[1].moved - 1
        if cap < 0:
            break
        may = ok
        if not move_room:
            near = set(nodes[: max(1, (k + 1) // 2)])

            def may(p: PodRecord, near: set[int] = near) -> bool:
                return p.node in near and ok(p)

        model = _Model(snap, shape, nodes, unit, may, sizes_of)
        got = model.solve(cap, node_limit)
        st.solves += 1
        if got == "timeout":
            st.timeouts += 1
            st.timeouts_by_size[k] = st.timeouts_by_size.get(k, 0) + 1
        elif isinstance(got, _Plan):
            st.found += 1
            best = (model, got)
            if got.moved <= 1:
                break
        if len(nodes) < k:
            break  # the whole cluster was in this one
    if best is None:
        return None
    model, plan = best
    token = snap.fork()
    try:
        moved = _carry_out(snap, model, plan, pod)
    except Exception:
        snap.revert(token)
        raise
    snap.commit(token)
    st.by_size[len(plan.nodes)] = st.by_size.get(len(plan.nodes), 0) + 1
    return Repair(moved=moved, nodes_tried=len(seen))
