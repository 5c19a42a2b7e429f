"""Where the planner's own search finds no move: the mover's exact neighbourhood moves
(:mod:`gangplace.mover.place_with_moves`, the moves the trace replay measures), under
every rule the planner's own moves obey.

The rules are the planner's, asked through its context, not restated here: a unit
moves whole (a gang with all its members, never members above minAvailable alone);
only units the plan may move (not protected, not suspended, not moved already by this
plan, with a safe method for their owner); the priority rule
(:meth:`PlanContext.may_move_for`); the eviction limits, disruption budgets and
``make_room.max_victims_per_gang`` on the moved units together. The mover's solver is
limited in branch-and-bound nodes (``exact_moves.node_limit``), so a plan is the same
however busy the machine is.

- **A waiting gang** that make_room's search cannot serve: the mover places its members
  one after another, moving at most ``exact_moves.max_pods`` pods for each. The moved
  units are then tried with the engine as every make-room move is (evicted, the gang
  placed, each placed again by the scheduler's scoring); when the engine finds no place
  for one of them, the plan keeps the mover's layout (each pod where the exact model
  puts it), and the gang is placed by the engine on what that leaves.
- **Defragmenting**: after the planner's own moves, the typical GPU shapes that still fit
  nowhere, most frequent first, get room for one pod each, round after round, at most
  ``exact_moves.max_rooms`` pods per run. No pod is created: the room is left for the
  pods of those shapes to come.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from gangplace.engine import PodRecord, PodShape, place_gang
from gangplace.engine.feasibility import fits
from gangplace.engine.fragmentation import TargetWorkload
from gangplace.mover.place_with_moves import MoverLimits, MoveRules, place_with_moves
from gangplace.mover.shape_dominance import needs_at_least

from descheduler.planning.budget import PER_RUN
from descheduler.planning.context import PlanContext, Victim, victim_move
from descheduler.planning.gang_demand import Demand
from descheduler.planning.gang_views import GangView
from descheduler.planning.plan_model import Move
from descheduler.planning.what_if import try_move

__all__ = ["exact_defragment", "exact_room", "typical_shapes"]

Targets = dict[int, tuple[str, tuple[int, ...]]]


def typical_shapes(workload: TargetWorkload) -> list[PodShape]:
    """The typical GPU tasks as pod shapes, most frequent first (CPU and GPUs only)."""
    out: list[PodShape] = []
    order = sorted(range(len(workload.shapes)), key=lambda i: -workload.weights[i])
    for t in (workload.shapes[i] for i in order):
        if t.gpu_count:
            shape = PodShape.of(
                {"cpu": t.cpu},
                gpus=t.gpu_count,
                gpu_milli=t.gpu_milli if t.gpu_milli < 1000 else None,
                gpu_models=t.models,
            )
            if shape not in out:
                out.append(shape)
    return out


def _view(ctx: PlanContext, p: PodRecord) -> GangView | None:
    try:
        return ctx.view_of(p)
    except KeyError:  # a pod the mover is placing
        return None


def _rules(ctx: PlanContext, d: Demand | None) -> MoveRules:
    """The planner's rules for units moved for ``d`` (None: to defragment)."""
    ok: dict[str, bool] = {}

    def may(view: GangView) -> bool:
        if not ctx.movable(view):  # asked each time: the plan's moves add to ctx.scratch.moved
            return False
        hit = ok.get(view.key)
        if hit is None:
            hit = ok[view.key] = (
                (d is None or view.key != d.key)
                and len(view.placed) == len(view.running)
                and ctx.may_move_for(view, d) is None
                and ctx.victim_refusal(ctx.victim(view), defragmenting=d is None) is None
            )
        return hit

    def movable(p: PodRecord) -> bool:
        view = _view(ctx, p)
        return view is not None and may(view)

    def unit_of(p: PodRecord) -> Hashable:
        view = _view(ctx, p)
        return view.key if view is not None else id(p)

    def allows(pods: Sequence[PodRecord]) -> str | None:
        victims = _victims(ctx, pods)
        limit = ctx.config.make_room.max_victims_per_gang
        if d is not None and len(victims) > limit:
            return f"more than {limit} victim gangs (max_victims_per_gang)"
        saved = ctx.scratch.budget.snapshot()
        try:
            for v in victims:
                why = ctx.victim_refusal(v, defragmenting=d is None)
                if why is not None:
                    return why
                ctx.scratch.budget.take(v.pods, v.view.queue)
        finally:
            ctx.scratch.budget.restore(saved)
        return None

    return MoveRules(unit_of=unit_of, movable=movable, allows=allows)


def _victims(ctx: PlanContext, pods: Sequence[PodRecord]) -> list[Victim]:
    """The units of ``pods``, whole, in the order first moved."""
    views: dict[str, GangView] = {}
    for p in pods:
        view = ctx.view_of(p)
        views.setdefault(view.key, view)
    return [ctx.victim(v) for v in views.values()]


def _limits(ctx: PlanContext) -> MoverLimits:
    cfg = ctx.config.exact_moves
    return MoverLimits(max_pods=cfg.max_pods, node_limit=cfg.node_limit)


def _left(ctx: PlanContext) -> int | None:
    """Pods this run may still evict (a bound for the mover; the budget decides)."""
    cap = ctx.config.limits.max_evictions_per_run
    used = ctx.scratch.budget.limits.used[(PER_RUN, "")]
    return None if cap is None else max(cap - used, 0)


