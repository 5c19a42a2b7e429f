"""Which victims let a waiting gang start: node options taken best first, joined within
the limits and disruption budgets, each set tried with the engine, and pruned to what
the move needs."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Literal, overload

from descheduler.planning.context import PlanContext, Victim
from descheduler.planning.gang_demand import Demand
from descheduler.planning.strategies.make_room.room_options import NodeOption
from descheduler.planning.what_if import Trial, try_move

__all__ = ["merge", "prune", "search"]

_MAX_TRIALS = 24


@overload
def merge(
    ctx: PlanContext, chosen: dict[str, Victim], more: Sequence[Victim], check: Literal[False]
) -> dict[str, Victim]: ...


@overload
def merge(
    ctx: PlanContext, chosen: dict[str, Victim], more: Sequence[Victim], check: bool = True
) -> dict[str, Victim] | None: ...


def merge(
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
    budget = ctx.scratch.budget
    saved = budget.snapshot()
    try:
        for v in out.values():
            if ctx.victim_refusal(v) is not None:
                return None
            budget.take(v.pods, v.view.queue)
    finally:
        budget.restore(saved)
    return out


def search(
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
        merged = merge(ctx, chosen, opt.victims)
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
                chosen = merge(ctx, chosen, o.victims, check=False)
    return None, why


def prune(ctx: PlanContext, d: Demand, victims: list[Victim]) -> tuple[Trial, list[Victim]]:
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
