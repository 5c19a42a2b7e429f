"""Release stale partial gangs: the roll-back a gang timeout promises, done from outside
the scheduler.

A gang with some but fewer than minAvailable members running holds resources nobody can
use -- it happens when pods bypass gang scheduling. Once it has waited past its gang
timeout (``corral.dev/gang-timeout``, Volcano's ``volcano.sh/sla-waiting-time``,
scheduler-plugins' ``scheduleTimeoutSeconds``, else the configured default), its running
members are evicted together, so the whole gang can start again when it fits.

A gang whose missing members fit now is left alone: the scheduler will complete it.
The wait is counted from the creation of its oldest pending member; with no pending
member, from the PodGroup's last condition change, else its newest member's creation.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from gangplace.engine import place_gang
from gangplace.engine.timeparse import TimeFormatError, format_duration, parse_time

from descheduler.planning.context import PlanContext, move_way
from descheduler.planning.gang_demand import demand_of
from descheduler.planning.gang_views import GangView
from descheduler.planning.plan_model import Move, PodMove
from descheduler.planning.what_if import remove_pods

if TYPE_CHECKING:
    from gangplace.engine import GangOptions

__all__ = ["release_stale_gangs", "waiting_since"]


def _created(text: str) -> datetime | None:
    try:
        return parse_time(text) if text else None
    except TimeFormatError:
        return None


def waiting_since(view: GangView) -> datetime | None:
    pending = [t for t in (_created(p.created) for p in view.pending) if t is not None]
    if pending:
        return min(pending)
    if view.podgroup is not None and view.podgroup.last_transition is not None:
        return view.podgroup.last_transition
    stamps = [t for t in (_created(p.created) for p in view.pods) if t is not None]
    if stamps:
        return max(stamps)
    return view.created


def _dry(ctx: PlanContext) -> GangOptions:
    return replace(ctx.options, dry_run=True)


def release_stale_gangs(ctx: PlanContext) -> list[Move]:
    """Moves releasing every stale partial gang the rules and limits allow, oldest
    first; their pods are removed from the snapshot (nothing places them again).
    Gangs in ``ctx.scratch.started`` (their missing members fit now, placed on the snapshot by
    the planner) are left alone; for the others that is worked out here."""
    cfg = ctx.config.stale_gangs
    if not cfg.enabled:
        return []
    stale: list[tuple[datetime, GangView, float]] = []
    for v in ctx.views.values():
        running = len(v.running)
        if not v.is_gang or running == 0 or running >= v.min_available:
            continue
        since = waiting_since(v)
        timeout = v.timeout if v.timeout is not None else cfg.default_timeout
        if since is None or (ctx.now - since).total_seconds() <= timeout:
            continue
        if v.key in ctx.scratch.started:
            continue  # its missing members fit now: the scheduler completes the gang
        d = demand_of(v)
        if d is not None and place_gang(ctx.snap, d.gang, ctx.scorer, _dry(ctx)).ok:
            continue
        stale.append((since, v, timeout))
    moves: list[Move] = []
    for since, v, timeout in sorted(stale, key=lambda t: (t[0], t[1].key)):
        why = ctx.protected.get(v.key)
        if why is None and v.key in ctx.scratch.moved:
            why = "already moved by this plan"
        pods = v.placed
        victim = ctx.victim(v, evict_only=True)
        if why is None:
            why = ctx.victim_refusal(victim, capped=False)
        waited = format_duration((ctx.now - since).total_seconds())
        if why is not None:
            ctx.scratch.notes.append(f"stale {v.describe()} (waited {waited}) not released: {why}")
            continue
        remove_pods(ctx.snap, pods)
        ctx.scratch.budget.take(pods, v.queue)
        ctx.scratch.moved.add(v.key)
        pg = v.podgroup
        moves.append(
            Move(
                kind="release-stale",
                unit=v.key,
                namespace=v.namespace,
                gang=v.name,
                queue=v.queue,
                pods=[
                    PodMove(p.namespace, p.name, p.uid, p.node_name, None, p.shape.gpu_demand_milli)
                    for p in pods
                ],
                partial=False,
                cost=victim.cost,
                reason=f"{v.describe()} has had {len(v.running)} of its {v.min_available} "
                f"required members running for {waited}, past its gang timeout of "
                f"{format_duration(timeout)}; its running members are released so the gang "
                "can start again whole",
                podgroup=pg.name if pg is not None else None,
                podgroup_api=pg.api_group if pg is not None else None,
                **move_way(victim),
            )
        )
    return moves
