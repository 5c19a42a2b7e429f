"""Where room could be made for a waiting gang (room_options): the movable pods, the
shortlist of nodes worth examining, and per node the units whose departure lets it take
the gang's members."""

from __future__ import annotations

from typing import Any

import numpy as np

from descheduler.planning.context import PlanContext
from descheduler.planning.gang_demand import Demand
from descheduler.planning.strategies.make_room.room_options import (
    Candidates,
    Room,
    capacity,
    driver,
    node_option,
    shortlist,
)
from tests.builders.descheduler_cluster import gang, gpu_node, pod
from tests.builders.plan_context import context


def middle_node_cluster(**running: Any) -> list[Any]:
    """Three 8-GPU nodes at 7/6/7 GPUs used; a 4-GPU job waits."""
    items = [gpu_node(f"n{i}") for i in range(3)]
    for n, smalls in (("n0", "abc"), ("n1", "ab"), ("n2", "abc")):
        items.append(pod(f"big-{n[1]}", n, 4, **running))
        items += [pod(f"s{n[1]}{c}", n, 1, **running) for c in smalls]
    items += gang("llm", [], 4, pending=1)
    return items


def waiting(ctx: PlanContext) -> Demand:
    (d,) = ctx.blocked()
    return d


def node(ctx: PlanContext, name: str) -> int:
    return ctx.snap.node_index[name]


def test_the_driver_is_the_largest_role_still_needed() -> None:
    items = [gpu_node("n0", 2), *gang("mix", ["n0"], 1, pending=2)]
    ctx = context(items)
    d = next(d for d in ctx.demands if d.key == "default/mix")
    shape, need = driver(d)
    assert (shape.gpu_count, need) == (1, 2)


def test_candidates_are_the_placed_movable_pods_by_node() -> None:
    ctx = context(middle_node_cluster())
    cand = Candidates(ctx)
    names = {n: sorted(p.name for p in ps) for n, ps in cand.by_node.items()}
    assert names[node(ctx, "n1")] == ["big-1", "s1a", "s1b"]
    assert sorted(v.key for v in cand.views) == sorted(
        f"default/pod:{p}" for n in range(3) for p in [f"big-{n}"]
    ) + sorted(f"default/pod:s{n}{c}" for n, cs in ((0, "abc"), (1, "ab"), (2, "abc")) for c in cs)


def test_a_retired_unit_leaves_the_arrays_of_the_shortlist() -> None:
    ctx = context(middle_node_cluster())
    cand = Candidates(ctx)
    n1 = node(ctx, "n1")
    stuck = cand.stuck()
    before = cand.arrays(stuck)
    assert int(before["count"][n1]) == 3 and before["gpu_total"][n1] == 6000
    cand.retire(ctx.views["default/pod:s1a"])
    after = cand.arrays(stuck)
    assert int(after["count"][n1]) == 2 and after["gpu_total"][n1] == 5000


def test_a_pod_with_no_room_on_any_other_node_is_stuck() -> None:
    """Two 8-GPU nodes at 7 GPUs used: a 4-GPU pod fits on no other node, a 1-GPU pod does."""
    items = [gpu_node("n0"), gpu_node("n1")]
    items += [pod("big-0", "n0", 4), pod("mid-0", "n0", 3)]
    items += [pod("big-1", "n1", 4), pod("mid-1", "n1", 2), pod("one-1", "n1", 1)]
    ctx = context(items)
    cand = Candidates(ctx)
    stuck = {p.name: bool(cand.stuck()[cand.pos[id(p)]]) for p in ctx.snap.pods if p.node >= 0}
    assert stuck == {"big-0": True, "mid-0": True, "big-1": True, "mid-1": True, "one-1": False}
    # with n0 reserved for the waiting gang, nowhere else is left for n1's one-GPU pod
    reserved = np.array([node(ctx, "n0")], dtype=np.int64)
    one = next(p for p in ctx.snap.pods if p.name == "one-1")
    assert bool(cand.stuck(reserved)[cand.pos[id(one)]])


def test_the_shortlist_puts_the_node_that_needs_the_least_moved_first() -> None:
    """n1 needs two one-GPU pods moved for four free GPUs, n0 and n2 three each."""
    ctx = context(middle_node_cluster())
    cand = Candidates(ctx)
    shape, _ = driver(waiting(ctx))
    arrays = cand.arrays(cand.stuck())
    nodes = np.array([node(ctx, n) for n in ("n0", "n1", "n2")], dtype=np.int64)
    short = shortlist(ctx, arrays, shape, nodes, 3)
    assert ctx.snap.node_names[int(short[0])] == "n1"
    assert shortlist(ctx, arrays, shape, nodes, 1).tolist() == [node(ctx, "n1")]


def test_a_node_option_holds_the_units_whose_departure_makes_the_room() -> None:
    ctx = context(middle_node_cluster())
    d = waiting(ctx)
    cand = Candidates(ctx)
    room = Room(cand, np.zeros(0, dtype=np.int64))
    shape, _ = driver(d)
    n1 = node(ctx, "n1")
    assert capacity(ctx, shape, n1) == 0
    opt = node_option(ctx, room, cand.by_node[n1], n1, shape, 1, set(), d)
    assert opt is not None
    assert (opt.node, opt.slots, opt.viable) == (n1, 1, True)
    assert sorted(v.view.key for v in opt.victims) == ["default/pod:s1a", "default/pod:s1b"]
    assert opt.cost == sum(v.cost for v in opt.victims)
    # the what-if is undone: the node is as it was
    assert capacity(ctx, shape, n1) == 0


def test_an_excluded_unit_is_not_a_victim_and_a_refused_one_says_why() -> None:
    ctx = context(middle_node_cluster())
    d = waiting(ctx)
    cand = Candidates(ctx)
    room = Room(cand, np.zeros(0, dtype=np.int64))
    shape, _ = driver(d)
    n1 = node(ctx, "n1")
    # without s1b, the room is made by moving the node's 4-GPU pod (s1a alone frees 3)
    opt = node_option(ctx, room, cand.by_node[n1], n1, shape, 1, {"default/pod:s1b"}, d)
    assert opt is not None
    assert [v.view.key for v in opt.victims] == ["default/pod:big-1"]
    # every unit above the waiting gang's priority is refused, with the rule that says so
    high = context(middle_node_cluster(priority=2_000_000))
    d = waiting(high)
    cand = Candidates(high)
    refused: list[str] = []
    no = node_option(
        high,
        Room(cand, np.zeros(0, dtype=np.int64)),
        cand.by_node[n1],
        n1,
        shape,
        1,
        set(),
        d,
        refused,
    )
    assert no is None
    assert refused and all("higher than" in r and "default/llm" in r for r in refused)
