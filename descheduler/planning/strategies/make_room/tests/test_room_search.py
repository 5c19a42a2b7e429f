"""Which victims let a waiting gang start (room_search): node options joined within the
limits, each set tried with the engine, and pruned to what the move needs."""

from __future__ import annotations

from typing import Any

import numpy as np

from descheduler import DeschedulerConfig, parse_config
from descheduler.planning.context import PlanContext, Victim
from descheduler.planning.gang_demand import Demand
from descheduler.planning.strategies.make_room.room_options import (
    Candidates,
    NodeOption,
    Room,
    driver,
    node_option,
)
from descheduler.planning.strategies.make_room.room_search import merge, prune, search
from tests.builders.descheduler_cluster import gang, gpu_node, pod
from tests.builders.plan_context import context


def middle_node_cluster() -> list[Any]:
    """Three 8-GPU nodes at 7/6/7 GPUs used; a 4-GPU job waits."""
    items = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 4), pod("s0a", "n0", 1), pod("s0b", "n0", 1), pod("s0c", "n0", 1)]
    items += [pod("big-1", "n1", 4), pod("s1a", "n1", 1), pod("s1b", "n1", 1)]
    items += [pod("big-2", "n2", 4), pod("s2a", "n2", 1), pod("s2b", "n2", 1), pod("s2c", "n2", 1)]
    items += gang("llm", [], 4, pending=1)
    return items


def training_cluster(config: DeschedulerConfig | None = None) -> PlanContext:
    """A gang of four one-GPU members, two above its minAvailable of two, on two nodes."""
    items = [gpu_node("n0", 2), gpu_node("n1", 2)]
    items += gang("train", ["n0", "n0", "n1", "n1"], 1, min_member=2)
    return context(items, config)


def members(ctx: PlanContext, *names: str) -> Victim:
    view = ctx.views["default/train"]
    return ctx.victim(view, [p for p in view.placed if p.name in names])


def options_for(ctx: PlanContext, d: Demand) -> tuple[list[NodeOption], Any]:
    """Every node's option for ``d``, and how the search works one out again."""
    cand = Candidates(ctx)
    room = Room(cand, np.zeros(0, dtype=np.int64))
    shape, need = driver(d)

    def option(n: int, excluded: set[str]) -> NodeOption | None:
        pods_here = [p for p in cand.by_node.get(n, ()) if ctx.movable(ctx.view_of(p))]
        return node_option(ctx, room, pods_here, n, shape, need, excluded, d)

    return [o for o in (option(n, set()) for n in sorted(cand.by_node)) if o], option


def test_extras_of_one_gang_found_on_two_nodes_are_joined() -> None:
    ctx = training_cluster()
    a, c = members(ctx, "train-0"), members(ctx, "train-2")
    joined = merge(ctx, {"default/train": a}, [c])
    assert joined is not None
    (v,) = joined.values()
    assert v.partial and sorted(p.name for p in v.pods) == ["train-0", "train-2"]


def test_more_extras_than_the_gang_has_become_the_whole_gang() -> None:
    ctx = training_cluster()
    two = members(ctx, "train-0", "train-1")
    joined = merge(ctx, {"default/train": two}, [members(ctx, "train-2")])
    assert joined is not None
    (v,) = joined.values()
    assert not v.partial and len(v.pods) == 4
    # and a whole gang is not made partial again by a part found later
    again = merge(ctx, joined, [members(ctx, "train-3")])
    assert again is not None and len(again["default/train"].pods) == 4


def test_a_union_beyond_the_limits_is_refused_unless_unchecked() -> None:
    ctx = training_cluster(parse_config({"limits": {"max_evictions_per_run": 1}}))
    one = members(ctx, "train-0")
    assert merge(ctx, {}, [one]) is not None
    assert merge(ctx, {"default/train": one}, [members(ctx, "train-2")]) is None
    unchecked = merge(ctx, {"default/train": one}, [members(ctx, "train-2")], check=False)
    assert len(unchecked["default/train"].pods) == 2
    # asking the budget left it as it was
    assert ctx.scratch.budget.limit_reason(list(one.pods), "default") is None


def test_the_search_finds_the_cheapest_room_and_leaves_the_snapshot_as_it_was() -> None:
    ctx = context(middle_node_cluster())
    (d,) = ctx.blocked()
    before = ctx.snap.gpu_free.copy()
    options, remake = options_for(ctx, d)
    victims, why = search(ctx, d, options, 1, remake)
    assert victims is not None and why == ""
    assert sorted(v.view.key for v in victims) == ["default/pod:s1a", "default/pod:s1b"]
    assert (ctx.snap.gpu_free == before).all()


def test_the_search_says_why_when_the_room_needs_too_many_victims() -> None:
    ctx = context(middle_node_cluster(), parse_config({"make_room": {"max_victims_per_gang": 1}}))
    (d,) = ctx.blocked()
    options, remake = options_for(ctx, d)
    victims, why = search(ctx, d, options, 1, remake)
    assert victims is None
    assert why == "it would need more than 1 victim gangs (max_victims_per_gang)"


def test_prune_drops_the_victims_the_move_does_not_need() -> None:
    ctx = context(middle_node_cluster())
    (d,) = ctx.blocked()
    views = ctx.views
    extra = [ctx.victim(views[f"default/pod:{n}"]) for n in ("s1a", "s1b", "s0a")]
    trial, kept = prune(ctx, d, extra)
    try:
        assert sorted(v.view.key for v in kept) == ["default/pod:s1a", "default/pod:s1b"]
        assert set(trial.targets) == {id(p) for v in kept for p in v.pods}
    finally:
        trial.drop()
