"""make_room on its own: it moves what lets the waiting gangs that cannot start now
start, leaves the snapshot with the moves made, and says why a gang is not served."""

from __future__ import annotations

from typing import Any

from descheduler import parse_config
from descheduler.planning.strategies.make_room.make_room import make_room
from descheduler.planning.strategies.run_order import STRATEGIES
from tests.builders.descheduler_cluster import gang, gpu_node, pod
from tests.builders.plan_context import context, pods_of


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
    assert ctx.scratch.unserved == []
    # the snapshot is left with the moves made and the gang placed: n1 is full
    n1 = ctx.snap.node_index["n1"]
    assert int((ctx.snap.gpu_free[n1] >= 1000).sum()) == 0


def test_nothing_blocked_nothing_moved() -> None:
    items = [gpu_node("n0"), *gang("llm", [], 4, pending=1)]
    ctx = context(items)
    assert ctx.scratch.started == {"default/llm"} and ctx.blocked() == []
    assert make_room(ctx) == []


def test_a_gang_it_does_not_serve_is_named_with_why() -> None:
    ctx = context(middle_node_cluster(), parse_config({"make_room": {"enabled": False}}))
    assert make_room(ctx) == []
    assert [(u.gang, u.reason) for u in ctx.scratch.unserved] == [
        ("default/llm", "make_room is disabled")
    ]
    ctx = context(middle_node_cluster(), parse_config({"limits": {"max_evictions_per_run": 0}}))
    assert make_room(ctx) == []
    assert [u.reason for u in ctx.scratch.unserved] == ["the eviction limit of this run is reached"]


# --- work at risk: moves charged by the work they lose ---------------------------------

HOUR_AGO = "2026-12-02T11:00:00Z"
THREE_HOURS_AGO = "2026-12-02T09:00:00Z"


def risky_middle_node_cluster() -> list[Any]:
    """7/6/7 again, but n1's two small pods ran three hours without a checkpoint (3
    GPU-hours at risk each) while n0's three checkpointed five minutes ago: moving three
    pods off n0 loses less than moving two off n1."""
    items = [gpu_node(f"n{i}") for i in range(3)]
    fresh = {"corral.dev/last-checkpoint": "2026-12-02T11:55:00Z"}
    items += [pod("big-0", "n0", 4)]
    items += [pod(f"s0{c}", "n0", 1, started=THREE_HOURS_AGO, annotations=fresh) for c in "abc"]
    items += [pod("big-1", "n1", 4)]
    items += [pod(f"s1{c}", "n1", 1, started=THREE_HOURS_AGO) for c in "ab"]
    items += [pod("big-2", "n2", 4), pod("s2a", "n2", 1), pod("s2b", "n2", 1)]
    items += [pod("s2c", "n2", 1), *gang("llm", [], 4, pending=1)]
    return items


def test_the_victims_with_the_least_work_at_risk_go() -> None:
    ctx = context(risky_middle_node_cluster())
    moves = make_room(ctx)
    assert pods_of(moves) == ["s0a", "s0b", "s0c"]
    assert [round(m.at_risk, 3) for m in moves] == [0.083] * 3
    assert moves[0].to_dict()["gpu_hours_at_risk"] == 0.083


def test_without_a_checkpoint_the_whole_run_is_at_risk() -> None:
    """The same pods, none saying a checkpoint: n0's and n1's ran three hours (3
    GPU-hours each at risk); n2's three, started twenty minutes ago, go."""
    items = risky_middle_node_cluster()
    for o in items:
        o["metadata"].get("annotations", {}).pop("corral.dev/last-checkpoint", None)
    moves = make_room(context(items))
    assert pods_of(moves) == ["s2a", "s2b", "s2c"]
    assert [round(m.at_risk, 3) for m in moves] == [0.333] * 3


def test_a_workload_above_the_cap_is_never_moved_and_the_cap_is_named() -> None:
    cfg = parse_config({"moves": {"max_gpu_hours_at_risk": 0.05}})
    ctx = context(risky_middle_node_cluster(), cfg)
    assert make_room(ctx) == []
    (reason,) = [u.reason for u in ctx.scratch.unserved]
    assert reason.startswith("the moves that would let it start are refused: pod default/s0")
    assert reason.endswith(
        "has 0.1 GPU-hours of work at risk (done since its last checkpoint), above "
        "moves.max_gpu_hours_at_risk (0.05)"
    )
    lifted = parse_config({"moves": {"max_gpu_hours_at_risk": None}})
    assert pods_of(make_room(context(risky_middle_node_cluster(), lifted))) == [
        "s0a",
        "s0b",
        "s0c",
    ]


def test_a_bad_checkpoint_value_is_noted_and_read_as_none() -> None:
    items = risky_middle_node_cluster()
    (s0a,) = [o for o in items if o["metadata"]["name"] == "s0a"]
    s0a["metadata"]["annotations"]["corral.dev/last-checkpoint"] = "yesterday"
    ctx = context(items)
    make_room(ctx)
    assert any(
        'pod default/s0a: corral.dev/last-checkpoint: "yesterday" is not a time' in n
        and "read as no checkpoint" in n
        for n in ctx.scratch.notes
    )


# --- reasons that tell the truth ----------------------------------------------------------


def full_cluster() -> list[Any]:
    """Three 8-GPU nodes, every GPU used: nothing moved would fit again elsewhere."""
    items = [gpu_node(f"n{i}") for i in range(3)]
    for i in range(3):
        items += [pod(f"big-{i}", f"n{i}", 4)] + [pod(f"s{i}{k}", f"n{i}", 1) for k in range(4)]
    return [*items, *gang("llm", [], 4, pending=1)]


def test_a_limit_is_named_only_where_lifting_it_would_start_the_gang() -> None:
    per_node = parse_config({"limits": {"max_evictions_per_node": 1}})
    ctx = context(middle_node_cluster(), per_node)
    assert make_room(ctx) == []
    assert [u.reason for u in ctx.scratch.unserved] == [
        "the moves that would let it start are refused: max_evictions_per_node (1, node n1)"
    ]
    # on a full cluster lifting the limit starts nothing: the limit is not the reason
    for limits in ({"max_evictions_per_node": 1}, {"max_evictions_per_run": 1}):
        ctx = context(full_cluster(), parse_config({"limits": limits}))
        assert make_room(ctx) == []
        (reason,) = [u.reason for u in ctx.scratch.unserved]
        assert reason.startswith("the gangs that could make room would not fit again elsewhere")
        assert "limit" not in reason


def test_a_used_up_run_names_its_limit_only_where_lifting_it_helps() -> None:
    ctx = context(full_cluster(), parse_config({"limits": {"max_evictions_per_run": 0}}))
    assert make_room(ctx) == []
    (reason,) = [u.reason for u in ctx.scratch.unserved]
    assert reason.startswith("the gangs that could make room would not fit again elsewhere")


def test_explain_says_a_workload_above_the_cap_is_not_moved() -> None:
    from descheduler import state_from_list
    from descheduler.planning.planner import move_verdict
    from tests.builders.descheduler_cluster import NOW, as_list

    state = state_from_list(as_list(risky_middle_node_cluster()), NOW)
    cfg = parse_config({"moves": {"max_gpu_hours_at_risk": 2}})
    assert move_verdict(state, cfg, "default/pod:s1a") == (
        "not moved: pod default/s1a has 3.0 GPU-hours of work at risk (done since its last "
        "checkpoint), above moves.max_gpu_hours_at_risk (2)"
    )
    assert move_verdict(state, cfg, "default/pod:s0a").startswith("may be moved by evict")
