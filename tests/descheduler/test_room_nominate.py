"""``capacity_room.nominate`` (opt-in): the room made for a gang the kube-scheduler
places is held through the scheduler too -- each waiting pod's
``status.nominatedNodeName`` names the node the plan put it on, written again while the
hold lasts wherever the scheduler cleared it, and cleared when the hold ends with the
gang unbound. Never for a gang Volcano, YuniKorn or KAI places; never over a nomination
another component wrote; never with the switch off."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from descheduler import ConfigError, parse_config, plan, state_from_list
from descheduler.planning.gang_views import build_views
from descheduler.planning.nominate import Nomination, due_nominations, nomination_refusal
from descheduler.planning.resume import mark_text, read_mark
from descheduler.render import render_plan
from tests.builders import objects as b
from tests.builders.descheduler_cluster import NOW, as_list, gang, gpu_node, pod

ON = {"capacity_room": {"enabled": True, "nominate": True}}
TWO_HOURS_AGO = "2026-12-02T10:00:00Z"


def job(name: str, node: str, gpus: int, **kw: Any) -> list[Any]:
    return [
        b.job(name, backoff_limit=0, uid=f"uid-owner-{name}"),
        pod(name, node, gpus, owner_kind="Job", owner=name, **kw),
    ]


def waiting_pod(name: str, gang_name: str, gpus: int, *, nominated: str = "", **kw: Any) -> Any:
    """A pending pod of a gang in corral's own keys, placed by the default scheduler."""
    p = pod(
        name,
        "",
        gpus,
        owner_kind="",
        priority=1000,
        created=TWO_HOURS_AGO,
        annotations={"corral.dev/gang": gang_name, "corral.dev/min-available": "2"},
        **kw,
    )
    p["spec"]["schedulerName"] = "default-scheduler"
    if nominated:
        p.setdefault("status", {})["nominatedNodeName"] = nominated
    return p


def full(*, volcano: bool = False) -> list[Any]:
    """Two 8-GPU nodes full of 4-GPU Jobs; gang llm (two 4-GPU pods, priority 1000)
    waits. Suspending a and b (priority 0, both on n0) is the room."""
    items: list[Any] = [gpu_node("n0"), gpu_node("n1")]
    items += job("a", "n0", 4, priority=0)
    items += job("b", "n0", 4, priority=0)
    items += job("c", "n1", 4, priority=2000)
    items += job("d", "n1", 4, priority=2000)
    if volcano:
        items += gang("llm", [], 4, pending=2, priority=1000, created=TWO_HOURS_AGO)
    else:
        items += [waiting_pod("llm-0", "llm", 4), waiting_pod("llm-1", "llm", 4)]
    return items


def test_off_by_default_and_a_bad_value_is_one_line() -> None:
    assert parse_config({}).capacity_room.nominate is False
    assert parse_config(ON).capacity_room.nominate is True
    with pytest.raises(ConfigError) as e:
        parse_config({"capacity_room": {"nominate": "maybe"}}, "config c.yaml")
    text = str(e.value)
    assert text.startswith("config c.yaml: capacity_room.nominate: ") and "\n" not in text
    assert "maybe" in text


def test_the_move_names_where_each_waiting_pod_goes() -> None:
    p = plan(state_from_list(as_list(full()), NOW), parse_config(ON))
    assert [m.workloads for m in p.moves] == [["default/Job/a"], ["default/Job/b"]]
    for m in p.moves:
        assert m.nominate == {"llm-0": "n0", "llm-1": "n0"}
        assert m.reason.endswith("its 2 waiting pods are nominated to the room's nodes")
        assert m.to_dict()["nominate"] == [
            {"namespace": "default", "name": "llm-0", "node": "n0"},
            {"namespace": "default", "name": "llm-1", "node": "n0"},
        ]
    assert "holds it through the scheduler: nominates default/llm-0 -> n0" in render_plan(p)


def test_off_the_plan_is_as_before() -> None:
    on = plan(state_from_list(as_list(full()), NOW), parse_config(ON))
    off = plan(
        state_from_list(as_list(full()), NOW), parse_config({"capacity_room": {"enabled": True}})
    )
    assert [m.nominate for m in off.moves] == [{}, {}]
    assert all("nominate" not in m.to_dict() for m in off.moves)
    assert [m.unit for m in off.moves] == [m.unit for m in on.moves]


