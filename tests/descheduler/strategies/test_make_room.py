"""make_room on its own: it moves what lets the waiting gangs that cannot start now
start, leaves the snapshot with the moves made, and says why a gang is not served."""

from __future__ import annotations

from typing import Any

from descheduler import parse_config
from descheduler.planning.strategies import STRATEGIES, make_room
from tests.builders.descheduler_cluster import gang, gpu_node, pod
from tests.descheduler.strategies.planning import context, pods_of


def middle_node_cluster() -> list[Any]:
    """Three 8-GPU nodes at 7/6/7 GPUs used; a 4-GPU job waits."""
    items = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 4), pod("s0a", "n0", 1), pod("s0b", "n0", 1), pod("s0c", "n0", 1)]
    items += [pod("big-1", "n1", 4), pod("s1a", "n1", 1), pod("s1b", "n1", 1)]
    items += [pod("big-2", "n2", 4), pod("s2a", "n2", 1), pod("s2b", "n2", 1), pod("s2c", "n2", 1)]
    items += gang("llm", [], 4, pending=1)
    return items


def test_it_is_a_strategy_of_the_planner_after_the_release_of_stale_gangs() -> None:
    names = [s.__name__ for s in STRATEGIES]
    assert names.index("release_stale_gangs") < names.index("make_room")


def test_it_moves_the_small_pods_off_the_middle_node_for_the_waiting_gang() -> None:
    ctx = context(middle_node_cluster())
    assert [d.key for d in ctx.blocked()] == ["default/llm"]
    moves = make_room(ctx)
    assert pods_of(moves) == ["s1a", "s1b"]
    assert all(m.for_gang == "default/llm" and m.kind == "make-room" for m in moves)
    assert sorted(pm.target or "" for m in moves for pm in m.pods) == ["n0", "n2"]
    assert ctx.unserved == []
    # the snapshot is left with the moves made and the gang placed: n1 is full
    n1 = ctx.snap.node_index["n1"]
    assert int((ctx.snap.gpu_free[n1] >= 1000).sum()) == 0


def test_nothing_blocked_nothing_moved() -> None:
    items = [gpu_node("n0"), *gang("llm", [], 4, pending=1)]
    ctx = context(items)
    assert ctx.started == {"default/llm"} and ctx.blocked() == []
    assert make_room(ctx) == []


def test_a_gang_it_does_not_serve_is_named_with_why() -> None:
    ctx = context(middle_node_cluster(), parse_config({"make_room": {"enabled": False}}))
    assert make_room(ctx) == []
    assert [(u.gang, u.reason) for u in ctx.unserved] == [("default/llm", "make_room is disabled")]
    ctx = context(middle_node_cluster(), parse_config({"limits": {"max_evictions_per_run": 0}}))
    assert make_room(ctx) == []
    assert [u.reason for u in ctx.unserved] == ["the eviction limit of this run is reached"]
