"""The room a capacity room makes is held for its gang (``capacity_room.hold_for``): what
was suspended for it stays so until the gang is bound, gone, or the hold ends, and is
then resumed before anything else; while the hold lasts no workload of lower priority
than the gang is resumed; nothing stays suspended past the hold."""

from __future__ import annotations

from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from descheduler import ConfigError, parse_config, plan, state_from_list
from descheduler.planning.resume import (
    Mark,
    due_resumptions,
    held_first,
    mark_text,
    read_mark,
)
from descheduler.planning.state import ClusterState
from tests.builders import objects as b
from tests.builders.descheduler_cluster import EARLIER, NOW, as_list, gang, gpu_node, pod


def suspended(
    name: str,
    minutes_ago: float,
    for_gang: str | None,
    *,
    priority: int | None = 0,
    hold: float | None = None,
    now: datetime = NOW,
) -> dict[str, Any]:
    """A Job corral suspended ``minutes_ago``; ``hold``: minutes the room is held."""
    at = now - timedelta(minutes=minutes_ago)
    until = at + timedelta(minutes=hold) if hold is not None else None
    mark = mark_text("plan-x", at, for_gang, None, priority=priority, until=until)
    return b.job(
        name, uid=f"uid-owner-{name}", suspend=True, annotations={"corral.dev/suspended-by": mark}
    )


def state(items: list[Any], now: datetime = NOW) -> ClusterState:
    return state_from_list(as_list(items), now)


def waiting(name: str = "llm", priority: int = 1000) -> list[Any]:
    return list(gang(name, [], 4, pending=1, priority=priority))


def resumed(items: list[Any], now: datetime = NOW, **cfg: Any) -> list[tuple[str, str]]:
    """(name, reason) of each workload resumed, in order."""
    out = due_resumptions(state(items, now), parse_config(cfg))
    return [(r.workload.name, r.reason) for r in out if r.action == "resume"]


def test_hold_for_is_a_duration_above_zero_fifteen_minutes_by_default() -> None:
    assert parse_config({}).capacity_room.hold_for == 900.0
    assert parse_config({"capacity_room": {"hold_for": "1h"}}).capacity_room.hold_for == 3600.0
    for bad, allowed in (("0s", "allowed: a number > 0"), ("soon", "allowed: a duration")):
        with pytest.raises(ConfigError) as e:
            parse_config({"capacity_room": {"hold_for": bad}}, "config c.yaml")
        text = str(e.value)
        assert text.startswith("config c.yaml: capacity_room.hold_for: ") and allowed in text
        assert "\n" not in text


def test_the_mark_says_until_when_the_room_is_held_and_the_priority() -> None:
    until = NOW + timedelta(minutes=15)
    w = state([suspended("a", 0, "default/llm", priority=7, hold=15)]).workloads
    assert read_mark(w["default/Job/a"]) == Mark("plan-x", NOW, "default/llm", None, 7, until)
    # a hold that cannot be read ends at once: never kept suspended by mistake
    raw = '{"at":"2026-12-02T11:59:00Z","for":"default/llm","holdUntil":"later"}'
    odd = b.job("o", uid="u", suspend=True, annotations={"corral.dev/suspended-by": raw})
    mark = read_mark(state([odd]).workloads["default/Job/o"])
    assert mark is not None and mark.until == mark.at
    assert [n for n, _ in resumed([gpu_node("n0"), *waiting(), odd])] == ["o"]


def test_a_held_workload_waits_out_the_hold_not_resume_after() -> None:
    # suspended 11 minutes ago, room held 15: moves.resume_after (10m) does not end it
    items = [gpu_node("n0"), *waiting(), suspended("a", 11, "default/llm", hold=15)]
    assert resumed(items) == []
    later = NOW + timedelta(minutes=4)
    ((name, why),) = resumed(items, later)
    assert name == "a"
    assert why == (
        "the room held for gang default/llm since 15m ago was released at "
        "2026-12-02T12:04:00Z (capacity_room.hold_for): it is not bound"
    )


