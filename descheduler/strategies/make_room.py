"""Make room for waiting gangs: move the cheapest gangs whose departure lets a waiting
gang start, each of them proven by the engine to fit again elsewhere.

For each waiting gang, in DRF order, on the snapshot as the plan has left it:

1. If it fits now, it is placed (the scheduler will start it) and needs no move.
2. A vectorised shortlist: how many of its largest members each node could take now,
   and with every movable pod gone (the engine's ``member_capacity`` on a what-if of
   the arrays). Nodes that could gain are ranked by an estimate of what freeing them
   costs, and the best few are examined exactly.
3. Per node, exactly: movable units on the node are removed one by one in the snapshot
   (useful ones first -- those holding a resource the member is short of -- then queues
   above their deserved share, then cheapest), until the node takes as many more
   members as wanted; units not needed are pruned.
4. Node options are taken cheapest per gained member first until the gang fits: the
   victims are removed, the gang is placed and every victim is placed again, all with
   the engine. A victim that fits nowhere is dropped for good. Victims that are not
   needed are pruned, and the move is kept.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, overload

import numpy as np
import numpy.typing as npt
from gangplace.engine import PodRecord, PodShape, place_gang
from gangplace.engine.feasibility import member_capacity
from gangplace.engine.timeparse import format_duration, format_time

from ..gang_demand import Demand
from ..gang_views import GangView
from ..plan_context import TIER_PENALTY, PlanContext, Victim, move_way
from ..plan_model import Move, PodMove, Unserved
from ..what_if import Trial, freed, remove_pods, try_move

__all__ = ["ROOM_TAKEN", "Candidates", "make_room"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_MAX_TRIALS = 24
# How the reason of a waiting gang whose room went to other pods begins.
ROOM_TAKEN = "room was made for it"
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


def _driver(d: Demand) -> tuple[PodShape, int]:
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


def _shortlist(
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


def _capacity(ctx: PlanContext, shape: PodShape, node: int) -> int:
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


def _node_option(
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
    cap0 = _capacity(ctx, shape, node)
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
            c = _capacity(ctx, shape, node)
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
            enough = _capacity(ctx, shape, node) - cap0 >= slots
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


@overload
def _merge(
    ctx: PlanContext, chosen: dict[str, Victim], more: Sequence[Victim], check: Literal[False]
) -> dict[str, Victim]: ...


@overload
def _merge(
    ctx: PlanContext, chosen: dict[str, Victim], more: Sequence[Victim], check: bool = True
) -> dict[str, Victim] | None: ...


def _merge(
    ctx: PlanContext, chosen: dict[str, Victim], more: Sequence[Victim], check: bool = True
) -> dict[str, Victim] | None:
    """``chosen`` with ``more`` added: extras of one gang found on several nodes are
    joined, and become the whole gang when they outnumber its extras. None when the
    union breaks a limit or a disruption budget."""
    out = dict(chosen)
    for v in more:
        cur = out.get(v.view.key)
        if cur is None:
            out[v.view.key] = v
        elif cur.partial and v.partial:
            pods = {id(p): p for p in (*cur.pods, *v.pods)}
            if len(pods) > v.view.extras:
                out[v.view.key] = ctx.victim(v.view)
            else:
                out[v.view.key] = ctx.victim(v.view, sorted(pods.values(), key=lambda p: p.name))
        elif cur.partial:
            out[v.view.key] = v
    if not check:
        return out
    budget = ctx.budget
    saved = budget.snapshot()
    try:
        for v in out.values():
            if v.way.method is None or budget.refusal(v.pods, v.view.queue) is not None:
                return None
            budget.take(v.pods, v.view.queue)
    finally:
        budget.restore(saved)
    return out


def _search(
    ctx: PlanContext,
    d: Demand,
    options: Sequence[NodeOption],
    deficit: int,
    remake: Callable[[int, set[str]], NodeOption | None],
) -> tuple[list[Victim] | None, str]:
    """Victims that let ``d`` start, every one of them placed again; or why none.

    Node options are taken best first: victims that look like they have room
    elsewhere, then queues above their share, then cost per member of room. Once they
    add up to the room needed, the engine tries the move. A victim that would fit
    nowhere else is ruled out for this gang, and the options that counted on it are
    worked out again without it."""
    limit = ctx.config.make_room.max_victims_per_gang
    rank = ctx.snap.node_rank

    def key(o: NodeOption) -> tuple[bool, int, float, int]:
        # room beyond what is missing is worth nothing to this gang
        return (not o.viable, o.tier, o.cost / min(o.slots, deficit), int(rank[o.node]))

    heap = [(key(o), o.node, o) for o in options]
    heapq.heapify(heap)
    excluded: set[str] = set()
    taken: list[NodeOption] = []
    chosen: dict[str, Victim] = {}
    trials = 0
    why = "no set of movable gangs on the examined nodes makes room"
    while heap and trials < _MAX_TRIALS:
        _, node, opt = heapq.heappop(heap)
        if any(v.view.key in excluded for v in opt.victims):
            again = remake(node, excluded)
            if again is not None:
                heapq.heappush(heap, (key(again), node, again))
            continue
        merged = _merge(ctx, chosen, opt.victims)
        if merged is None:
            why = "the eviction limits or disruption budgets stop the moves it would need"
            continue
        if len(merged) > limit:
            why = f"it would need more than {limit} victim gangs (max_victims_per_gang)"
            continue
        taken.append(opt)
        chosen = merged
        while sum(o.slots for o in taken) >= deficit and trials < _MAX_TRIALS:
            trials += 1
            trial, bad, reason = try_move(ctx, list(chosen.values()), d)
            if trial is not None:
                trial.drop()
                return list(chosen.values()), ""
            if bad is None:
                why = reason
                break
            why = f"the gangs that could make room would not fit again elsewhere ({reason})"
            excluded.add(bad.view.key)
            for o in taken:
                if any(v.view.key == bad.view.key for v in o.victims):
                    again = remake(o.node, excluded)
                    if again is not None:
                        heapq.heappush(heap, (key(again), o.node, again))
            taken = [o for o in taken if all(v.view.key != bad.view.key for v in o.victims)]
            chosen = {}
            for o in taken:  # a subset of what was admitted: within every limit
                chosen = _merge(ctx, chosen, o.victims, check=False)
    return None, why


def _prune(ctx: PlanContext, d: Demand, victims: list[Victim]) -> tuple[Trial, list[Victim]]:
    """Drop victims the move does not need (costliest first); returns the open trial of
    what is left, and what is left."""
    for v in sorted(victims, key=lambda v: (-v.cost, v.view.key)):
        if len(victims) == 1:
            break
        rest = [x for x in victims if x is not v]
        trial, _, _ = try_move(ctx, rest, d)
        if trial is not None:
            trial.drop()
            victims = rest
    trial, _, why = try_move(ctx, victims, d)
    if trial is None:  # the engine is deterministic: the same move cannot fail now
        raise RuntimeError(f"a move that fitted no longer fits: {why}")
    return trial, victims


def _moves(ctx: PlanContext, d: Demand, victims: Sequence[Victim], trial: Trial) -> list[Move]:
    out = []
    for v in sorted(victims, key=lambda v: (v.cost, v.view.key)):
        pg = v.view.podgroup
        pods = [
            PodMove(
                p.namespace,
                p.name,
                p.uid,
                p.node_name,
                trial.targets[id(p)][0],
                p.shape.gpu_demand_milli,
                trial.targets[id(p)][1],
            )
            for p in v.pods
        ]
        what = "members above minAvailable of " if v.partial else "whole " if v.view.is_gang else ""
        out.append(
            Move(
                kind="make-room",
                unit=v.view.key,
                namespace=v.view.namespace,
                gang=v.view.gang_name,
                queue=v.view.queue,
                pods=pods,
                partial=v.partial,
                cost=v.cost,
                reason=f"moves {what}{v.view.describe()} to make room for waiting gang "
                f"{d.key} ({d.describe()})",
                for_gang=d.key,
                podgroup=pg.name if pg is not None else None,
                podgroup_api=pg.api_group if pg is not None else None,
                **move_way(v),
            )
        )
    return out


def _room_for(ctx: PlanContext, cand: Candidates, d: Demand) -> list[Move] | str:
    snap = ctx.snap
    shape, need = _driver(d)
    cap_now = member_capacity(snap, shape)
    hosts = np.flatnonzero(cap_now > 0)
    room = Room(cand, hosts if int(cap_now.sum()) <= need else np.zeros(0, dtype=np.int64))
    arrays = cand.arrays(room.stuck)
    with freed(snap, arrays["used"], arrays["gpu"]):  # type: ignore[arg-type]
        cap_pot = member_capacity(snap, shape)
    if int(cap_pot.sum()) < need:
        return (
            f"moving every movable pod would leave room for {int(cap_pot.sum())} of the "
            f"{need} pods of {shape.describe()} it needs"
        )
    gain = cap_pot - cap_now
    nodes = np.flatnonzero(gain > 0)
    if nodes.size == 0:
        return "moving pods frees no node it could use"
    deficit = max(1, need - int(cap_now.sum()))
    shortlist = _shortlist(ctx, arrays, shape, nodes, ctx.config.make_room.candidate_nodes)
    refused: list[str] = []

    def option(n: int, excluded: set[str]) -> NodeOption | None:
        pods_here = [p for p in cand.by_node.get(n, ()) if ctx.movable(ctx.view_of(p))]
        if not pods_here:
            return None
        target = min(deficit, int(gain[n]))
        return _node_option(ctx, room, pods_here, n, shape, target, excluded, d, refused)

    # Exact options are worked out a batch at a time, best estimates first: most
    # gangs find room in the first batch.
    options: list[NodeOption] = []
    why = "no set of movable gangs on the examined nodes makes room"
    for lo, hi in _batches(shortlist.size):
        options += [o for o in (option(n, set()) for n in shortlist[lo:hi].tolist()) if o]
        victims, why = _search(ctx, d, options, deficit, option)
        if victims is not None:
            break
    else:
        if not options and refused:
            return f"no gang it needs may be moved for it: {refused[0]}"
        return why
    trial, victims = _prune(ctx, d, victims)
    moves = _moves(ctx, d, victims, trial)
    trial.keep()
    for v in victims:
        ctx.budget.take(v.pods, v.view.queue)
        ctx.moved.add(v.view.key)
        cand.retire(v.view)
    return moves


def _batches(n: int, first: int = 8) -> list[tuple[int, int]]:
    """[0, 8), [8, 24), [24, 56)... up to n."""
    out, lo, size = [], 0, first
    while lo < n:
        out.append((lo, min(n, lo + size)))
        lo, size = lo + size, size * 2
    return out


def _room_taken(ctx: PlanContext, d: Demand) -> str | None:
    """Room was made for ``d`` within the cool-down and it still cannot start: the
    scheduler gave the room to other pods (the victims' replacements, or others). Moving
    more gangs for it would likely go the same way, so it waits out the cool-down."""
    made = d.view.room_made
    cooldown = ctx.config.eviction.cooldown
    if made is None or cooldown <= 0:
        return None
    since = (ctx.now - made).total_seconds()
    if since >= cooldown:
        return None
    return (
        f"{ROOM_TAKEN} {format_duration(max(since, 0))} ago "
        f"({format_time(made)}) and it still cannot start: the scheduler gave the room to "
        f"other pods; no more gangs are moved for it until the cool-down "
        f"({format_duration(cooldown)}) ends"
    )


def make_room(ctx: PlanContext) -> list[Move]:
    """Moves that let the waiting gangs that cannot start now (``ctx.blocked()``, in DRF
    order) start; the snapshot is left with the moves made and the gangs that start
    placed. Unserved gangs go to ``ctx.unserved``."""
    demands = ctx.blocked()
    if not demands:
        return []
    snap = ctx.snap
    cand = Candidates(ctx)
    moves: list[Move] = []
    limit = ctx.config.make_room.max_waiting_gangs
    for i, d in enumerate(demands):
        if place_gang(snap, d.gang, ctx.scorer, ctx.options).ok:
            continue  # it starts as things are (placed: later gangs see it)
        if not ctx.config.make_room.enabled:
            ctx.unserved.append(Unserved(d.key, "make_room is disabled"))
            continue
        if i >= limit:
            ctx.unserved.append(
                Unserved(d.key, f"beyond the first {limit} waiting gangs (max_waiting_gangs)")
            )
            continue
        if ctx.budget.exhausted():
            ctx.unserved.append(Unserved(d.key, "the eviction limit of this run is reached"))
            continue
        never = next((p for p in d.view.pods if p.preemption_policy == "Never"), None)
        if never is not None:
            ctx.unserved.append(
                Unserved(
                    d.key,
                    f"pod {never.key} says preemptionPolicy: Never: no gang is moved for it",
                )
            )
            continue
        taken = _room_taken(ctx, d)
        if taken is not None:
            ctx.unserved.append(Unserved(d.key, taken))
            continue
        found = _room_for(ctx, cand, d)
        if isinstance(found, str):
            ctx.unserved.append(Unserved(d.key, found))
            continue
        moves.extend(found)  # the kept trial placed the gang too
    return moves
