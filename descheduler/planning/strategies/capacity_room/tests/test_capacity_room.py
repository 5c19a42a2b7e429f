"""capacity_room (opt-in): a gang that capacity blocks -- what would make room fits
nowhere else -- gets room by suspending workloads that are not placed again: only
after it waited long enough, only workloads with a suspend switch, of lower priority
(or, with the second switch, smaller ones of its own), least work at risk first, within
the caps; never a higher priority."""

from __future__ import annotations

from typing import Any

from descheduler import parse_config, plan, state_from_list
from descheduler.planning.strategies.make_room.make_room import make_room
from tests.builders import objects as b
from tests.builders.descheduler_cluster import NOW, as_list, gang, gpu_node, pod
from tests.builders.plan_context import context, pods_of

ON = {"capacity_room": {"enabled": True}}
TWO_HOURS_AGO = "2026-12-02T10:00:00Z"


def job(name: str, node: str, gpus: int, **kw: Any) -> list[Any]:
    """A Job of one pod (backoffLimit 0: it moves only by suspending)."""
    return [
        b.job(name, backoff_limit=0, uid=f"uid-owner-{name}"),
        pod(name, node, gpus, owner_kind="Job", owner=name, **kw),
    ]


def full_cluster(*, waiting_priority: int = 1000, created: str = TWO_HOURS_AGO) -> list[Any]:
    """Two 8-GPU nodes, every GPU used by 4-GPU Jobs: nothing moved fits again. A 4-GPU
    gang waits, made two hours ago."""
    items: list[Any] = [gpu_node("n0"), gpu_node("n1")]
    items += job("a", "n0", 4, priority=0, started="2026-12-02T11:00:00Z")  # 4 GPU-hours
    items += job("b", "n0", 4, priority=0)  # 20 minutes: 1.33 GPU-hours at risk
    items += job("c", "n1", 4, priority=2000)
    items += job("d", "n1", 4, priority=1000)
    items += gang("llm", [], 4, pending=1, priority=waiting_priority, created=created)
    return items


def test_it_is_off_by_default() -> None:
    ctx = context(full_cluster())
    assert make_room(ctx) == []
    (reason,) = [u.reason for u in ctx.scratch.unserved]
    assert reason.startswith("the gangs that could make room would not fit again elsewhere")


def test_the_lower_priority_workload_with_least_work_at_risk_is_suspended() -> None:
    ctx = context(full_cluster(), parse_config(ON))
    moves = make_room(ctx)
    assert pods_of(moves) == ["b"]
    (m,) = moves
    assert (m.method, m.for_gang, m.workloads) == ("suspend", "default/llm", ["default/Job/b"])
    assert [pm.target for pm in m.pods] == [None]
    assert m.at_risk == 4 / 3
    assert "which capacity has blocked for 2h: it waits, suspended" in m.reason
    assert ctx.scratch.unserved == []


def test_the_whole_plan_keeps_it_and_the_gang_starts() -> None:
    p = plan(state_from_list(as_list(full_cluster()), NOW), parse_config(ON))
    assert [m.unit for m in p.moves] == ["default/pod:b"]
    assert p.waiting_before == ["default/llm"] and p.waiting_after == []


def test_never_a_higher_or_equal_priority_and_never_too_early() -> None:
    # waiting at priority 0: every Job is of its priority or higher
    ctx = context(full_cluster(waiting_priority=0), parse_config(ON))
    assert make_room(ctx) == []
    # made ten minutes ago: it has not waited the hour of capacity_room.after
    ctx = context(full_cluster(created="2026-12-02T11:50:00Z"), parse_config(ON))
    assert make_room(ctx) == []


def test_smaller_equal_priority_workloads_only_with_the_second_switch() -> None:
    items = full_cluster(waiting_priority=0)
    items += gang("wide", [], 8, pending=1, priority=0, created=TWO_HOURS_AGO)
    both = {"capacity_room": {"enabled": True, "equal_priority": True}}
    ctx = context(items, parse_config(both))
    moves = make_room(ctx)
    # for the 4-GPU gang only Jobs holding fewer than 4 GPUs of priority 0 may go: none
    # does; for the 8-GPU one, a and b (4 each, priority 0) go, cheapest first
    assert {m.for_gang for m in moves} == {"default/wide"}
    assert pods_of(moves) == ["a", "b"]
    assert all(m.priority == 0 for m in moves)


def test_the_work_at_risk_cap_holds() -> None:
    capped = {**ON, "moves": {"max_gpu_hours_at_risk": 1.0}}
    ctx = context(full_cluster(), parse_config(capped))
    assert make_room(ctx) == []


def test_the_room_is_held_for_hold_for_whatever_resume_after_says() -> None:
    p = plan(state_from_list(as_list(full_cluster()), NOW), parse_config(ON))
    (m,) = p.moves
    assert m.hold_for == 900.0 and m.to_dict()["hold_seconds"] == 900.0
    assert m.reason.endswith("until that gang is bound or the room held for it (15m) is released")
    other = {"capacity_room": {"enabled": True, "hold_for": "40m"}, "moves": {"resume_after": "2h"}}
    (m,) = plan(state_from_list(as_list(full_cluster()), NOW), parse_config(other)).moves
    assert m.hold_for == 2400.0