def test_a_held_workload_is_resumed_once_its_gang_is_bound_or_gone() -> None:
    held = suspended("a", 1, "default/llm", hold=15)
    bound = [gpu_node("n0"), *gang("llm", ["n0"], 4, priority=1000), held]
    assert resumed(bound) == [("a", "gang default/llm, which it made room for, is bound")]
    assert resumed([gpu_node("n0"), held]) == [
        ("a", "gang default/llm, which it made room for, is gone")
    ]


def test_what_was_suspended_for_a_room_is_resumed_first() -> None:
    """Older suspensions of other moves are due too; the held one goes first."""
    items = [
        gpu_node("n0"),
        *gang("llm", ["n0"], 4, priority=1000),
        suspended("old", 30, None, priority=5000),
        suspended("older", 40, "default/gone", priority=5000),
        suspended("held", 1, "default/llm", hold=15),
    ]
    assert [n for n, _ in resumed(items)] == ["held", "older", "old"]


def test_no_lower_priority_workload_is_resumed_while_the_room_is_held() -> None:
    items = [
        gpu_node("n0"),
        *waiting(priority=1000),
        suspended("held", 1, "default/llm", priority=0, hold=15),
        suspended("low", 30, None, priority=10),  # overdue, but it could take the room
        suspended("peer", 30, None, priority=1000),  # not lower: resumed
        suspended("high", 30, None, priority=2000),
        suspended("unknown", 30, None, priority=None),  # a mark that does not say
    ]
    assert sorted(n for n, _ in resumed(items)) == ["high", "peer", "unknown"]
    # the hold ends: the gang's own first, then the one it kept waiting
    after = NOW + timedelta(minutes=15)
    first, *rest = [n for n, _ in resumed(items, after)]
    assert first == "held" and sorted(rest) == ["high", "low", "peer", "unknown"]


# --- the planner counts the held room as the gang's ------------------------------------


def two_waiting(*, other_priority: int = 1000, hold: float | None = 15) -> list[Any]:
    """n0 has 4 GPUs free: the room made for llm by suspending Job b; every other GPU is
    taken by priority 2000. llm (1000) and other (older, so served first in its queue)
    each want 4 GPUs."""
    items: list[Any] = [gpu_node("n0"), gpu_node("n1")]
    for name, node in (("a", "n0"), ("c", "n1"), ("d", "n1")):
        items += [
            b.job(name, backoff_limit=0, uid=f"uid-owner-{name}"),
            pod(name, node, 4, owner_kind="Job", owner=name, priority=2000),
        ]
    items += gang("llm", [], 4, pending=1, priority=1000, created="2026-12-02T10:00:00Z")
    items += gang("other", [], 4, pending=1, priority=other_priority, created=EARLIER)
    items.append(suspended("b", 5, "default/llm", priority=0, hold=hold))
    return items


def test_the_held_room_is_planned_for_its_gang_not_for_another() -> None:
    on = parse_config({"capacity_room": {"enabled": True}})
    p = plan(state(two_waiting()), on)
    assert p.waiting_after == ["default/other"] and p.moves == []
    assert p.notes == [
        "room held for default/llm (priority 1000) until 2026-12-02T12:10:00Z "
        "(capacity_room.hold_for): planned for it ahead of waiting gangs of its priority or "
        "lower; corral resumes none of lower priority it suspended"
    ]
    # no hold (an older mark): the gang served first in its queue takes the room
    p = plan(state(two_waiting(hold=None)), on)
    assert p.waiting_after == ["default/llm"]
    # the hold over: the same
    p = plan(state(two_waiting(), NOW + timedelta(minutes=11)), on)
    assert p.waiting_after == ["default/llm"]
    # a gang of higher priority keeps its place: a hold never inverts priority
    p = plan(state(two_waiting(other_priority=1500)), on)
    assert p.waiting_after == ["default/llm"]


