"""Defragment when no gang is waiting: move small units so that the cluster suits its
typical workload better.

What a move is worth is measured per node as FGD's fragmentation F_n(M) (idle GPU the
typical shapes cannot use, weighed by their frequency; Weng et al., ATC '23) plus
``stranding_weight`` x S_n, the idle GPU beyond what the node's free CPU can drive at
the workload's CPU-per-GPU ratio (GPUs stranded for want of CPU: on big GPU nodes CPU
runs out first, and F_n(M) sees that only shape by shape). With ``stranding_weight`` 0
it is F(M) alone. The gain of a move is the fall of this measure on the nodes it
touches, in GPUs.

Candidates are small movable units with a GPU share, and CPU-only units when stranding
counts (moving a CPU-only pod off a GPU node whose CPU it exhausts frees GPUs), and
single members above minAvailable of gangs of any size (the gang keeps running; a
gang gives up at most its extras, and never both a member and itself whole). Every
candidate's gain is first estimated at once, with numpy: the fall on its node when it
leaves, plus the best fall a pod of its shape could bring anywhere else. The
``max_candidates`` best estimates are then tried with the engine -- removed and placed
again by the scheduler's scoring, exactly as the scheduler would after the eviction --
and ranked by gain per unit of cost (units of queues above their deserved share first,
as when making room); best first, each is tried again on the snapshot as
earlier moves left it and kept when it still gains at least ``min_gain_gpus``. If all
kept moves together gain less than ``min_total_gain_gpus``, none is kept: small gains
are not worth restarting pods.

Then the typical GPU shapes that still fit nowhere get room from the exact
neighbourhood moves (:mod:`~descheduler.planning.strategies.exact_moves.exact_moves`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from gangplace.engine import PodShape, Snapshot
from gangplace.engine.fragmentation import TargetWorkload, frag_amount, table_for
from gangplace.engine.policies.corral import cpu_per_gpu_milli, cpu_stranded

from descheduler.planning.context import PlanContext, Victim, victim_move
from descheduler.planning.plan_model import Move
from descheduler.planning.strategies.exact_moves.exact_moves import exact_defragment
from descheduler.planning.what_if import try_move

__all__ = ["Measure", "defragment"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

Targets = dict[int, tuple[str, tuple[int, ...]]]


class Measure:
    """F_n(M) + weight x S_n per node, in thousandths of a GPU, on raw node states."""

    def __init__(self, snap: Snapshot, workload: TargetWorkload, stranding_weight: float) -> None:
        self.snap = snap
        self.table = table_for(snap, workload)
        self.weight = stranding_weight
        self.rho = cpu_per_gpu_milli(workload)
        self.cpu_j = snap.res_index["cpu"]

    def of_states(self, cpu: IntArray, gpu_free: IntArray, model: IntArray) -> FloatArray:
        out = frag_amount(self.table, cpu, gpu_free, model)
        if self.weight > 0 and self.rho > 0:
            idle = np.maximum(gpu_free, 0).sum(axis=-1)
            out = out + self.weight * cpu_stranded(idle, cpu, self.rho)
        return out

    def free_cpu(self, nodes: IntArray | slice = slice(None)) -> IntArray:
        s = self.snap
        out: IntArray = s.alloc[nodes, self.cpu_j] - s.used[nodes, self.cpu_j]
        return out

    def of_nodes(self, nodes: IntArray | slice = slice(None)) -> FloatArray:
        s = self.snap
        return self.of_states(self.free_cpu(nodes), s.gpu_free[nodes], s.gpu_model[nodes])

    def best_landing(self, shape: PodShape, now: FloatArray) -> float:
        """The largest fall of the measure one more pod of ``shape`` could bring on any
        node with room for its CPU and GPU (0 when it fits nowhere); ``now`` holds the
        measure of every node. An optimistic bound on what its landing gains, for
        ranking candidates only."""
        s = self.snap
        cpu = self.free_cpu()
        c = shape.request("cpu")
        g = s.gpu_free
        ok = cpu >= c
        if shape.is_gpu:
            ok &= (g >= shape.gpu_milli).sum(axis=1) >= shape.gpu_count
        nodes = np.flatnonzero(ok)
        if nodes.size > 1:  # the best over nodes in equal states is found once
            keys = np.column_stack([cpu[nodes], s.gpu_model[nodes], g[nodes], now[nodes]])
            _, first = np.unique(keys, axis=0, return_index=True)
            nodes = nodes[np.sort(first)]
        if not shape.is_gpu:
            after = self.of_states(cpu[nodes] - c, g[nodes], s.gpu_model[nodes])
        elif shape.gpu_milli >= 1000:
            full = g[nodes] >= 1000
            take = full & (np.cumsum(full, axis=1) <= shape.gpu_count)
            after = self.of_states(cpu[nodes] - c, np.where(take, 0, g[nodes]), s.gpu_model[nodes])
        else:  # one state per (node, device) that can take the share
            rows, dev = np.nonzero(g[nodes] >= shape.gpu_milli)
            nodes = nodes[rows]
            states = g[nodes].copy()
            states[np.arange(nodes.size), dev] -= shape.gpu_milli
            after = self.of_states(cpu[nodes] - c, states, s.gpu_model[nodes])
        if nodes.size == 0:
            return 0.0
        return max(float((now[nodes] - after).max()), 0.0)


def _attempt(
    ctx: PlanContext, v: Victim, measure: Measure, now: FloatArray, keep_at: float | None
) -> tuple[float, Targets]:
    """Move ``v`` with the engine and measure the fall on the nodes it touches; ``now``
    holds the measure of every node. Kept when the gain reaches ``keep_at`` (``now`` is
    updated), else reverted."""
    snap = ctx.snap
    trial, _, _ = try_move(ctx, [v], None)
    if trial is None:
        return float("-inf"), {}
    targets = dict(trial.targets)
    touched = {p.node_name for p in v.pods} | {t for t, _ in targets.values()}
    idx = np.array(sorted(snap.node_index[t] for t in touched), dtype=np.int64)
    after = measure.of_nodes(idx)
    gain = float(now[idx].sum() - after.sum())
    if keep_at is not None and gain >= keep_at:
        trial.keep()
        now[idx] = after
    else:
        trial.drop()
    return gain, targets


def _units(ctx: PlanContext, with_cpu_only: bool) -> list[Victim]:
    """Small movable units whole, and single members above minAvailable of larger gangs
    that have them (the gang keeps running while one member moves)."""
    cfg = ctx.config.defragment
    out: list[Victim] = []
    for v in ctx.views.values():
        placed = v.placed
        if not placed or not ctx.movable(v) or ctx.may_move_for(v, None) is not None:
            continue
        if len(placed) <= cfg.max_pods_per_move:
            has_gpu = with_cpu_only or any(p.shape.is_gpu for p in placed)
            if has_gpu:
                whole = ctx.victim(v)
                if ctx.victim_refusal(whole, defragmenting=True) is None:
                    out.append(whole)
        elif v.is_gang and v.extras > 0 and len(v.running) == len(placed):
            for p in placed:
                if with_cpu_only or p.shape.is_gpu:
                    one = ctx.victim(v, [p])
                    if ctx.victim_refusal(one, defragmenting=True) is None:
                        out.append(one)
    return out


def _leave_gain(ctx: PlanContext, victims: list[Victim], measure: Measure) -> FloatArray:
    """Per victim: the fall of the measure on its nodes when its pods leave them."""
    snap = ctx.snap
    rows: list[int] = []  # (victim, node) pairs, flattened
    owner: list[int] = []
    cpu_back: list[int] = []
    gpu_back: list[IntArray] = []
    width = snap.gpu_free.shape[1]
    for i, v in enumerate(victims):
        per: dict[int, tuple[int, IntArray]] = {}
        for p in v.pods:
            c, g = per.get(p.node, (0, np.zeros(width, dtype=np.int64)))
            for dev in p.gpus:
                g[dev] += p.shape.gpu_milli
            per[p.node] = (c + p.shape.request("cpu"), g)
        for node, (c, g) in per.items():
            rows.append(node)
            owner.append(i)
            cpu_back.append(c)
            gpu_back.append(g)
    if not rows:
        return np.zeros(len(victims))
    nodes = np.array(rows, dtype=np.int64)
    cpu = measure.free_cpu(nodes)
    g = snap.gpu_free[nodes]
    model = snap.gpu_model[nodes]
    before = measure.of_states(cpu, g, model)
    after = measure.of_states(cpu + np.array(cpu_back), g + np.stack(gpu_back), model)
    fall = np.bincount(np.array(owner), weights=before - after, minlength=len(victims))
    return fall.astype(np.float64)


def _candidates(ctx: PlanContext, measure: Measure, now: FloatArray) -> list[Victim]:
    """The units whose estimated gain is largest (and positive), at most
    ``max_candidates``, best first; ties by cost, then key."""
    cfg = ctx.config.defragment
    victims = _units(ctx, with_cpu_only=cfg.stranding_weight > 0)
    if not victims:
        return []
    leave = _leave_gain(ctx, victims, measure)
    landing: dict[PodShape, float] = {}
    by_task: dict[tuple[int, int, int, tuple[str, ...]], float] = {}
    est = np.empty(len(victims))
    for i, v in enumerate(victims):
        land = 0.0
        for p in v.pods:
            hit = landing.get(p.shape)
            if hit is None:
                s = p.shape
                # Shapes the measure cannot tell apart (memory aside) land alike.
                key = (s.request("cpu"), s.gpu_milli, s.gpu_count, s.gpu_models)
                if s.has_static_constraints or key not in by_task:
                    by_task[key] = measure.best_landing(s, now)
                hit = landing[s] = by_task[key]
            land += hit
        est[i] = leave[i] + land
    order = sorted(
        (i for i in range(len(victims)) if est[i] > 0),
        key=lambda i: (
            victims[i].view.priority,  # the lowest priority first
            ctx.tier(victims[i].view),  # queues above their deserved share first
            -est[i] / max(victims[i].cost, 1e-9),
            victims[i].cost,
            victims[i].view.key,
        ),
    )
    # A gang gives up at most its extras: more of its members would crowd out others.
    per_gang: dict[str, int] = {}
    kept: list[Victim] = []
    for i in order:
        v = victims[i]
        if v.partial:
            n = per_gang.get(v.view.key, 0)
            if n >= v.view.extras:
                continue
            per_gang[v.view.key] = n + 1
        kept.append(v)
        if len(kept) == cfg.max_candidates:
            break
    return kept


def defragment(ctx: PlanContext) -> list[Move]:
    """Moves that pack the cluster tighter for its typical workload; only when no gang
    waits (none did before the plan, and none was left unserved): the search's moves,
    then room made by the exact moves for the typical shapes that still fit nowhere."""
    cfg = ctx.config.defragment
    if ctx.scratch.waiting_before or ctx.scratch.unserved:
        return []
    if not cfg.enabled or not ctx.workload.shapes:
        return []
    snap = ctx.snap
    token = snap.fork()
    saved = ctx.scratch.budget.snapshot()
    moves, total = _by_search(ctx)
    ctx.scratch.moved.update(m.unit for m in moves)
    more = exact_defragment(ctx)
    moves += more
    total += sum(m.gain_gpus for m in more) * 1000
    if moves and total < cfg.min_total_gain_gpus * 1000:
        snap.revert(token)
        ctx.scratch.budget.restore(saved)
        ctx.scratch.moved.difference_update(m.unit for m in moves)
        ctx.scratch.notes.append(
            f"defragmentation would gain only {total / 1000:.2f} GPUs "
            f"(min_total_gain_gpus {cfg.min_total_gain_gpus:g}); no move planned"
        )
        return []
    snap.commit(token)
    return moves


def _by_search(ctx: PlanContext) -> tuple[list[Move], float]:
    """The search's moves, made on the snapshot, and what they gain (thousandths)."""
    cfg = ctx.config.defragment
    snap = ctx.snap
    measure = Measure(snap, ctx.workload, cfg.stranding_weight)
    now = measure.of_nodes()
    floor = cfg.min_gain_gpus * 1000
    scored = []
    for v in _candidates(ctx, measure, now):
        gain, _ = _attempt(ctx, v, measure, now, None)
        if gain >= floor and gain > 0:
            scored.append((gain / max(v.cost, 1e-9), gain, v))
    scored.sort(
        key=lambda t: (t[2].view.priority, ctx.tier(t[2].view), -t[0], -t[1], t[2].view.key)
    )
    moves: list[Move] = []
    total = 0.0
    # Members moved per unit: a unit moves whole once, or member by member up to its
    # members above minAvailable.
    taken: dict[str, int] = {}
    for _, _, v in scored:
        key = v.view.key
        room = v.view.extras - taken.get(key, 0) if v.partial else 0 if key in taken else 1
        if room < (len(v.pods) if v.partial else 1):
            continue
        if ctx.victim_refusal(v, defragmenting=True) is not None:
            continue
        gain, targets = _attempt(ctx, v, measure, now, max(floor, 1e-9))
        if not (gain >= floor and gain > 0):
            continue
        ctx.scratch.budget.take(v.pods, v.view.queue)
        taken[key] = taken.get(key, 0) + (len(v.pods) if v.partial else 1 << 30)
        total += gain
        moves.append(_move(v, targets, gain, cfg.stranding_weight))
    return moves, total


def _move(v: Victim, targets: Targets, gain: float, weight: float) -> Move:
    what = "FGD fragmentation" if weight == 0 else "FGD fragmentation and CPU-stranded GPU"
    who = f"a member above minAvailable of {v.view.describe()}" if v.partial else v.view.describe()
    return victim_move(
        v,
        targets,
        kind="defragment",
        partial=v.partial,
        gain_gpus=gain / 1000.0,
        reason=f"moves {who}: {what} falls by {gain / 1000:.2f} GPUs",
    )
