"""Where room for a waiting gang could be made: the movable pods (:class:`Candidates`),
a vectorised shortlist of nodes worth examining, and per node, exactly, the units whose
departure would let it take the gang's members (:class:`NodeOption`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from gangplace.engine import PodRecord, PodShape
from gangplace.engine.feasibility import member_capacity

from descheduler.planning.context import TIER_PENALTY, PlanContext, Victim
from descheduler.planning.gang_demand import Demand
from descheduler.planning.gang_views import GangView
from descheduler.planning.what_if import remove_pods

__all__ = [
    "Candidates",
    "FloatArray",
    "IntArray",
    "NodeOption",
    "Room",
    "capacity",
    "driver",
    "node_option",
    "shortlist",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# Added to the estimated cost of a pod that has no room elsewhere (shortlist only).
STUCK_PENALTY = 1e6


class Candidates:
    """The movable pods: by node for exact work, and as arrays for the shortlist."""

    def __init__(self, ctx: PlanContext) -> None:
        snap = ctx.snap
        self.ctx = ctx
        self.views: list[GangView] = [v for v in ctx.views.values() if ctx.movable(v) and v.placed]
        self.index = {v.key: i for i, v in enumerate(self.views)}
        pods: list[PodRecord] = []
        units: list[int] = []
        for i, v in enumerate(self.views):
            pods.extend(v.placed)
            units.extend([i] * len(v.placed))
        self.by_node: dict[int, list[PodRecord]] = {}
        for p in pods:
            self.by_node.setdefault(p.node, []).append(p)
        n = len(pods)
        self.pod_node = np.fromiter((p.node for p in pods), dtype=np.int64, count=n)
        self.pos = {id(p): i for i, p in enumerate(pods)}
        self.pod_unit = np.array(units, dtype=np.int64)
        rows: dict[PodShape, int] = {}
        shape_idx = np.fromiter(
            (rows.setdefault(p.shape, len(rows)) for p in pods), dtype=np.int64, count=n
        )
        mat = (
            np.stack([snap.vector(s)[0] for s in rows])
            if rows
            else np.zeros((0, len(snap.resources)), dtype=np.int64)
        )
        self.pod_vec = mat[shape_idx] if n else np.zeros((0, len(snap.resources)), np.int64)
        self.pod_shape = shape_idx
        shapes = list(rows)
        res = snap.res_index
        self.shape_cpu = mat[:, res["cpu"]] if rows else np.zeros(0, dtype=np.int64)
        self.shape_mem = mat[:, res["memory"]] if rows else np.zeros(0, dtype=np.int64)
        self.shape_k = np.array([s.gpu_count if s.is_gpu else 0 for s in shapes], dtype=np.int64)
        self.shape_d = np.array([s.gpu_milli if s.is_gpu else 0 for s in shapes], dtype=np.int64)
        self.pod_cost = np.fromiter(
            (
                ctx.pod_cost(p) + (0.0 if ctx.tier(self.views[u]) == 0 else TIER_PENALTY)
                for p, u in zip(pods, units, strict=True)
            ),
            dtype=np.float64,
            count=n,
        )
        self.pod_gpu = np.fromiter(
            (p.shape.gpu_demand_milli for p in pods), dtype=np.int64, count=n
        )
        dev = [(i, p.node, g, p.shape.gpu_milli) for i, p in enumerate(pods) for g in p.gpus]
        self.dev = np.array(dev, dtype=np.int64).reshape(-1, 4)
        self.alive = np.ones(len(self.views), dtype=bool)

    def retire(self, view: GangView) -> None:
        i = self.index.get(view.key)
        if i is not None:
            self.alive[i] = False

    def stuck(self, reserved: IntArray | None = None) -> npt.NDArray[np.bool_]:
        """Per movable pod: no other node (nor one of ``reserved``) has room for it now
        -- CPU, memory and GPUs only: a guess for ordering; the engine decides."""
        snap = self.ctx.snap
        res = snap.res_index
        free = snap.alloc - snap.used
        cpu, mem = free[:, res["cpu"]], free[:, res["memory"]]
        g = snap.gpu_free
        full = (g >= 1000).sum(axis=1)
        widest = g.max(axis=1)
        usable = snap.ready & ~snap.unschedulable
        if reserved is not None and reserved.size:
            usable = usable.copy()
            usable[reserved] = False
        n_shapes = self.shape_cpu.size
        count = np.zeros(n_shapes, dtype=np.int64)
        own = np.zeros(self.pod_node.size, dtype=bool)
        for lo in range(0, n_shapes, 256):
            hi = min(lo + 256, n_shapes)
            k, d = self.shape_k[lo:hi, None], self.shape_d[lo:hi, None]
            gpu_ok = np.where(
                d >= 1000, full[None, :] >= k, np.where(d > 0, widest[None, :] >= d, True)
            )
            ok = (
                (cpu[None, :] >= self.shape_cpu[lo:hi, None])
                & (mem[None, :] >= self.shape_mem[lo:hi, None])
                & gpu_ok
                & usable[None, :]
            )
            count[lo:hi] = ok.sum(axis=1)
            sel = (self.pod_shape >= lo) & (self.pod_shape < hi)
            own[sel] = ok[self.pod_shape[sel] - lo, self.pod_node[sel]]
        out: npt.NDArray[np.bool_] = count[self.pod_shape] - own < 1
        return out

    def arrays(self, stuck: npt.NDArray[np.bool_]) -> dict[str, npt.NDArray[np.int64] | FloatArray]:
        """Per node: what every live movable pod holds, how many there are, their cost
        (pods with no room elsewhere count as very costly: the shortlist avoids them)."""
        snap = self.ctx.snap
        n_nodes, n_res = snap.used.shape
        m = self.alive[self.pod_unit] if self.pod_unit.size else np.zeros(0, dtype=bool)
        nodes = self.pod_node[m]
        used = np.zeros((n_nodes, n_res), dtype=np.int64)
        vec = self.pod_vec[m]
        for j in range(n_res):
            if vec.size and vec[:, j].any():
                used[:, j] = np.bincount(nodes, weights=vec[:, j], minlength=n_nodes).astype(
                    np.int64
                )
        gpu = np.zeros_like(snap.gpu_free)
        if self.dev.size:
            dm = m[self.dev[:, 0]]
            d = self.dev[dm]
            np.add.at(gpu, (d[:, 1], d[:, 2]), d[:, 3])
        return {
            "used": used,
            "gpu": gpu,
            "count": np.bincount(nodes, minlength=n_nodes).astype(np.int64),
            "cost": np.bincount(
                nodes,
                weights=self.pod_cost[m] + STUCK_PENALTY * stuck[m],
                minlength=n_nodes,
            ),
            "gpu_total": np.bincount(nodes, weights=self.pod_gpu[m], minlength=n_nodes),
        }


@dataclass(frozen=True, slots=True)
class NodeOption:
    node: int
    slots: int
    victims: tuple[Victim, ...]
    cost: float
    tier: int
    viable: bool  # every victim has room elsewhere now (a guess; the engine decides)


def driver(d: Demand) -> tuple[PodShape, int]:
    """The largest role still needed, and how many of it."""
    want = d.gang.required_per_role()
    best = max(
        (i for i in range(len(want)) if want[i] > 0),
        key=lambda i: (
            d.gang.roles[i].shape.gpu_demand_milli,
            d.gang.roles[i].shape.request("cpu"),
            d.gang.roles[i].shape.request("memory"),
            -i,
        ),
    )
    return d.gang.roles[best].shape, want[best]


def shortlist(
    ctx: PlanContext,
    arrays: dict[str, npt.NDArray[np.int64] | FloatArray],
    shape: PodShape,
    nodes: IntArray,
    k: int,
) -> IntArray:
    """The ``k`` nodes where room for one more member looks cheapest: the share of
    the node's movable load that must go, times the cost of that load."""
    snap = ctx.snap
    vec, _ = snap.vector(shape)
    cols = np.flatnonzero(vec)
    frac = np.zeros(nodes.size)
    if cols.size:
        free = snap.alloc[nodes][:, cols] - snap.used[nodes][:, cols]
        short = np.maximum(vec[cols] - free, 0).astype(np.float64)
        load = np.maximum(arrays["used"][nodes][:, cols], 1).astype(np.float64)
        frac = (short / load).max(axis=1)
    if shape.is_gpu:
        ok = (snap.gpu_free[nodes] >= shape.gpu_milli).sum(axis=1)
        short_g = np.maximum(shape.gpu_count - ok, 0) * shape.gpu_milli
        frac = np.maximum(frac, short_g / np.maximum(arrays["gpu_total"][nodes], 1))
    frac = np.clip(frac, 0.0, 1.0)
    count = arrays["count"][nodes].astype(np.float64)
    est_pods = np.maximum(np.ceil(frac * count), 1.0)
    est = est_pods * arrays["cost"][nodes] / np.maximum(count, 1.0)
    order = np.lexsort((snap.node_rank[nodes], est))
    out: IntArray = nodes[order[:k]]
    return out