def test_never_for_a_gang_another_scheduler_places() -> None:
    p = plan(state_from_list(as_list(full(volcano=True)), NOW), parse_config(ON))
    assert p.moves and all(m.nominate == {} for m in p.moves)
    assert p.moves[0].reason.endswith(
        "not nominated: gang default/llm is placed by Volcano, which does not hold a "
        "nominated node against other pods"
    )
    for name, who in (("yunikorn", "YuniKorn"), ("kai-scheduler", "KAI")):
        items = [gpu_node("n0"), waiting_pod("w-0", "w", 4)]
        items[1]["spec"]["schedulerName"] = name
        st = state_from_list(as_list(items), NOW)
        view = build_views(st, "default")["default/w"]
        assert f"placed by {who}" in (nomination_refusal(view) or "")


# --- each run: written again while held, cleared when released --------------------------


def held_state(*pods: Any, minutes_ago: float = 1, hold: float = 15, now: datetime = NOW) -> Any:
    at = NOW - timedelta(minutes=minutes_ago)
    mark = mark_text(
        "plan-x",
        at,
        "default/llm",
        None,
        priority=0,
        until=at + timedelta(minutes=hold),
        nominate={"llm-0": "n0", "llm-1": "n0"},
    )
    suspended = b.job(
        "a", uid="uid-owner-a", suspend=True, annotations={"corral.dev/suspended-by": mark}
    )
    return state_from_list(as_list([gpu_node("n0"), gpu_node("n1"), suspended, *pods]), now)


def test_the_mark_keeps_the_nominations() -> None:
    st = held_state()
    mark = read_mark(st.workloads["default/Job/a"])
    assert mark is not None and mark.nominate == {"llm-0": "n0", "llm-1": "n0"}


def test_while_held_an_empty_nomination_is_written_again() -> None:
    st = held_state(
        waiting_pod("llm-0", "llm", 4),  # the scheduler cleared it
        waiting_pod("llm-1", "llm", 4, nominated="n0"),  # still there
    )
    assert due_nominations(st, parse_config(ON)) == [
        Nomination(
            "default",
            "llm-0",
            "uid-default-llm-0",
            "n0",
            "default/llm",
            "the room held for gang default/llm (capacity_room.nominate)",
        )
    ]
    assert due_nominations(st, parse_config({"capacity_room": {"enabled": True}})) == []


def test_a_nomination_another_component_wrote_is_left_alone() -> None:
    st = held_state(
        waiting_pod("llm-0", "llm", 4, nominated="n1"),
        waiting_pod("llm-1", "llm", 4, nominated="n1"),
    )
    assert due_nominations(st, parse_config(ON)) == []
    later = held_state(
        waiting_pod("llm-0", "llm", 4, nominated="n1"),
        waiting_pod("llm-1", "llm", 4, nominated="n1"),
        now=NOW + timedelta(minutes=30),
    )
    assert due_nominations(later, parse_config(ON)) == []


def test_the_hold_expired_clears_what_corral_wrote() -> None:
    pods = (
        waiting_pod("llm-0", "llm", 4, nominated="n0"),
        waiting_pod("llm-1", "llm", 4),
    )
    later = held_state(*pods, now=NOW + timedelta(minutes=15))
    ((n,),) = [due_nominations(later, parse_config(ON))]
    # switched off since: what corral wrote is cleared all the same
    assert due_nominations(later, parse_config({})) == [n]
    assert (n.name, n.node) == ("llm-0", None)
    assert n.describe() == (
        "clear the nomination of pod default/llm-0 (the room held for gang default/llm is released)"
    )


def test_a_bound_gang_keeps_what_the_api_server_left() -> None:
    """Bound: the API server clears it at binding (1.35+); corral writes nothing."""
    bound = [pod(f"llm-{i}", "n0", 4, owner_kind="", priority=1000) for i in range(2)]
    for p in bound:
        p["metadata"]["annotations"] = {"corral.dev/gang": "llm", "corral.dev/min-available": "2"}
        p["spec"]["schedulerName"] = "default-scheduler"
        p["status"]["nominatedNodeName"] = "n0"
    for now in (NOW, NOW + timedelta(minutes=30)):
        assert due_nominations(held_state(*bound, now=now), parse_config(ON)) == []
