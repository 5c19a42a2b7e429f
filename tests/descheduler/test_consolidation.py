"""Equal priorities on defaults: a gang of the waiting gang's priority is moved only as a
consolidation -- placed again at once by the same plan, never left waiting for a gang
of its own priority, never taking back room made for a gang -- and never a higher
priority for a lower one. ``LowerPriority`` still moves lower priorities only."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gangplace.engine import Snapshot, place_gang
from gangplace.engine.timeparse import format_time
from gangplace.thirdparty import trace_dir
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from descheduler import DeschedulerConfig, Plan, apply_moves, parse_config, plan, state_from_list
from descheduler.planning.context import PlanContext
from descheduler.planning.planner import move_verdict
from descheduler.planning.state import ANNOTATION_ROOM_MADE
from tests.builders.descheduler_cluster import NOW, as_list, gang, gpu_node, pod
from tests.descheduler.test_properties import Running, build

LOWER = parse_config({"eviction": {"victim_priority": "LowerPriority"}})


def state(items: list[Any]) -> Any:
    return state_from_list(as_list(items), NOW)


def issue_3948() -> list[Any]:
    """volcano-sh/volcano#3948, scenario 1 as reported: three 8-GPU nodes used 7/6/7 by
    jobs of 4+2+1, 4+2 and 4+2+1 GPUs, and a 4-GPU job waits. Every job has priority 0,
    as on most clusters (no PriorityClass)."""
    items: list[Any] = [gpu_node(n) for n in ("n1", "n2", "n3")]
    for node, sizes in (("n1", (4, 2, 1)), ("n2", (4, 2)), ("n3", (4, 2, 1))):
        for j, gpus in enumerate(sizes):
            items += gang(f"{node}-j{j}", [node], gpus)
    items += gang("llm", [], 4, pending=1, priority=0)
    return items


def test_defaults_solve_issue_3948_with_two_moves() -> None:
    p = plan(state(issue_3948()))
    assert p.waiting_before == ["default/llm"] and p.waiting_after == []
    assert sorted((m.unit, m.pods[0].node, m.pods[0].target) for m in p.moves) == [
        ("default/n1-j1", "n1", "n2"),  # the 2-GPU job into n2's 2 free GPUs
        ("default/n1-j2", "n1", "n3"),  # the 1-GPU job into n3's free GPU
    ]
    assert {m.for_gang for m in p.moves} == {"default/llm"}
    assert all(m.priority == 0 for m in p.moves)


def test_lower_priority_still_moves_no_equal() -> None:
    p = plan(state(issue_3948()), LOWER)
    assert p.moves == [] and p.waiting_after == ["default/llm"]
    assert p.unserved[0].reason.endswith("has priority 0, not lower than 0 of default/llm")


def test_never_a_higher_priority_for_a_lower_one() -> None:
    items = issue_3948()
    for x in items:
        if x["kind"] == "Pod" and x["metadata"]["name"].startswith("n"):
            x["spec"]["priority"] = 10
    p = plan(state(items))
    assert p.moves == [] and p.waiting_after == ["default/llm"]
    assert "has priority 10, higher than 0 of default/llm" in p.unserved[0].reason


def two_gangs(room_made: str | None) -> list[Any]:
    """``b`` (2 x 2 GPUs) runs on n0 beside 4 GPUs nothing may move; n1 and n2 have 2
    GPUs free each; ``a`` (1 x 4 GPUs) waits: it starts only where ``b`` runs, and ``b``
    fits again on n1 and n2. Both have priority 0. ``room_made``: when a run made room
    for ``b`` (the run that moved ``a`` for it)."""
    items: list[Any] = [gpu_node(n) for n in ("n0", "n1", "n2")]
    items += [pod("fill-0", "n0", 4, owner_kind="")]
    items += [pod("fill-1", "n1", 6, owner_kind=""), pod("fill-2", "n2", 6, owner_kind="")]
    ann = {ANNOTATION_ROOM_MADE: room_made} if room_made else None
    items += gang("b", ["n0", "n0"], 2, pg_annotations=ann)
    items += gang("a", [], 4, pending=1, priority=0)
    return items


def test_two_gangs_never_trade_places_across_runs() -> None:
    # Without history, b is moved for a as a consolidation: it lands on n1 and n2.
    p = plan(state(two_gangs(None)))
    assert [m.unit for m in p.moves] == ["default/b"] and p.waiting_after == []
    assert sorted(pm.target or "" for pm in p.moves[0].pods) == ["n1", "n2"]
    # A run 10 minutes ago moved a to make room for b (b's PodGroup says so): a waits
    # again; moving b back for it would undo that run. It waits out the cool-down.
    made = format_time(NOW - timedelta(minutes=10))
    p = plan(state(two_gangs(made)))
    assert p.moves == [] and p.waiting_after == ["default/a"]
    assert p.unserved[0].reason == (
        "no gang it needs may be moved for it: gang default/b has the priority of "
        "default/a (0) and room was made for it 10m ago: a gang of its own priority does "
        "not take it back within the cool-down (1h)"
    )
    # A gang of higher priority may still have it moved.
    items = two_gangs(made)
    for x in items:
        if x["kind"] == "Pod" and x["metadata"]["name"].startswith("a-"):
            x["spec"]["priority"] = 100
    assert [m.unit for m in plan(state(items)).moves] == ["default/b"]
    # After the cool-down, it is a consolidation like any other.
    old = format_time(NOW - timedelta(hours=2))
    assert [m.unit for m in plan(state(two_gangs(old))).moves] == ["default/b"]


def test_explain_says_when_a_gang_keeps_its_room() -> None:
    made = format_time(NOW - timedelta(minutes=10))
    cfg = DeschedulerConfig()
    assert move_verdict(state(two_gangs(None)), cfg, "default/b").endswith(
        "priority 0: only for a waiting gang of higher priority, or of equal priority when "
        "the plan places it again at once"
    )
    defrag = DeschedulerConfig.model_validate({"defragment": {"enabled": True}})
    assert move_verdict(state(two_gangs(made)), defrag, "default/b").endswith(
        "priority 0: only for a waiting gang of higher priority (room was made for it 10m "
        "ago: a gang of its own priority does not take it back within the cool-down (1h)), "
        "or to defragment"
    )


def contested(with_rival: bool) -> list[Any]:
    """``v`` (2 x 1 GPU) runs on n0 and n1, each beside 6 GPUs nothing may move; n2 is
    full. ``w`` (1 x 2 GPUs, the oldest) waits; ``r`` (1 x 2 GPUs) waits too. Priority 0
    everywhere. Moving ``v`` frees 2 GPUs on n0 and on n1: ``w`` takes one node, and
    ``v`` could land on the other -- unless ``r``, of its priority, takes it first."""
    items: list[Any] = [gpu_node(n) for n in ("n0", "n1", "n2")]
    items += [pod("fill-0", "n0", 6, owner_kind=""), pod("fill-1", "n1", 6, owner_kind="")]
    items += [pod("fill-2", "n2", 8, owner_kind="")]
    items += gang("v", ["n0", "n1"], 1)
    items += gang("w", [], 2, pending=1, priority=0, created="2026-12-02T09:00:00Z")
    if with_rival:
        items += gang("r", [], 2, pending=1, priority=0, created="2026-12-02T10:00:00Z")
    return items


def test_a_consolidated_gang_never_waits_for_one_of_its_priority() -> None:
    p = plan(state(contested(with_rival=False)))
    assert [m.unit for m in p.moves] == ["default/v"] and p.waiting_after == []
    # r would take the room v is to land in: v would wait for a gang of its own
    # priority, so it is not moved.
    p = plan(state(contested(with_rival=True)))
    assert p.moves == [] and sorted(p.waiting_after) == ["default/r", "default/w"]
    assert (
        "moves for default/w dropped: with every move made at once, default/v, of the "
        "priority of default/w, would not be placed again at once: a waiting gang served "
        "before it could take its room"
    ) in p.notes
    # A gang of higher priority may have v moved: v then waits behind it, as the
    # scheduler orders them.
    items = contested(with_rival=True)
    for x in items:
        if x["kind"] == "Pod" and x["metadata"]["name"] == "w-0":
            x["spec"]["priority"] = 100
    p = plan(state(items))
    assert [m.unit for m in p.moves] == ["default/v"] and "default/w" not in p.waiting_after


def overcommitted(snap: Snapshot) -> bool:
    """Any resource or device given beyond what a node has (``gpu_free`` is -1 where a
    node has no such device)."""
    devices = np.arange(snap.gpu_free.shape[1])[None, :] < snap.gpu_total[:, None]
    return bool((snap.used > snap.alloc).any() or (snap.gpu_free[devices] < 0).any())


def final_snapshot(p: Plan, doc: dict[str, Any], cfg: DeschedulerConfig) -> None:
    """Check on the plan's final snapshot, with the engine, as the cluster lives the
    plan -- the waiting gangs that fit now start before any eviction lands, then every
    move is made at once: every moved pod lands where the plan says (nothing
    overcommitted); the gangs it serves then start; and every gang moved for one of its
    own priority lands (whole, where the plan says) even after every waiting gang of
    its priority or higher that starts was served first (every one, for a suspended
    gang: it is out of the queue until resumed)."""
    st_ = state_from_list(doc, NOW)
    snap: Snapshot = st_.snapshot
    ctx = PlanContext.build(st_, cfg)
    prio = {k: v.priority for k, v in ctx.views.items()}
    pods = {x.key: x for x in snap.pods}
    served = {m.for_gang for m in p.moves if m.for_gang}
    now = [d for d in ctx.demands if d.key not in p.waiting_before]
    later = [d for d in ctx.demands if d.key in p.waiting_before and d.key not in p.waiting_after]
    for d in now:
        assert place_gang(snap, d.gang, ctx.scorer, ctx.options).ok, d.key
    with snap.what_if():
        apply_moves(snap, p.moves, strict=True)
        assert not overcommitted(snap)
        for d in later:
            ok = place_gang(snap, d.gang, ctx.scorer, ctx.options).ok
            assert ok or d.key not in served, d.key
        assert not overcommitted(snap)
    consolidated = [m for m in p.moves if m.for_gang and m.priority >= prio[m.for_gang]]
    for m in p.moves:
        for pm in m.pods:
            if pods[pm.key].node >= 0:
                snap.remove(pods[pm.key])
    for m in p.moves:
        if m not in consolidated:
            for pm in m.pods:
                if pm.target is not None:
                    x = pods[pm.key]
                    snap.place(x.shape, snap.node_index[pm.target], pm.target_gpus, pod=x)
    for m in consolidated:
        with snap.what_if():
            for d in later:
                if d.view.priority >= m.priority or m.method == "suspend":
                    place_gang(snap, d.gang, ctx.scorer, ctx.options)
            for pm in m.pods:
                assert pm.target is not None, m.unit
                x = pods[pm.key]
                node = snap.node_index[pm.target]
                assert all(snap.gpu_free[node, g] >= x.shape.gpu_milli for g in pm.target_gpus)
                assert (snap.alloc[node] - snap.used[node] >= snap.vector(x.shape)[0]).all()
                snap.place(x.shape, node, pm.target_gpus, pod=x)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from([4, 8, 8]), min_size=2, max_size=5),
    st.lists(
        st.builds(
            Running,
            st.integers(1, 3),
            st.sampled_from([1, 1, 2, 4]),
            st.sampled_from([0.5, 1.0]),
            st.just("none"),
            st.sampled_from(["a", "b"]),
            st.just(None),
            st.integers(0, 100),
            st.sampled_from([0, 0, 0, 0, 100]),
            st.sampled_from(["ReplicaSet", "job-6", "job-pfp"]),  # evicted, suspended
        ),
        min_size=2,
        max_size=10,
    ),
    st.lists(
        st.tuples(
            st.integers(1, 2),
            st.sampled_from([1, 2, 4, 8]),
            st.sampled_from(["a", "b"]),
            st.sampled_from([0, 0, 0, 100]),
            st.just(""),
        ),
        min_size=1,
        max_size=3,
    ),
    st.lists(st.integers(0, 50), min_size=1, max_size=10),
    st.floats(0.4, 0.9),
)
def test_defaults_consolidate_only(
    node_gpus: list[int],
    gangs: list[Running],
    waiting: list[tuple[int, int, str, int, str]],
    order: list[int],
    fill: float,
) -> None:
    """Random clusters, mostly at priority 0, on defaults: never a higher priority
    moved for a lower one, never a gang both moved and served, and every gang moved
    for one of its own priority is placed again at once on the plan's final snapshot."""
    doc, _ = build(node_gpus, gangs, waiting, order, fill)
    cfg = DeschedulerConfig()
    assert cfg.eviction.victim_priority == "LowerOrEqualPriority"
    p = plan(state_from_list(doc, NOW), cfg)
    ctx = PlanContext.build(state_from_list(doc, NOW), cfg)
    for m in p.moves:
        if m.for_gang is not None:
            assert m.priority <= ctx.views[m.for_gang].priority, (m.unit, m.for_gang)
    assert not ({m.unit for m in p.moves} & {m.for_gang for m in p.moves})
    final_snapshot(p, doc, cfg)
    for m in p.moves:
        if m.for_gang is not None and m.priority == ctx.views[m.for_gang].priority:
            event(f"consolidation by {m.method}")