def _members(d: Demand) -> list[PodRecord]:
    """Unbound records of the members ``d`` still needs, largest first."""
    out = []
    for role, n in zip(d.gang.roles, d.gang.required_per_role(), strict=True):
        out += [
            PodRecord(d.view.namespace, f"{d.key}-{role.name}-{i}", role.shape) for i in range(n)
        ]
    return sorted(out, key=lambda p: (-p.shape.gpu_demand_milli, -p.shape.request("cpu")))


def _targets(ctx: PlanContext, victims: Sequence[Victim]) -> Targets:
    names = ctx.snap.node_names
    return {id(p): (names[p.node], p.gpus) for v in victims for p in v.pods}


def exact_room(
    ctx: PlanContext, d: Demand, retire: Callable[[GangView], None] | None = None
) -> list[Move] | None:
    """Make-room moves for ``d`` found by the mover, made on the snapshot with ``d``
    placed; None (the snapshot unchanged) when it finds none the rules allow. ``retire``
    is told of each moved unit."""
    cfg = ctx.config.exact_moves
    if not cfg.enabled or ctx.scratch.budget.exhausted():
        return None
    snap = ctx.snap
    token = snap.fork()
    try:
        room = place_with_moves(
            snap, _members(d), _rules(ctx, d), _limits(ctx), max_total=_left(ctx)
        )
        victims = _victims(ctx, room.moved) if room is not None else []
        laid_out = _targets(ctx, victims)
    finally:
        snap.revert(token)
    if not victims:
        return None
    trial, _, _ = try_move(ctx, victims, d)
    if trial is not None:
        targets, how = trial.targets, "placed again by the scheduler's scoring"
        trial.keep()
    elif _lay_out(ctx, d, victims, laid_out):
        targets, how = laid_out, "placed again where the exact model packs them"
    else:
        return None
    out = []
    for v in victims:
        ctx.scratch.budget.take(v.pods, v.view.queue)
        ctx.scratch.moved.add(v.view.key)
        if retire is not None:
            retire(v.view)
        what = "whole " if v.view.is_gang else ""
        out.append(
            _move(
                v,
                targets,
                "make-room",
                f"moves {what}{v.view.describe()} to make room for waiting gang {d.key} "
                f"({d.describe()}), found by the exact neighbourhood moves; {how}",
                for_gang=d.key,
            )
        )
    return out


def _lay_out(ctx: PlanContext, d: Demand, victims: Sequence[Victim], targets: Targets) -> bool:
    """Make the moves as the mover laid them out, then place ``d`` with the engine;
    the snapshot is unchanged when ``d`` does not fit."""
    snap = ctx.snap
    token = snap.fork()
    try:
        for v in victims:
            for p in v.pods:
                snap.remove(p)
        for v in victims:
            for p in v.pods:
                node, gpus = targets[id(p)]
                snap.place(p.shape, snap.node_index[node], gpus, pod=p)
        ok = place_gang(snap, d.gang, ctx.scorer, ctx.options).ok
    except BaseException:
        snap.revert(token)
        raise
    if ok:
        snap.commit(token)
    else:
        snap.revert(token)
    return ok


def exact_defragment(ctx: PlanContext) -> list[Move]:
    """Room for pods of the typical GPU shapes that fit nowhere, made by the mover on
    the snapshot (its moves are made there); at most ``exact_moves.max_rooms`` pods."""
    cfg = ctx.config.exact_moves
    if not cfg.enabled or cfg.max_rooms <= 0:
        return []
    snap = ctx.snap
    floor = ctx.config.defragment.min_gain_gpus * 1000  # a room gains its pod's GPU
    shapes = [s for s in typical_shapes(ctx.workload) if s.gpu_demand_milli >= floor]
    rules, limits = _rules(ctx, None), _limits(ctx)
    holders: list[PodRecord] = []
    failed: list[PodShape] = []  # no room found this run: nor for a shape needing more
    out: list[Move] = []
    token = snap.fork()
    try:
        progress = True
        while progress and len(holders) < cfg.max_rooms and not ctx.scratch.budget.exhausted():
            progress = False
            for shape in shapes:
                if len(holders) >= cfg.max_rooms or ctx.scratch.budget.exhausted():
                    break
                if any(needs_at_least(snap, shape, f) for f in failed):
                    continue
                if fits(snap, shape).any():
                    continue
                holder = PodRecord("", f"room-{len(holders)}", shape)
                room = place_with_moves(snap, [holder], rules, limits, max_total=_left(ctx))
                if room is None:
                    failed.append(shape)
                    continue
                holders.append(holder)
                progress = True
                victims = _victims(ctx, room.moved)
                targets = _targets(ctx, victims)
                for v in victims:
                    ctx.scratch.budget.take(v.pods, v.view.queue)
                    ctx.scratch.moved.add(v.view.key)
                    out.append(
                        _move(
                            v,
                            targets,
                            "defragment",
                            f"moves {v.view.describe()} to make room for one pod of the "
                            f"typical shape {shape.describe()}, which fits nowhere (the exact "
                            "neighbourhood moves)",
                            gain=shape.gpu_demand_milli / 1000.0 / len(victims),
                        )
                    )
        for h in holders:
            snap.remove(h)
    except BaseException:
        snap.revert(token)
        raise
    snap.commit(token)
    return out


def _move(
    v: Victim,
    targets: Targets,
    kind: str,
    reason: str,
    *,
    for_gang: str | None = None,
    gain: float = 0.0,
) -> Move:
    return victim_move(
        v,
        targets,
        kind="make-room" if kind == "make-room" else "defragment",
        partial=False,
        reason=reason,
        for_gang=for_gang,
        gain_gpus=gain,
    )
