"""Room for a waiting gang that capacity blocks (``capacity_room``, opt-in): when no
move lets it start because what would make room fits nowhere else, workloads are
suspended without being placed again, so that it starts.

Only a gang that has waited longer than ``capacity_room.after``; only units whose
workloads have a suspend switch (never evicted: a suspended workload keeps its place
in its own queue and loses nothing but its work at risk); of lower priority than the
gang, or -- with ``capacity_room.equal_priority`` -- of its own priority and holding
fewer GPUs than it needs, never one that started on room made for it within the
cool-down. Never a higher priority. Every victim is within the limits, the disruption
budgets and the work-at-risk cap; least work at risk (cost) first, queues above their
share before others; victims the gang does not need are dropped, costliest first.
The room is held for the gang for ``capacity_room.hold_for``: each move carries the hold,
which the suspender writes in the workload's mark; until the gang binds or the hold
ends, corral resumes no workload of lower priority than the gang, and the planner serves
the gang ahead of waiting gangs of its priority or lower
(:func:`~descheduler.planning.resume.held_first`), so corral plans its room for no other
such gang. What was suspended for it is resumed before anything else
(:mod:`descheduler.planning.resume`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gangplace.engine import place_gang
from gangplace.engine.timeparse import format_duration

from descheduler.planning.context import PlanContext, Victim, move_way
from descheduler.planning.gang_demand import Demand
from descheduler.planning.gang_views import GangView
from descheduler.planning.nominate import nomination_refusal, planned_nominations
from descheduler.planning.plan_model import Move, PodMove
from descheduler.planning.what_if import remove_pods

__all__ = ["capacity_room", "may_suspend_for"]


def may_suspend_for(ctx: PlanContext, view: GangView, d: Demand) -> str | None:
    """Why ``view`` may not be suspended to make room for ``d``, or None."""
    mine, theirs = view.priority, d.view.priority
    if mine > theirs:
        return f"{view.describe()} has priority {mine}, higher than {theirs} of {d.key}"
    if mine < theirs:
        return None
    if not ctx.config.capacity_room.equal_priority:
        return f"{view.describe()} has the priority of {d.key} ({mine})"
    held = sum(p.shape.gpu_demand_milli for p in view.placed)
    needs = sum(
        r.shape.gpu_demand_milli * n
        for r, n in zip(d.gang.roles, d.gang.required_per_role(), strict=True)
    )
    if held >= needs:
        return f"{view.describe()} has the priority of {d.key} and is not smaller"
    kept = ctx.room_kept(view)
    if kept is not None:
        return f"{view.describe()} has the priority of {d.key} ({mine}) and {kept}"
    return None


def _candidates(ctx: PlanContext, d: Demand) -> list[Victim]:
    out = []
    for view in ctx.views.values():
        if view.key == d.key or not view.placed or not ctx.movable(view):
            continue
        if len(view.placed) != len(view.running):
            continue
        if may_suspend_for(ctx, view, d) is not None:
            continue
        v = ctx.victim(view)
        if v.way.method != "suspend" or ctx.victim_refusal(v) is not None:
            continue
        out.append(v)
    return sorted(out, key=lambda v: (v.tier, v.cost, v.view.key))


def _starts_without(ctx: PlanContext, d: Demand, victims: Sequence[Victim]) -> bool:
    snap = ctx.snap
    with snap.what_if():
        for v in victims:
            remove_pods(snap, v.pods)
        return place_gang(snap, d.gang, ctx.scorer, ctx.options).ok


def capacity_room(
    ctx: PlanContext, d: Demand, retire: Callable[[GangView], None] | None = None
) -> list[Move] | None:
    """Suspend moves that let ``d`` start, made on the snapshot with ``d`` placed; None
    (nothing changed) when the switch is off, ``d`` has not waited long enough, or no
    set of allowed victims makes room."""
    cfg = ctx.config.capacity_room
    if not cfg.enabled or not ctx.config.moves.suspend or d.view.created is None:
        return None
    waited = (ctx.now - d.view.created).total_seconds()
    if waited < cfg.after:
        return None
    limit = ctx.config.make_room.max_victims_per_gang
    chosen: list[Victim] = []
    saved = ctx.scratch.budget.snapshot()
    try:
        for v in _candidates(ctx, d):
            if len(chosen) >= limit:
                break
            if ctx.victim_refusal(v) is not None:  # the limits, with those chosen taken
                continue
            ctx.scratch.budget.take(v.pods, v.view.queue)
            chosen.append(v)
            if _starts_without(ctx, d, chosen):
                break
        else:
            return None
    finally:
        ctx.scratch.budget.restore(saved)
    if not _starts_without(ctx, d, chosen):
        return None
    for v in sorted(chosen, key=lambda v: (-v.cost, v.view.key)):
        rest = [x for x in chosen if x is not v]
        if rest and _starts_without(ctx, d, rest):
            chosen = rest
    snap = ctx.snap
    for v in chosen:
        remove_pods(snap, v.pods)
    placed = place_gang(snap, d.gang, ctx.scorer, ctx.options)
    assert placed.ok, "the engine is deterministic: a gang that fitted fits"
    nominate: dict[str, str] = {}
    refused = nomination_refusal(d.view) if cfg.nominate else None
    if cfg.nominate and refused is None:
        nominate = planned_nominations(d.view, placed)
    out = []
    for v in sorted(chosen, key=lambda v: (v.cost, v.view.key)):
        ctx.scratch.budget.take(v.pods, v.view.queue)
        ctx.scratch.moved.add(v.view.key)
        if retire is not None:
            retire(v.view)
        m = _move(v, d, waited, cfg.hold_for)
        if nominate:
            m.nominate = dict(nominate)
            m.reason += f"; its {len(nominate)} waiting pods are nominated to the room's nodes"
        elif refused is not None:
            m.reason += f"; not nominated: {refused}"
        out.append(m)
    return out


def _move(v: Victim, d: Demand, waited: float, hold: float) -> Move:
    pg = v.view.podgroup
    return Move(
        kind="make-room",
        unit=v.view.key,
        namespace=v.view.namespace,
        gang=v.view.gang_name,
        queue=v.view.queue,
        pods=[
            PodMove(p.namespace, p.name, p.uid, p.node_name, None, p.shape.gpu_demand_milli)
            for p in v.pods
        ],
        partial=False,
        cost=v.cost,
        reason=f"suspends {v.view.describe()} to make room for waiting gang {d.key} "
        f"({d.describe()}), which capacity has blocked for {format_duration(waited)}: it "
        f"waits, suspended, until that gang is bound or the room held for it "
        f"({format_duration(hold)}) is released",
        for_gang=d.key,
        at_risk=v.at_risk,
        hold_for=hold,
        podgroup=pg.name if pg is not None else None,
        podgroup_api=pg.api_group if pg is not None else None,
        **move_way(v),
    )
