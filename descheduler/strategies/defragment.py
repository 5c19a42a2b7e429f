"""Defragment when no gang is waiting: move small gangs so that the cluster suits the
typical workload better, measured by FGD's fragmentation F(M) (in GPUs).

Candidates are small movable GPU units on the most fragmented nodes. Each is tried
alone with the engine (removed, placed again by the scheduler's scoring) and ranked by
the fragmentation it removes per unit of cost; then, best first, each is tried again on
the snapshot as earlier moves left it and kept when it still lowers F(M) by at least
``min_gain_gpus``. If all kept moves together lower F(M) by less than
``min_total_gain_gpus``, none is kept: small gains are not worth restarting pods.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from gangplace.engine.fragmentation import node_fragmentation

from ..context import PlanContext, Victim
from ..plan import Move, PodMove
from ..simulate import try_move

__all__ = ["defragment"]

FloatArray = npt.NDArray[np.float64]


Targets = dict[int, tuple[str, tuple[int, ...]]]


def _attempt(
    ctx: PlanContext, v: Victim, frag: FloatArray, keep_at: float | None
) -> tuple[float, Targets]:
    """Move ``v`` with the engine and measure how much F(M) falls (thousandths of a
    GPU) on the nodes it touches; ``frag`` holds F_n(M) of every node now. Kept when
    the gain reaches ``keep_at`` (``frag`` is updated), else reverted."""
    snap = ctx.snap
    trial, _, _ = try_move(ctx, [v], None)
    if trial is None:
        return float("-inf"), {}
    targets = dict(trial.targets)
    touched = {p.node_name for p in v.pods} | {t for t, _ in targets.values()}
    idx = np.array(sorted(snap.node_index[t] for t in touched), dtype=np.int64)
    after = node_fragmentation(snap, ctx.workload, idx)
    gain = float(frag[idx].sum() - after.sum())
    if keep_at is not None and gain >= keep_at:
        trial.keep()
        frag[idx] = after
    else:
        trial.drop()
    return gain, targets


def _candidates(ctx: PlanContext, frag: FloatArray) -> list[Victim]:
    cfg = ctx.config.defragment
    seen: dict[str, Victim] = {}
    for v in ctx.views.values():
        placed = v.placed
        if not placed or not ctx.movable(v) or len(placed) > cfg.max_pods_per_move:
            continue
        if not any(p.shape.is_gpu for p in placed):
            continue
        if ctx.refusal(placed, v.queue) is not None:
            continue
        seen[v.key] = ctx.victim(v)

    def where(v: Victim) -> float:
        return float(sum(frag[p.node] for p in v.pods))

    ranked = sorted(seen.values(), key=lambda v: (-where(v), v.cost, v.view.key))
    return ranked[: cfg.max_candidates]


def defragment(ctx: PlanContext) -> list[Move]:
    cfg = ctx.config.defragment
    if not cfg.enabled or not ctx.workload.shapes:
        return []
    snap = ctx.snap
    frag = node_fragmentation(snap, ctx.workload)
    floor = cfg.min_gain_gpus * 1000
    scored = []
    for v in _candidates(ctx, frag):
        gain, _ = _attempt(ctx, v, frag, None)
        if gain >= floor and gain > 0:
            scored.append((gain / max(v.cost, 1e-9), gain, v))
    scored.sort(key=lambda t: (-t[0], -t[1], t[2].view.key))
    token = snap.fork()
    saved = ctx.budget.snapshot()
    moves: list[Move] = []
    total = 0.0
    for _, _, v in scored:
        if ctx.refusal(v.pods, v.view.queue) is not None:
            continue
        gain, targets = _attempt(ctx, v, frag, max(floor, 1e-9))
        if not (gain >= floor and gain > 0):
            continue
        ctx.budget.take(v.pods, v.view.queue)
        total += gain
        pg = v.view.podgroup
        moves.append(
            Move(
                kind="defragment",
                unit=v.view.key,
                namespace=v.view.namespace,
                gang=v.view.gang_name,
                queue=v.view.queue,
                pods=[
                    PodMove(
                        p.namespace,
                        p.name,
                        p.uid,
                        p.node_name,
                        targets[id(p)][0],
                        p.shape.gpu_demand_milli,
                        targets[id(p)][1],
                    )
                    for p in v.pods
                ],
                partial=False,
                cost=v.cost,
                gain_gpus=gain / 1000.0,
                reason=f"moves {v.view.describe()}: FGD fragmentation falls by "
                f"{gain / 1000:.2f} GPUs",
                podgroup=pg.name if pg is not None else None,
                podgroup_api=pg.api_group if pg is not None else None,
            )
        )
    if moves and total < cfg.min_total_gain_gpus * 1000:
        snap.revert(token)
        ctx.budget.restore(saved)
        ctx.notes.append(
            f"defragmentation would lower F(M) by only {total / 1000:.2f} GPUs "
            f"(min_total_gain_gpus {cfg.min_total_gain_gpus:g}); no move planned"
        )
        return []
    snap.commit(token)
    for m in moves:
        ctx.moved.add(m.unit)
    return moves