def fake(key: str, priority: int) -> Any:
    return SimpleNamespace(key=key, view=SimpleNamespace(priority=priority))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=8),
)
def test_held_gangs_go_ahead_only_of_their_priority_or_lower(
    gangs: list[tuple[int, bool]],
) -> None:
    demands = [fake(f"g{i}", prio * 100) for i, (prio, _) in enumerate(gangs)]
    holds = {d.key: (d.view.priority, NOW) for d, (_, h) in zip(demands, gangs, strict=True) if h}
    out = held_first(demands, holds)
    assert sorted(d.key for d in out) == sorted(d.key for d in demands)
    before = {d.key: i for i, d in enumerate(demands)}
    after = {d.key: i for i, d in enumerate(out)}
    for x in out:
        if x.key in holds:
            assert after[x.key] <= before[x.key], "a held gang never goes behind"
        for y in out[after[x.key] + 1 :]:
            if before[y.key] < before[x.key]:  # x was moved ahead of y
                assert x.key in holds and x.view.priority >= y.view.priority
    if not holds:
        assert out == demands


# --- the invariants ----------------------------------------------------------------------

GANGS = {"default/w0": 500, "default/w1": 1500}  # both waiting

one = st.tuples(
    st.integers(0, 40),  # minutes ago
    st.sampled_from([None, "default/w0", "default/w1", "default/gone"]),
    st.sampled_from([None, 0, 500, 1000, 1500, 2000]),  # priority in the mark
    st.one_of(st.none(), st.integers(1, 30)),  # minutes held
    st.booleans(),  # still suspended
)


@settings(max_examples=80, deadline=None)
@given(st.lists(one, max_size=6), st.integers(0, 60))
def test_no_priority_inverted_and_nothing_kept_past_the_hold(
    jobs: list[tuple[int, str | None, int | None, int | None, bool]], later: int
) -> None:
    items: list[Any] = [gpu_node("n0")]
    for key, prio in GANGS.items():
        items += waiting(key.split("/")[1], prio)
    for i, (ago, for_gang, prio, hold, still) in enumerate(jobs):
        w = suspended(f"j{i}", ago, for_gang, priority=prio, hold=hold)
        w["spec"]["suspend"] = still
        items.append(w)
    now = NOW + timedelta(minutes=later)
    st_ = state(items, now)
    order = due_resumptions(st_, parse_config({}))
    marks = {r.workload.name: r.mark for r in order}
    # the rooms held now, from the marks themselves
    held = [
        GANGS[m.for_gang]
        for i, (_, g, _, _, still) in enumerate(jobs)
        if still
        and (m := read_mark(st_.workloads[f"default/Job/j{i}"])) is not None
        and m.until is not None
        and g in GANGS
        and now < m.until
    ]
    kinds = [marks[r.workload.name].until is None for r in order]
    assert kinds == sorted(kinds), "what was suspended for a room comes first"
    for r in order:
        if r.action != "resume":
            continue
        assert r.workload.suspended
        p = r.mark.priority
        assert p is None or all(p >= g for g in held), f"{r.reason}: a held room inverted"
    # every held suspension whose hold has ended, and that no other hold of higher
    # priority keeps, is resumed: nothing stays suspended past the holds
    due = {r.workload.name for r in order if r.action == "resume"}
    for i, (_, _, prio, hold, still) in enumerate(jobs):
        if not still or hold is None:
            continue
        m = read_mark(st_.workloads[f"default/Job/j{i}"])
        assert m is not None and m.until is not None
        kept = prio is not None and any(prio < h for h in held)
        if now >= m.until and not kept:
            assert f"j{i}" in due
    # once every hold has ended, every held suspension is resumed
    if jobs:
        end = max(NOW + timedelta(minutes=30), now)
        last = due_resumptions(state(items, end), parse_config({}))
        for i, (_, _, _, hold, still) in enumerate(jobs):
            if still and hold is not None:
                assert f"j{i}" in {r.workload.name for r in last if r.action == "resume"}