def fragmented(n_nodes: int, waiting: int, seed: int = 3) -> list[Any]:
    """``n_nodes`` 8-GPU nodes, each used 5-7 GPUs by jobs of 1, 2 and 4 GPUs (a gang
    each, in four namespaces), and ``waiting`` gangs of one 8-GPU pod; priority 0
    everywhere, as on a cluster without PriorityClasses."""
    rnd = random.Random(seed)
    items: list[Any] = [gpu_node(f"n{i:03d}") for i in range(n_nodes)]
    k = 0
    for i in range(n_nodes):
        used, target = 0, rnd.choice([5, 6, 7, 7])
        while sizes := [g for g in (1, 1, 2, 2, 4) if used + g <= target]:
            g = rnd.choice(sizes)
            items += gang(f"j{k}", [f"n{i:03d}"], g, namespace=f"team-{k % 4}")
            used, k = used + g, k + 1
    for w in range(waiting):
        items += gang(f"w{w}", [], 8, pending=1, priority=0, namespace="waiting")
    return items


def test_a_fragmented_cluster_at_priority_0() -> None:
    items = fragmented(64, 4)
    doc = as_list(items)
    p = plan(state_from_list(doc, NOW), LOWER)
    assert len(p.waiting_before) == 4 and len(p.waiting_after) == 4 and p.moves == []
    p = plan(state_from_list(doc, NOW))
    assert len(p.waiting_before) == 4 and p.waiting_after == []
    assert {m.for_gang for m in p.moves} == set(p.waiting_before)
    assert all(m.priority == 0 and not m.partial for m in p.moves)
    final_snapshot(p, doc, DeschedulerConfig())


@pytest.mark.trace
def test_bench_equal_priority_on_a_trace_cluster() -> None:
    """``bench.equal_priority`` on a small trace-shaped cluster: the old default
    unblocks nothing at priority 0, the default does."""
    from bench.equal_priority import cluster, measure

    trace = trace_dir(Path(__file__).resolve().parents[2])
    assert trace is not None
    doc = cluster(300, 3, 0.8, 7, trace)
    old, new = (measure(doc, s, 1) for s in ("LowerPriority", "LowerOrEqualPriority"))
    assert old["waiting_before"] == new["waiting_before"] == 3
    assert old["unblocked"] == 0 and old["pods_moved"] == 0
    assert new["unblocked"] >= 1 and new["pods_moved"] >= 1