def _unit_options(ctx: PlanContext, pods_here: Sequence[PodRecord], node: int) -> list[Victim]:
    """Units with pods on ``node``: the extras above minAvailable found there (if any),
    then the whole unit."""
    here: dict[str, list[PodRecord]] = {}
    for p in pods_here:
        here.setdefault(ctx.view_of(p).key, []).append(p)
    out: list[Victim] = []
    for key, ps in here.items():
        view = ctx.views[key]
        if view.is_gang and view.extras > 0 and len(view.placed) > 1:
            cheapest = sorted(ps, key=lambda p: (ctx.pod_cost(p), p.name))[: view.extras]
            out.append(ctx.victim(view, cheapest))
        out.append(ctx.victim(view))
    return out


def capacity(ctx: PlanContext, shape: PodShape, node: int) -> int:
    return int(member_capacity(ctx.snap, shape, np.array([node]))[0])


class Room:
    """Whether a victim's pods have room on other nodes now -- those the waiting gang
    will take aside. A victim without is tried last (it may still fit once the gang is
    placed, so it is not ruled out: the engine decides)."""

    def __init__(self, cand: Candidates, reserved: IntArray) -> None:
        self.stuck = cand.stuck(reserved)
        self.pos = cand.pos

    def viable(self, v: Victim) -> bool:
        return not any(self.stuck[self.pos[id(p)]] for p in v.pods)


