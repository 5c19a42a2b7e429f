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
5. When this search finds no move, the exact neighbourhood moves are tried
   (:mod:`~descheduler.planning.strategies.exact_moves.exact_moves`); when they find
   none either, and ``capacity_room`` is on, workloads may be suspended without being
   placed again (:mod:`~descheduler.planning.strategies.capacity_room.capacity_room`).

Steps 2 and 3 are :mod:`.room_options`, step 4 :mod:`.room_search`; this module serves
the waiting gangs one by one and turns the victims found into moves.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gangplace.engine import place_gang
from gangplace.engine.feasibility import member_capacity
from gangplace.engine.timeparse import format_duration, format_time

from descheduler.planning.context import PlanContext, Victim, victim_move
from descheduler.planning.gang_demand import Demand
from descheduler.planning.plan_model import Move, Unserved
from descheduler.planning.strategies.capacity_room.capacity_room import capacity_room
from descheduler.planning.strategies.exact_moves.exact_moves import exact_room
from descheduler.planning.strategies.make_room.room_options import (
    Candidates,
    NodeOption,
    Room,
    driver,
    node_option,
    shortlist,
)
from descheduler.planning.strategies.make_room.room_search import prune, search
from descheduler.planning.what_if import Trial, freed

__all__ = ["ROOM_TAKEN", "make_room"]

# How the reason of a waiting gang whose room went to other pods begins.
ROOM_TAKEN = "room was made for it"


def _moves(ctx: PlanContext, d: Demand, victims: Sequence[Victim], trial: Trial) -> list[Move]:
    out = []
    for v in sorted(victims, key=lambda v: (v.cost, v.view.key)):
        what = "members above minAvailable of " if v.partial else "whole " if v.view.is_gang else ""
        out.append(
            victim_move(
                v,
                trial.targets,
                kind="make-room",
                partial=v.partial,
                reason=f"moves {what}{v.view.describe()} to make room for waiting gang "
                f"{d.key} ({d.describe()})",
                for_gang=d.key,
            )
        )
    return out


