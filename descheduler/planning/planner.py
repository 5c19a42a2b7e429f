"""``plan(state, config) -> Plan``: the pure heart of the descheduler.

No clock, no I/O: the state carries "now". The planner works on the state's snapshot
inside a fork and reverts it, so the caller's snapshot is unchanged afterwards.

The strategies (:data:`~descheduler.planning.strategies.run_order.STRATEGIES`, each
``(ctx) -> moves``) run in order on one simulated cluster. First the waiting gangs that
fit now are placed (the scheduler starts them before any eviction lands). Then stale
partial gangs are released and room is made for the waiting gangs that cannot start, in
DRF order, or -- when no gang is waiting -- the cluster is defragmented for its typical
workload. Last the plan is checked as a whole, the way the cluster will live it (see
``_settle``), and moves whose promise does not hold are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gangplace.engine import PodRecord, PodShape, Scorer, Snapshot, place_gang
from gangplace.engine.feasibility import fits
from gangplace.engine.fragmentation import TargetWorkload, fragmentation
from gangplace.engine.report import FragmentationReport, fragmentation_report

from descheduler.config import DeschedulerConfig
from descheduler.planning.budget import PlanBudget
from descheduler.planning.context import PlanContext
from descheduler.planning.gang_demand import Demand
from descheduler.planning.plan_model import LargestFit, Move, NotMoved, Plan, PodMove
from descheduler.planning.state import ClusterState
from descheduler.planning.strategies.exact_moves.exact_moves import typical_shapes
from descheduler.planning.strategies.run_order import STRATEGIES
from descheduler.planning.what_if import evaluate_waiting

__all__ = ["MoveError", "apply_moves", "fragmentation_now", "move_verdict", "plan"]


class MoveError(RuntimeError):
    """A planned move that does not fit as the plan said (a planner bug: never expected)."""


def plan(
    state: ClusterState,
    config: DeschedulerConfig | None = None,
    *,
    scorer: Scorer | None = None,
    workload: TargetWorkload | None = None,
    largest: bool = True,
) -> Plan:
    """The moves that make room for waiting gangs (or defragment), and what they do.
    ``scorer`` and ``workload`` override the configured policy and the typical shapes
    (see :meth:`PlanContext.build`). ``largest=False`` leaves out the "largest gang
    that fits" figures, which place probe gangs in full (a trace replay that plans
    often does not need them)."""
    cfg = config or DeschedulerConfig()
    ctx = PlanContext.build(state, cfg, scorer=scorer, workload=workload)
    snap = ctx.snap
    probes = _probes(ctx) if largest else []
    out = Plan(now=state.now)
    out.report_before = fragmentation_report(
        snap, ctx.workload, probes, probes_from=_probes_from(ctx)
    )
    out.fragmentation_before = fragmentation(snap, ctx.workload)
    started, out.waiting_before = evaluate_waiting(ctx, ctx.demands)
    largest_now = _largest_per_model(snap) if largest else {}

    run = ctx.scratch
    run.started, run.waiting_before, run.moves = set(started), list(out.waiting_before), []
    first = [d for d in ctx.demands if d.key in run.started]
    token = snap.fork()
    try:
        for d in first:  # the scheduler starts these before any eviction lands
            place_gang(snap, d.gang, ctx.scorer, ctx.options)
        for strategy in STRATEGIES:
            run.moves += strategy(ctx)
    finally:
        snap.revert(token)
    moves, released, rest = run.moves, ctx.released(), ctx.blocked()

    moves = _settle(ctx, moves, first, rest, out, probes, released)
    out.moves = moves
    out.largest = _largest_rows(snap, largest_now, moves, ctx) if largest else []
    out.unserved = [u for u in run.unserved if u.gang in out.waiting_after]
    out.notes = run.notes
    moved = {m.unit for m in moves}
    out.not_moved = _not_moved(ctx, moved)
    out.suspended = [
        NotMoved(k, ctx.views[k].priority, why) for k, why in sorted(ctx.suspended.items())
    ]
    return out


def _not_moved(ctx: PlanContext, moved: set[str]) -> list[NotMoved]:
    """Running units the rules keep in place, with why: protected ones, and those a
    disruption budget covers that allows fewer disruptions than they have members."""
    fresh = PlanBudget(ctx.config.limits, ctx.state.pdbs)
    out = []
    for k, v in sorted(ctx.views.items()):
        if not v.placed or k in moved or k in ctx.suspended:
            continue
        why = ctx.protected.get(k) or fresh.pdb_reason(v.placed)
        if why is not None:
            out.append(NotMoved(k, v.priority, why))
    return out


def move_verdict(state: ClusterState, config: DeschedulerConfig, unit: str) -> str:
    """How the descheduler would move the unit ``ns/gang`` (or ``ns/pod:name``), or why
    it would not: ``kubectl corral explain``. The rules only, not whether a plan needs
    the move."""
    ctx = PlanContext.build(state, config)
    view = ctx.views.get(unit)
    if view is None:
        return f"{unit}: not in the cluster state"
    if unit in ctx.suspended:
        return f"not moved: {ctx.suspended[unit]}"
    if not view.placed:
        return "not moved: none of its pods runs"
    why = ctx.protected.get(unit) or PlanBudget(config.limits, state.pdbs).pdb_reason(view.placed)
    if why is None:
        why = ctx.risk_refusal(ctx.victim(view))
    if why is not None:
        return f"not moved: {why}"
    way = ctx.way(view, view.placed)
    kept = ctx.room_kept(view)
    if config.eviction.victim_priority == "LowerPriority":
        whom = "a waiting gang of higher priority"
    elif kept is not None:
        whom = f"a waiting gang of higher priority ({kept})"
    else:
        whom = (
            "a waiting gang of higher priority, or of equal priority when the plan places "
            "it again at once"
        )
    defrag = ", or to defragment" if config.defragment.enabled else ""
    return (
        f"may be moved by {way.method} ({way.reason}), priority {view.priority}: only for "
        f"{whom}{defrag}"
    )


def fragmentation_now(
    state: ClusterState, config: DeschedulerConfig | None = None
) -> FragmentationReport:
    """The fragmentation report a plan starts from (its ``report_before``), without
    planning: the same typical workload and probe shapes. ``kubectl corral frag``."""
    ctx = PlanContext.build(state, config or DeschedulerConfig())
    return fragmentation_report(ctx.snap, ctx.workload, _probes(ctx), probes_from=_probes_from(ctx))


def _pods_by_key(snap: Snapshot) -> dict[str, PodRecord]:
    return {p.key: p for p in snap.pods}


def apply_moves(
    snap: Snapshot,
    moves: Sequence[Move],
    pods: dict[str, PodRecord] | None = None,
    *,
    strict: bool = False,
) -> None:
    """Make ``moves`` on ``snap`` at once: every eviction, then every pod bound where
    the plan predicts it lands (released stale gangs' pods stay pending). ``snap`` must
    be the snapshot the plan was made on (or one like it); a trace replay can call this
    inside or outside a fork. ``strict`` (the replay's moves): every pod must have a
    node to land on, and each landing is checked with the engine (resources, devices);
    one that does not fit raises :class:`MoveError`."""
    if pods is None:
        pods = _pods_by_key(snap)
    _evict(snap, moves, pods)
    for m in moves:
        for pm in m.pods:
            if pm.target is None:
                if strict:
                    raise MoveError(f"{pm.key}: the plan gives no node to land on")
                continue
            p = pods[pm.key]
            if strict and not _lands(snap, p, pm):
                raise MoveError(f"{pm.key}: does not fit on {pm.target} as planned")
            snap.place(p.shape, snap.node_index[pm.target], pm.target_gpus, pod=p)


def _evict(snap: Snapshot, moves: Sequence[Move], pods: dict[str, PodRecord]) -> None:
    for m in moves:
        for pm in m.pods:
            p = pods[pm.key]
            if p.node >= 0:
                snap.remove(p)


def _lands(snap: Snapshot, p: PodRecord, pm: PodMove) -> bool:
    """Whether ``p`` fits where ``pm`` says it lands (resources, devices), now."""
    assert pm.target is not None
    node = snap.node_index[pm.target]
    free = snap.gpu_free[node]
    gpus_ok = all(free[g] >= p.shape.gpu_milli for g in pm.target_gpus)
    return bool(fits(snap, p.shape, np.array([node]))[0]) and gpus_ok


def _land_whole(snap: Snapshot, m: Move, pods: dict[str, PodRecord]) -> bool:
    """Bind every pod of ``m`` where the plan says it lands, checking each landing;
    all or nothing: on the first that does not fit, the ones bound are taken back."""
    done: list[PodRecord] = []
    for pm in m.pods:
        p = pods[pm.key]
        if pm.target is None or not _lands(snap, p, pm):
            for q in done:
                snap.remove(q)
            return False
        snap.place(p.shape, snap.node_index[pm.target], pm.target_gpus, pod=p)
        done.append(p)
    return True


def _settle(
    ctx: PlanContext,
    moves: list[Move],
    first: Sequence[Demand],
    rest: Sequence[Demand],
    out: Plan,
    probes: Sequence[PodShape],
    released: set[str],
) -> list[Move]:
    """Check the plan as the cluster will live it: the gangs that fit now start, every
    move is made at once, then the other waiting gangs are served in DRF order. A gang
    a move serves must start, no gang that can start now may be kept from starting, and
    a gang moved for one of its own priority (a consolidation) must be placed again at
    once even when every waiting gang of its priority or higher is served before it;
    otherwise moves are dropped from the first offending one on (later make-room moves
    may lean on the state it left)."""
    snap = ctx.snap
    waiting_before = set(out.waiting_before)
    pods = _pods_by_key(ctx.snap)
    while True:
        with snap.what_if():
            apply_moves(snap, moves, pods)
            report: FragmentationReport = fragmentation_report(
                snap, ctx.workload, probes, probes_from=_probes_from(ctx)
            )
            frag = fragmentation(snap, ctx.workload)
        with snap.what_if():
            blocked = [
                d.key for d in first if not place_gang(snap, d.gang, ctx.scorer, ctx.options).ok
            ]
            blocked_rest, lost = _final(ctx, moves, rest, pods)
            blocked += [d.key for d in rest if d.key in blocked_rest]
        served = [m.for_gang for m in moves if m.kind == "make-room" and m.for_gang]
        broken = next((g for g in served if g in blocked), None)
        worse = next((g for g in blocked if g not in waiting_before and g not in released), None)
        if broken is None and worse is None and lost is None:
            out.report_after, out.fragmentation_after, out.waiting_after = report, frag, blocked
            return moves
        droppable = [i for i, m in enumerate(moves) if m.kind != "release-stale"]
        if not droppable:  # releases alone: the scheduler's DRF order decides the rest
            out.report_after, out.fragmentation_after, out.waiting_after = report, frag, blocked
            return moves
        if broken is not None:
            cut = next(i for i, m in enumerate(moves) if m.for_gang == broken)
            why = f"{broken} would still not start"
        elif worse is not None:
            last = moves[droppable[-1]]
            cut = next(
                i
                for i in droppable
                if (last.for_gang is not None and moves[i].for_gang == last.for_gang)
                or (last.for_gang is None and moves[i].kind == last.kind)
            )
            why = f"{worse}, which can start now, could not start after them"
        else:
            assert lost is not None
            cut = next(i for i, m in enumerate(moves) if m.for_gang == lost.for_gang)
            why = (
                f"{lost.unit}, of the priority of {lost.for_gang}, would not be placed again "
                "at once: a waiting gang served before it could take its room"
            )
        dropped = sorted({m.for_gang or m.unit for m in moves[cut:] if m.kind != "release-stale"})
        ctx.scratch.notes.append(
            f"moves for {', '.join(dropped)} dropped: with every move made at once, {why}"
        )
        moves = [m for i, m in enumerate(moves) if i < cut or m.kind == "release-stale"]


def _final(
    ctx: PlanContext, moves: Sequence[Move], rest: Sequence[Demand], pods: dict[str, PodRecord]
) -> tuple[set[str], Move | None]:
    """The plan's final snapshot, made on ``ctx.snap`` (the caller reverts it): every
    eviction; the gangs moved for a gang of higher priority land where the plan says;
    then the waiting gangs are served in DRF order, and each gang moved for one of its
    own priority lands (whole, where the plan says) only once every waiting gang of its
    priority or higher has been served -- the worst case of the scheduler's order, so
    that it never waits for a gang of its own priority; a suspended one, out of the
    queue until it is resumed, only once every waiting gang has been. Returns the
    waiting gangs that do not start, and the first such moved gang that does not land."""
    snap = ctx.snap
    # a unit suspended for capacity room (no pod has a target) lands nowhere: it waits
    later = [
        m
        for m in moves
        if m.kind == "make-room"
        and ctx.consolidation(m.priority, m.for_gang)
        and any(pm.target is not None for pm in m.pods)
    ]
    ids = {id(m) for m in later}
    _evict(snap, moves, pods)
    for m in moves:
        if id(m) not in ids:
            for pm in m.pods:
                if pm.target is not None:
                    p = pods[pm.key]
                    snap.place(p.shape, snap.node_index[pm.target], pm.target_gpus, pod=p)
    # each consolidated gang lands after the last waiting gang of its priority or higher;
    # a suspended one is out of the queue until it is resumed: after every waiting gang
    after = [
        max(
            (
                i
                for i, d in enumerate(rest)
                if d.view.priority >= m.priority or m.method == "suspend"
            ),
            default=-1,
        )
        for m in later
    ]
    blocked: set[str] = set()
    lost: Move | None = None

    def land(i: int) -> None:
        nonlocal lost
        for m, a in zip(later, after, strict=True):
            if a == i and not _land_whole(snap, m, pods) and lost is None:
                lost = m

    land(-1)
    for i, d in enumerate(rest):
        if not place_gang(snap, d.gang, ctx.scorer, ctx.options).ok:
            blocked.add(d.key)
        land(i)
    return blocked, lost


def _probes_from(ctx: PlanContext) -> str:
    """Where :func:`_probes` took its shapes, said beside the largest gangs."""
    if ctx.demands:
        return "the waiting gangs' largest members, with their node selectors"
    return "the typical GPU tasks"


def _probes(ctx: PlanContext) -> list[PodShape]:
    """Shapes for "the largest gang that fits": the waiting gangs' largest members,
    else the typical GPU shapes of the cluster."""
    out: list[PodShape] = []
    for d in ctx.demands:
        big = max(d.gang.roles, key=lambda r: (r.shape.gpu_demand_milli, r.shape.request("cpu")))
        if big.shape not in out:
            out.append(big.shape)
        if len(out) >= 3:
            return out
    if not out:
        out = typical_shapes(ctx.workload)[:3]
    return out


def _largest_per_model(snap: Snapshot) -> dict[str, int]:
    """Per GPU model: the most whole GPUs free on one schedulable node."""
    ok = snap.ready & ~snap.unschedulable & (snap.gpu_total > 0)
    full = (snap.gpu_free >= 1000).sum(axis=1)
    out: dict[str, int] = {}
    for i, model in enumerate(snap.gpu_models):
        sel = ok & (snap.gpu_model == i)
        out[model or "(unlabelled)"] = int(full[sel].max()) if sel.any() else 0
    return out


def _largest_rows(
    snap: Snapshot, now: dict[str, int], moves: Sequence[Move], ctx: PlanContext
) -> list[LargestFit]:
    with snap.what_if():
        apply_moves(snap, moves)
        after = _largest_per_model(snap)
    return [LargestFit(m, now[m], after.get(m, 0)) for m in sorted(now)]