def node_option(
    ctx: PlanContext,
    room: Room,
    pods_here: Sequence[PodRecord],
    node: int,
    shape: PodShape,
    target: int,
    excluded: set[str],
    d: Demand,
    refused: list[str] | None = None,
) -> NodeOption | None:
    snap = ctx.snap
    cap0 = capacity(ctx, shape, node)
    vec, _ = snap.vector(shape)
    free = snap.alloc[node] - snap.used[node]
    short = vec > free
    gpu_short = shape.is_gpu and int((snap.gpu_free[node] >= shape.gpu_milli).sum()) < (
        shape.gpu_count
    )

    def useful(v: Victim) -> bool:
        for p in v.pods:
            if p.node != node:
                continue
            if gpu_short and p.shape.is_gpu:
                return True
            if (snap.vector(p.shape)[0][short] > 0).any():
                return True
        return False

    options = []
    for v in _unit_options(ctx, pods_here, node):
        if v.view.key in excluded:
            continue
        no = ctx.may_move_for(v.view, d) or ctx.victim_refusal(v)
        if no is not None:
            if refused is not None:
                refused.append(no)
            continue
        options.append(v)
    options.sort(
        key=lambda v: (not useful(v), not room.viable(v), v.tier, v.cost, v.view.key, v.partial)
    )
    removed: dict[str, Victim] = {}
    best = cap0
    reached: tuple[int, tuple[Victim, ...]] | None = None
    with snap.what_if():
        for v in options:
            cur = removed.get(v.view.key)
            if cur is not None and not (cur.partial and not v.partial):
                continue
            remove_pods(snap, v.pods)
            removed[v.view.key] = v
            c = capacity(ctx, shape, node)
            if c > best:
                best = c
                reached = (c - cap0, tuple(removed.values()))
            if best - cap0 >= target:
                break
    if reached is None:
        return None
    slots, victims = reached
    for v in sorted(victims, key=lambda v: (-v.cost, v.view.key)):
        if len(victims) == 1:
            break
        rest = tuple(x for x in victims if x is not v)
        with snap.what_if():
            for x in rest:
                remove_pods(snap, x.pods)
            enough = capacity(ctx, shape, node) - cap0 >= slots
        if enough:
            victims = rest
    return NodeOption(
        node,
        slots,
        victims,
        sum(v.cost for v in victims),
        max(v.tier for v in victims),
        all(room.viable(v) for v in victims),
    )