def _room_for(ctx: PlanContext, cand: Candidates, d: Demand) -> list[Move] | str:
    snap = ctx.snap
    shape, need = driver(d)
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
    short = shortlist(ctx, arrays, shape, nodes, ctx.config.make_room.candidate_nodes)
    refused: list[str] = []

    def option(n: int, excluded: set[str]) -> NodeOption | None:
        pods_here = [p for p in cand.by_node.get(n, ()) if ctx.movable(ctx.view_of(p))]
        if not pods_here:
            return None
        target = min(deficit, int(gain[n]))
        return node_option(ctx, room, pods_here, n, shape, target, excluded, d, refused)

    # Exact options are worked out a batch at a time, best estimates first: most
    # gangs find room in the first batch.
    options: list[NodeOption] = []
    why = "no set of movable gangs on the examined nodes makes room"
    for lo, hi in _batches(short.size):
        options += [o for o in (option(n, set()) for n in short[lo:hi].tolist()) if o]
        victims, why = search(ctx, d, options, deficit, option)
        if victims is not None:
            break
    else:
        if not options and refused:
            return f"no gang it needs may be moved for it: {refused[0]}"
        return why
    trial, victims = prune(ctx, d, victims)
    moves = _moves(ctx, d, victims, trial)
    trial.keep()
    for v in victims:
        ctx.scratch.budget.take(v.pods, v.view.queue)
        ctx.scratch.moved.add(v.view.key)
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
    placed. Unserved gangs go to ``ctx.scratch.unserved``."""
    demands = ctx.blocked()
    if not demands:
        return []
    snap = ctx.snap
    cand = Candidates(ctx)
    moves: list[Move] = []
    limit = ctx.config.make_room.max_waiting_gangs
    no_room = _NoRoom(ctx)
    for i, d in enumerate(demands):
        if place_gang(snap, d.gang, ctx.scorer, ctx.options).ok:
            no_room.clear()  # the snapshot changed
            continue  # it starts as things are (placed: later gangs see it)
        if not ctx.config.make_room.enabled:
            ctx.scratch.unserved.append(Unserved(d.key, "make_room is disabled"))
            continue
        if i >= limit:
            ctx.scratch.unserved.append(
                Unserved(d.key, f"beyond the first {limit} waiting gangs (max_waiting_gangs)")
            )
            continue
        if ctx.scratch.budget.exhausted():
            full = "the eviction limit of this run is reached"
            ctx.scratch.unserved.append(Unserved(d.key, _truthful(ctx, cand, d, full, named=True)))
            continue
        never = next((p for p in d.view.pods if p.preemption_policy == "Never"), None)
        if never is not None:
            ctx.scratch.unserved.append(
                Unserved(
                    d.key,
                    f"pod {never.key} says preemptionPolicy: Never: no gang is moved for it",
                )
            )
            continue
        taken = _room_taken(ctx, d)
        if taken is not None:
            ctx.scratch.unserved.append(Unserved(d.key, taken))
            continue
        known = no_room.get(d)
        if known is not None:
            ctx.scratch.limited, why = known
            ctx.scratch.unserved.append(Unserved(d.key, why))
            continue
        ctx.scratch.limited = False
        found = _room_or_exact(ctx, cand, d)
        if isinstance(found, str):  # capacity blocks it: suspending may (opt-in)
            found = capacity_room(ctx, d, cand.retire) or found
        if isinstance(found, str):
            if ctx.scratch.limited:
                found = _truthful(ctx, cand, d, found)
            ctx.scratch.unserved.append(Unserved(d.key, found))
            no_room.put(d, found, ctx.scratch.limited)
            continue
        no_room.clear()
        moves.extend(found)  # the kept trial placed the gang too
    return moves


class _NoRoom:
    """Waiting gangs of one shape found no room since the plan last changed anything:
    a later one of the same shape gets the same answer without searching again.

    The search for a gang reads the snapshot, the moves, budget and candidates so far
    (all unchanged while gangs find no room and none is placed: a failed search leaves
    them as it found them), and of the gang only its members' shapes and counts, its
    priority, namespace and queue -- and its name, which only keeps the gang itself
    from being a victim (so only gangs with no pod placed are answered here) and
    appears in reasons (an answer that names its gang is not reused). Off with
    ``capacity_room``, which also reads how long the gang has waited."""

    def __init__(self, ctx: PlanContext) -> None:
        self.on = not ctx.config.capacity_room.enabled
        self.known: dict[tuple[object, ...], tuple[bool, str, str]] = {}

    @staticmethod
    def _key(d: Demand) -> tuple[object, ...] | None:
        v = d.view
        if v.placed or v.running:
            return None
        g = d.gang
        return (
            g.roles,
            g.min_available,
            g.namespace,
            g.queue,
            g.priority,
            v.priority,
            v.namespace,
            v.queue,
            d.estimated,
        )

    def get(self, d: Demand) -> tuple[bool, str] | None:
        key = self._key(d) if self.on else None
        hit = self.known.get(key) if key is not None else None
        if hit is None:
            return None
        return hit[0], hit[1]

    def put(self, d: Demand, why: str, limited: bool) -> None:
        key = self._key(d) if self.on else None
        if key is not None and d.key not in why:
            self.known[key] = (limited, why, d.key)

    def clear(self) -> None:
        self.known.clear()


def _room_or_exact(ctx: PlanContext, cand: Candidates, d: Demand) -> list[Move] | str:
    found = _room_for(ctx, cand, d)
    if isinstance(found, str):  # the search found none: the exact moves may
        found = exact_room(ctx, d, cand.retire) or found
    return found


def _truthful(
    ctx: PlanContext, cand: Candidates, d: Demand, why: str, *, named: bool = False
) -> str:
    """The reason ``d`` gets no room, told truly: a limit or the work-at-risk cap is
    named only when planning again without them (:meth:`PlanContext.lifted`) finds
    moves that let ``d`` start -- ``why`` itself when it ``named`` the limit, else the
    first limit those moves break; otherwise what that planning says stops it. Nothing
    of that planning is kept."""
    snap = ctx.snap
    token = snap.fork()
    moved, alive, notes = set(ctx.scratch.moved), cand.alive.copy(), len(ctx.scratch.notes)
    try:
        with ctx.lifted():
            found = _room_or_exact(ctx, cand, d)
    finally:
        snap.revert(token)
        ctx.scratch.moved, cand.alive = moved, alive
        del ctx.scratch.notes[notes:]
    if isinstance(found, str):
        return found
    if named:
        return why
    hits = _limits_hit(ctx, found)
    if not hits:  # moves within the limits exist that the search, held back, missed
        return why
    return f"the moves that would let it start are refused: {hits[0]}"


def _limits_hit(ctx: PlanContext, moves: Sequence[Move]) -> list[str]:
    """What the configured limits and caps say of ``moves`` (found without them),
    counted in order on this plan's budget."""
    out: list[str] = []
    saved = ctx.scratch.budget.snapshot()
    limited = ctx.scratch.limited
    try:
        for m in moves:
            view = ctx.views[m.unit]
            keys = {pm.key for pm in m.pods}
            pods = [p for p in view.placed if p.key in keys]
            v = ctx.victim(view, None if len(pods) == len(view.placed) else pods)
            no = ctx.victim_refusal(v)
            if no is not None:
                out.append(no)
            else:
                ctx.scratch.budget.take(v.pods, view.queue)
    finally:
        ctx.scratch.budget.restore(saved)
        ctx.scratch.limited = limited
    return out
