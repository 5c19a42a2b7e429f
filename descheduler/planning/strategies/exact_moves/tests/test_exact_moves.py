"""The planner's exact neighbourhood moves: found where its search finds none, within
every safety rule, and the same plan however busy the machine."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from gangplace.engine import GangOptions, place_gang
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from descheduler import (
    ConfigError,
    Plan,
    apply_moves,
    load_config,
    parse_config,
    plan,
    state_from_list,
)
from descheduler.planning.context import PlanContext
from descheduler.planning.state import ClusterState
from tests.builders.descheduler_cluster import NOW, as_list, gang, gpu_node, pdb, pod

EXACT_OFF = {"exact_moves": {"enabled": False}}


def state(*groups: Any) -> ClusterState:
    return state_from_list(as_list(*groups), NOW)


def chain() -> list[Any]:
    """A gang of two 1-GPU pods waits. Room on n0 needs p1 moved to n2, which has room
    only once p6 moves off it: a chain the search (victims on the gang's nodes, each
    placed again as the scheduler would) cannot find."""
    items = [gpu_node(f"n{i}", 1, cpu="8") for i in (0, 1, 2, 4)] + [gpu_node("n3", 2, cpu="8")]
    items += [pod("p0", "n0", gpu_milli=400, cpu="1"), pod("p1", "n0", gpu_milli=500, cpu="4")]
    items += [pod("p2", "n1", gpu_milli=400, cpu="1"), pod("p3", "n1", gpu_milli=600, cpu="4")]
    items += [pod("p5", "n2", gpu_milli=500, cpu="1"), pod("p6", "n2", gpu_milli=300, cpu="1")]
    items += [pod("p7", "n3", gpu_milli=700, cpu="2"), pod("p8", "n4", gpu_milli=600, cpu="4")]
    items += gang("job", [], 1, pending=2, cpu="2")
    return items


def moved(p: Plan) -> list[str]:
    return sorted(pm.name for m in p.moves for pm in m.pods)


def test_the_exact_moves_serve_a_gang_the_search_cannot() -> None:
    without = plan(state(chain()), parse_config(EXACT_OFF))
    assert without.moves == [] and without.waiting_after == ["default/job"]
    assert "would fit nowhere else" in without.unserved[0].reason
    st_ = state(chain())
    p = plan(st_)
    assert p.waiting_after == []
    assert len(moved(p)) == 3 and "p0" in moved(p)  # n0 emptied, one more pod moved on
    assert all(m.kind == "make-room" and m.for_gang == "default/job" for m in p.moves)
    assert all("exact neighbourhood moves" in m.reason for m in p.moves)
    # Made as planned, every pod lands and the gang starts.
    snap = st_.snapshot
    apply_moves(snap, p.moves, strict=True)
    d = next(d for d in PlanContext.build(st_, parse_config({})).demands)
    assert place_gang(snap, d.gang, _scorer(st_), GangOptions()).ok


def _scorer(st_: ClusterState) -> Any:
    return PlanContext.build(st_, parse_config({})).scorer


def test_the_exact_moves_keep_the_limits() -> None:
    # three pods must move; a run may evict two
    p = plan(state(chain()), parse_config({"limits": {"max_evictions_per_run": 2}}))
    assert p.moves == [] and p.waiting_after == ["default/job"]


ROOM = {"p5", "p6", "p7", "p8"}  # the pods beside the free GPU share room


def test_the_exact_moves_keep_a_disruption_budget() -> None:
    items = chain()
    for it in items:
        if it["kind"] == "Pod" and it["metadata"]["name"] in ROOM:
            it["metadata"]["labels"] = {"app": "keep"}
    p = plan(state(items, pdb("keep", {"app": "keep"}, 0)))
    assert not ROOM & set(moved(p))
    assert p.waiting_after == ["default/job"]


def test_the_exact_moves_never_move_a_higher_priority_for_a_lower() -> None:
    items = chain()
    for it in items:
        if it["kind"] == "Pod" and it["metadata"]["name"] in ROOM:
            it["spec"]["priority"] = 5000  # above the waiting gang's 1000
    p = plan(state(items))
    assert not ROOM & set(moved(p))
    assert p.waiting_after == ["default/job"]


def test_the_plan_is_the_same_on_a_busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The solver's limit is in branch-and-bound nodes: a clock that runs a thousand
    times faster (a machine far busier) changes nothing."""
    first = plan(state(chain()))
    again = plan(state(chain()))
    assert [m.to_dict() for m in first.moves] == [m.to_dict() for m in again.moves]
    real = time.perf_counter
    ticks = itertools.count()
    monkeypatch.setattr(time, "perf_counter", lambda: real() + 1000.0 * next(ticks))
    slow = plan(state(chain()))
    assert [m.to_dict() for m in slow.moves] == [m.to_dict() for m in first.moves]


def test_node_limit_bad_value_is_one_line() -> None:
    with pytest.raises(ConfigError) as e:
        parse_config({"exact_moves": {"node_limit": 0}})
    msg = str(e.value)
    assert "exact_moves.node_limit" in msg and "\n" not in msg


def test_exact_moves_config_from_yaml(tmp_path: Any) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("exact_moves:\n  max_pods: 3\n  node_limit: 50\n  max_rooms: 2\n")
    cfg = load_config(f)
    assert (cfg.exact_moves.max_pods, cfg.exact_moves.node_limit) == (3, 50)
    assert cfg.exact_moves.max_rooms == 2 and cfg.exact_moves.enabled


# --- every move obeys the rules ---------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> list[Any]:
    """Small clusters of 1- and 2-GPU nodes full of GPU shares, some pods of higher
    priority or covered by a budget allowing none, gangs of two shares, and a gang of
    whole GPUs waiting."""
    n = draw(st.integers(3, 5))
    items: list[Any] = [gpu_node(f"n{i}", draw(st.sampled_from([1, 2])), cpu="8") for i in range(n)]
    k = 0
    for i in range(n):
        for _ in range(draw(st.integers(1, 3))):
            kw: dict[str, Any] = {}
            if draw(st.integers(0, 5)) == 0:
                kw["priority"] = 5000
            if draw(st.integers(0, 5)) == 0:
                kw["labels"] = {"app": "keep"}
            milli = draw(st.sampled_from([300, 400, 500, 600]))
            items.append(pod(f"p{k}", f"n{i}", gpu_milli=milli, cpu="1", **kw))
            k += 1
    if draw(st.booleans()):
        a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        items += gang("pair", [f"n{a}", f"n{b}"], 0, gpu_milli=300, cpu="1")
    items += gang("job", [], 1, pending=draw(st.integers(1, 2)), cpu="2")
    items.append(pdb("keep", {"app": "keep"}, 0))
    return items


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=clusters(), limit=st.sampled_from([2, 3, 50]))
def test_every_exact_move_obeys_the_rules(items: list[Any], limit: int) -> None:
    try:
        st_ = state(items)
    except Exception:  # the builder overfilled a GPU: not a cluster
        return
    cfg = parse_config({"limits": {"max_evictions_per_run": limit}})
    p = plan(st_, cfg)
    pods = {pm.name for m in p.moves for pm in m.pods}
    assert len(pods) <= limit
    by_name = {q.name: q for q in st_.snapshot.pods}
    # The priority rule (PlanContext.may_move_for): never a higher priority for the gang
    # a move makes room for (the waiting job, 1000); a defragmenting move is for no one.
    for m in p.moves:
        names = {pm.name for pm in m.pods}
        if m.for_gang is not None:
            assert m.for_gang == "default/job"
            assert not any(by_name[x].priority > 1000 for x in names), "a higher priority moved"
        assert not any(by_name[x].labels.get("app") == "keep" for x in names), "budget broken"
        if m.unit == "default/pair":
            assert names == {"pair-0", "pair-1"}, "a gang moved in part"
    snap = st_.snapshot
    apply_moves(snap, p.moves, strict=True)  # every pod lands where the plan says
