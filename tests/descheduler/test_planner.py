"""The planner on hand-built clusters where the right move is known."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from gangplace.engine import GangOptions, place_gang
from gangplace.engine.timeparse import format_time

from descheduler import (
    DeschedulerConfig,
    Plan,
    apply_moves,
    parse_config,
    plan,
    state_from_list,
)
from descheduler.planning.context import PlanContext
from descheduler.planning.state import ClusterState, StateError
from descheduler.planning.strategies.make_room.make_room import make_room
from tests.builders.descheduler_cluster import (
    NOW,
    as_list,
    gang,
    gpu_node,
    pdb,
    pod,
    podgroup,
    queue,
)


def state(*groups: Any, now: Any = NOW) -> ClusterState:
    return state_from_list(as_list(*groups), now)


def moved(p: Plan) -> list[str]:
    return sorted(e["name"] for e in p.evictions)  # type: ignore[misc]


def issue_3948() -> list[Any]:
    """Three 8-GPU nodes at 7/6/7 GPUs used; a 4-GPU job waits."""
    items = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 4), pod("s0a", "n0", 1), pod("s0b", "n0", 1), pod("s0c", "n0", 1)]
    items += [pod("big-1", "n1", 4), pod("s1a", "n1", 1), pod("s1b", "n1", 1)]
    items += [pod("big-2", "n2", 4), pod("s2a", "n2", 1), pod("s2b", "n2", 1), pod("s2c", "n2", 1)]
    items += gang("llm", [], 4, pending=1)
    return items


def test_issue_3948_moves_the_two_small_pods_off_the_middle_node() -> None:
    st = state(issue_3948())
    before = st.snapshot.state()
    p = plan(st)
    assert moved(p) == ["s1a", "s1b"]
    targets = sorted(pm.target or "" for m in p.moves for pm in m.pods)
    assert targets == ["n0", "n2"]  # one into each 1-GPU hole
    assert all(m.for_gang == "default/llm" and m.kind == "make-room" for m in p.moves)
    assert p.waiting_before == ["default/llm"] and p.waiting_after == []
    assert p.fragmentation_after < p.fragmentation_before
    assert [(x.now, x.after) for x in p.largest] == [(2, 4)]
    assert st.snapshot.state() == before  # the planner leaves its input as it was


def test_waiting_2x8_gang_needs_two_victim_gangs_moved() -> None:
    items = [gpu_node(f"n{i}") for i in range(4)]
    items += gang("sweep-a", ["n0", "n0"], 2)  # 4 GPUs on n0
    items += gang("sweep-b", ["n1", "n1"], 2)  # 4 GPUs on n1
    items += gang("keep-c", ["n2"], 4, pg_annotations={"corral.dev/evictable": "false"})
    items += gang("keep-d", ["n3"], 4, pg_annotations={"corral.dev/evictable": "false"})
    items += gang("pretrain", [], 8, pending=2)
    p = plan(state(items))
    assert sorted(m.unit for m in p.moves) == ["default/sweep-a", "default/sweep-b"]
    for m in p.moves:
        assert not m.partial and len(m.pods) == 2  # whole gangs
        assert {pm.node for pm in m.pods} != {pm.target for pm in m.pods}
        assert {pm.target for pm in m.pods} <= {"n2", "n3"}
    assert p.waiting_after == []


def test_a_victim_that_could_not_fit_again_is_never_chosen() -> None:
    # n0's single 6-GPU pod is the cheapest way to room (one young pod), but nothing
    # else has 6 GPUs free; n1's 2-GPU pod (older, so costlier) can go to n2.
    items = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("wide", "n0", 6, created="2026-12-02T11:00:00Z")]
    items += [pod(f"two-{i}", "n1", 2, created="2026-11-25T00:00:00Z") for i in range(3)]
    items += [pod("five", "n2", 5, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    p = plan(state(items))
    assert "wide" not in moved(p)
    assert len(moved(p)) == 1 and moved(p)[0].startswith("two-")
    assert p.moves[0].pods[0].target in ("n0", "n2")
    assert p.waiting_after == []


def test_no_move_when_no_victim_could_fit_again() -> None:
    items = [gpu_node("n0"), gpu_node("n1")]
    items += [pod("wide", "n0", 6), pod("other", "n1", 6)]
    items += gang("job", [], 4, pending=1)
    p = plan(state(items))
    assert p.moves == []
    assert p.waiting_after == ["default/job"]
    assert [u.gang for u in p.unserved] == ["default/job"]
    assert "fit" in p.unserved[0].reason


def test_members_above_min_available_move_alone() -> None:
    items = [gpu_node("n0"), gpu_node("n1")]
    # elastic: 4 running, 2 required; n1 has 2 GPUs free for the two that move
    items += gang("elastic", ["n0"] * 4, 1, min_member=2)
    items += [pod("fixed", "n0", 2, owner_kind=""), pod("n1-busy", "n1", 6, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    p = plan(state(items))
    assert len(p.moves) == 1
    m = p.moves[0]
    assert m.partial and m.unit == "default/elastic" and len(m.pods) == 2
    assert all(pm.target == "n1" for pm in m.pods)
    assert p.waiting_after == []


def test_whole_gang_moves_when_its_extras_are_not_enough() -> None:
    items = [gpu_node("n0"), gpu_node("n1")]
    items += gang("elastic", ["n0"] * 4, 1, min_member=3)  # one extra only
    items += [pod("fixed", "n0", 2, owner_kind=""), pod("n1-busy", "n1", 6, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    p = plan(state(items))
    assert len(p.moves) == 1 and not p.moves[0].partial and len(p.moves[0].pods) == 4


def test_cheapest_victim_first() -> None:
    # Two nodes, each freed by moving one 2-GPU pod; the one on n1 has run much longer.
    items = [gpu_node(f"n{i}") for i in range(3)]
    items += [
        pod("young", "n0", 2, created="2026-12-02T11:30:00Z"),
        pod("a", "n0", 4, owner_kind=""),
    ]
    items += [pod("old", "n1", 2, created="2026-11-20T00:00:00Z"), pod("b", "n1", 4, owner_kind="")]
    items += [pod("c", "n2", 6, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    p = plan(state(items))
    assert moved(p) == ["young"]


@pytest.mark.parametrize(
    ("pod_kw", "reason"),
    [
        ({"owner_kind": "DaemonSet"}, "DaemonSet"),
        ({"annotations": {"kubernetes.io/config.mirror": "x"}}, "static"),
        ({"owner_kind": ""}, "no controller"),
        ({"priority_class": "system-cluster-critical"}, "priority class"),
        ({"priority": 2_000_000_000}, "system-critical"),
        ({"namespace": "kube-system"}, "excluded"),
        ({"annotations": {"corral.dev/evictable": "false"}}, "evictable"),
        ({"annotations": {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}}, "prefer"),
        ({"volumes": [{"name": "scratch", "emptyDir": {}}]}, "local storage"),
        ({"volumes": [{"name": "h", "hostPath": {"path": "/data"}}]}, "local storage"),
    ],
)
def test_never_evicted(pod_kw: dict[str, Any], reason: str) -> None:
    items = [gpu_node("n0"), gpu_node("n1")]
    items += [pod("only", "n0", 2, **pod_kw), pod("fill0", "n0", 4, owner_kind="")]
    items += [pod("fill1", "n1", 6, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    p = plan(state(items))
    assert p.moves == [] and p.waiting_after == ["default/job"]
    # the same pod without the protection is moved
    free = [
        gpu_node("n0"),
        gpu_node("n1"),
        pod("only", "n0", 2),
        pod("fill0", "n0", 4, owner_kind=""),
    ]
    free += [pod("fill1", "n1", 6, owner_kind=""), *gang("job", [], 4, pending=1)]
    assert moved(plan(state(free))) == ["only"]


def test_local_storage_pods_move_when_allowed() -> None:
    items = [gpu_node("n0"), gpu_node("n1")]
    items += [pod("scratch", "n0", 2, volumes=[{"name": "s", "emptyDir": {}}])]
    items += [pod("fill0", "n0", 4, owner_kind=""), pod("fill1", "n1", 6, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    cfg = parse_config({"eviction": {"evict_local_storage_pods": True}})
    assert moved(plan(state(items), cfg)) == ["scratch"]


def one_victim_cluster(**gang_kw: Any) -> list[Any]:
    items = [gpu_node("n0"), gpu_node("n1")]
    items += gang("victim", ["n0"], 2, **gang_kw)
    items += [pod("fill0", "n0", 4, owner_kind=""), pod("fill1", "n1", 6, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    return items


def test_cool_down_from_the_podgroup_annotation() -> None:
    recent = (NOW - timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    items = one_victim_cluster(pg_annotations={"corral.dev/last-moved": recent})
    assert plan(state(items)).moves == []
    cfg = parse_config({"eviction": {"cooldown": "15m"}})
    assert [m.unit for m in plan(state(items), cfg).moves] == ["default/victim"]


def test_non_reclaimable_queue_is_never_a_victim() -> None:
    items = [*one_victim_cluster(queue="serving"), queue("serving", reclaimable=False)]
    assert plan(state(items)).moves == []
    items = [*one_victim_cluster(queue="serving"), queue("serving", reclaimable=True)]
    assert len(plan(state(items)).moves) == 1


def test_pdb_that_allows_too_little_skips_the_whole_gang() -> None:
    items = [gpu_node("n0"), gpu_node("n1")]
    items += gang("victim", ["n0", "n0"], 1, labels={"app": "v"})
    items += [pod("fill0", "n0", 4, owner_kind=""), pod("fill1", "n1", 5, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    assert plan(state(items, pdb("v", {"app": "v"}, 1))).moves == []  # 2 needed, 1 allowed
    assert len(plan(state(items, pdb("v", {"app": "v"}, 2))).moves) == 1
    two = [pdb("v", {"app": "v"}, 5), pdb("v2", {"app": "v"}, 5)]
    assert plan(state(items, two)).moves == []  # a pod under two budgets cannot be evicted


@pytest.mark.parametrize(
    "limits",
    [
        {"max_evictions_per_run": 1},
        {"max_evictions_per_node": 1},
        {"max_evictions_per_namespace": 1},
        {"max_evictions_per_queue": 1},
        {"max_gpus_disrupted_per_run": 1.5},
    ],
)
def test_a_limit_never_splits_a_move(limits: dict[str, Any]) -> None:
    items = issue_3948()  # needs two 1-GPU pods moved off n1
    p = plan(state(items), parse_config({"limits": limits}))
    assert p.moves == [] and p.waiting_after == ["default/llm"]
    assert plan(state(items), parse_config({"limits": {k: 2 for k in limits}})).moves


def test_stale_partial_gang_is_released_with_a_reason() -> None:
    items = [gpu_node("n0", 4), gpu_node("n1", 4)]
    items += gang(
        "mpi",
        ["n0", "n0"],
        1,
        min_member=4,
        pending=2,
        pg_annotations={"corral.dev/gang-timeout": "30m"},
    )
    items += [pod("hog0", "n0", 2, owner_kind=""), pod("hog1", "n1", 4, owner_kind="")]
    p = plan(state(items))
    rel = [m for m in p.moves if m.kind == "release-stale"]
    assert len(rel) == 1 and sorted(pm.name for pm in rel[0].pods) == ["mpi-0", "mpi-1"]
    assert all(pm.target is None for pm in rel[0].pods)
    assert "gang timeout of 30m" in rel[0].reason and "2 of its 4" in rel[0].reason


def test_stale_gang_within_its_timeout_or_able_to_finish_is_left_alone() -> None:
    def cluster(timeout: str, hog1: int) -> list[Any]:
        items = [gpu_node("n0", 4), gpu_node("n1", 4)]
        items += gang(
            "mpi",
            ["n0", "n0"],
            1,
            min_member=4,
            pending=2,
            pg_annotations={"corral.dev/gang-timeout": timeout},
        )
        return [*items, pod("hog0", "n0", 2, owner_kind=""), pod("hog1", "n1", hog1, owner_kind="")]

    assert not [m for m in plan(state(cluster("5h", 4))).moves if m.kind == "release-stale"]
    # past its timeout, but its two missing members fit on n1 now: the scheduler finishes it
    assert not [m for m in plan(state(cluster("30m", 2))).moves if m.kind == "release-stale"]
    # no timeout named: the configured default decides
    items = cluster("30m", 4)
    items[2]["metadata"]["annotations"] = {}
    cfg = parse_config({"stale_gangs": {"default_timeout": "6h"}})
    assert not [m for m in plan(state(items), cfg).moves if m.kind == "release-stale"]
    cfg = parse_config({"stale_gangs": {"default_timeout": "1h"}})
    assert [m for m in plan(state(items), cfg).moves if m.kind == "release-stale"]


def defrag_cluster() -> list[Any]:
    # Two lonely 1-GPU pods keep two 8-GPU nodes from taking 8-GPU jobs; n2 has room.
    items = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("lonely-0", "n0", 1), pod("lonely-1", "n1", 1)]
    items += [pod(f"job8-{i}", "n2", 1, owner_kind="") for i in range(6)]
    items += [pod("w8", "n3", 8, owner_kind=""), gpu_node("n3")]
    return items


def test_defragment_when_nobody_waits() -> None:
    p = plan(state(defrag_cluster()), parse_config({"defragment": {"enabled": True}}))
    assert p.waiting_before == []
    assert {m.kind for m in p.moves} == {"defragment"}
    assert moved(p) == ["lonely-0", "lonely-1"]
    assert all(pm.target == "n2" for m in p.moves for pm in m.pods)
    assert p.fragmentation_after < p.fragmentation_before - 1
    assert sum(m.gain_gpus for m in p.moves) == pytest.approx(
        p.fragmentation_before - p.fragmentation_after, abs=1e-6
    )


def test_defragment_moves_a_member_above_min_available_of_a_big_gang() -> None:
    # The lonely pods belong to a gang of 8 (min 6) too big to move whole: one member
    # at a time may go, the gang keeps running, and each is moved on its own.
    items = [gpu_node(f"n{i}") for i in range(4)] + [pod("w8", "n3", 8, owner_kind="")]
    items += gang("sweep", ["n0", "n1", *["n2"] * 6], 1, min_member=6)
    cfg = parse_config({"defragment": {"enabled": True, "min_total_gain_gpus": 0.5}})
    p = plan(state(items), cfg)
    assert {m.kind for m in p.moves} == {"defragment"} and all(m.partial for m in p.moves)
    assert moved(p) == ["sweep-0", "sweep-1"]
    assert all(pm.target == "n2" for m in p.moves for pm in m.pods)
    assert "member above minAvailable of" in p.moves[0].reason
    # a gang that must keep every member is never thinned
    items = [gpu_node(f"n{i}") for i in range(4)] + [pod("w8", "n3", 8, owner_kind="")]
    items += gang("sweep", ["n0", "n1", *["n2"] * 6], 1)
    assert plan(state(items), cfg).moves == []


def test_defragment_needs_its_minimum_gain() -> None:
    cfg = parse_config({"defragment": {"enabled": True, "min_total_gain_gpus": 100}})
    p = plan(state(defrag_cluster()), cfg)
    assert p.moves == [] and any("min_total_gain_gpus" in n for n in p.notes)
    assert (
        plan(state(defrag_cluster()), parse_config({"defragment": {"enabled": False}})).moves == []
    )


def test_victims_come_first_from_a_queue_above_its_deserved_share() -> None:
    # Queues a, b, c weigh the same and ask for more than the cluster has: a uses 14 GPUs
    # and deserves about 8.5. Moving either 1-GPU pod would do; the one in queue a goes,
    # though it costs more.
    items = [gpu_node(f"n{i}") for i in range(3)] + [queue("a"), queue("b"), queue("c")]
    items += gang("a-small", ["n0"], 1, queue="a", created="2026-11-01T00:00:00Z")
    items += gang("b-small", ["n1"], 1, queue="b", created="2026-12-02T11:59:00Z")
    items += gang("a-big", ["n0"], 6, queue="a") + gang("b-big", ["n1"], 6, queue="b")
    items += gang("a-rest", ["n2"], 7, queue="a")
    items += gang("job", [], 2, pending=1, queue="c")
    items += gang("huge", [], 8, pending=3, queue="c")
    p = plan(state(items))
    assert [m.unit for m in p.moves] == ["default/a-small"]


def test_defragment_too_moves_pods_of_a_queue_above_its_share_first() -> None:
    # Both lonely pods free a node for 8-GPU jobs alike; one move is allowed. Queue "a"
    # may hold no GPU (capability 0), so its pod, lonely-1, is the one that goes.
    items = [*defrag_cluster(), queue("a", capability={"nvidia.com/gpu": "0"})]
    for o in items:
        if o["kind"] == "Pod" and o["metadata"]["name"] == "lonely-1":
            o["metadata"].setdefault("annotations", {})["corral.dev/queue"] = "a"
    one = parse_config(
        {
            "limits": {"max_evictions_per_run": 1},
            "defragment": {"enabled": True, "min_total_gain_gpus": 0.5},
        }
    )
    p = plan(state(items), one)
    assert [m.kind for m in p.moves] == ["defragment"] and moved(p) == ["lonely-1"]
    # without the queue's cap, the tie goes by name
    assert moved(plan(state(defrag_cluster()), one)) == ["lonely-0"]


def test_waiting_gangs_are_served_in_drf_order() -> None:
    # One 4-GPU hole can be made; two 4-GPU jobs wait. Queue "rich" already uses most of
    # the cluster, so the job of queue "poor" gets the room.
    items = [gpu_node(f"n{i}") for i in range(3)] + [queue("rich"), queue("poor")]
    items += gang("r1", ["n0"], 8, queue="rich", owner_kind="") + gang(
        "r2", ["n1"], 4, queue="rich"
    )
    items += [pod("s0", "n1", 1), pod("s1", "n1", 1)]
    items += [pod("hold", "n2", 5, owner_kind="")]
    items += gang("rich-job", [], 4, pending=1, queue="rich", created="2026-12-01T00:00:00Z")
    items += gang("poor-job", [], 4, pending=1, queue="poor", created="2026-12-02T00:00:00Z")
    p = plan(state(items), parse_config({"limits": {"max_evictions_per_run": 2}}))
    assert {m.for_gang for m in p.moves} == {"default/poor-job"}
    assert "default/poor-job" not in p.waiting_after


def test_podgroup_without_pods_waits_with_shapes_from_min_resources() -> None:
    items = [gpu_node("n0"), gpu_node("n1")]
    items += [pod("s0", "n0", 1), pod("s1", "n0", 1), pod("fill", "n0", 4, owner_kind="")]
    items += [pod("fill1", "n1", 6, owner_kind="")]
    items.append(
        podgroup("est", 1, phase="Pending", min_resources={"cpu": "4", "nvidia.com/gpu": "4"})
    )
    # Known only by its PodGroup (priority 0, like the pods in its way): not lower
    # than theirs, so LowerPriority moves nothing; the default (LowerOrEqualPriority)
    # moves them, each placed again at once.
    lower = parse_config({"eviction": {"victim_priority": "LowerPriority"}})
    p = plan(state(items), lower)
    assert p.waiting_after == ["default/est"] and not p.moves
    assert p.unserved[0].reason == (
        "no gang it needs may be moved for it: pod default/s0 has priority 0, not lower "
        "than 0 of default/est"
    )
    p = plan(state(items))
    assert p.waiting_before == ["default/est"] and p.waiting_after == []
    assert moved(p) == ["s0", "s1"]


def test_scheduler_plugins_podgroup_is_one_gang() -> None:
    items = [gpu_node("n0"), gpu_node("n1")]
    for i in range(2):
        x = pod(f"cs-{i}", "n0", 1, owner="cs", labels={"scheduling.x-k8s.io/pod-group": "cs"})
        items.append(x)
    items.append(podgroup("cs", 2, api="scheduling.x-k8s.io/v1alpha1"))
    items += [pod("fill", "n0", 4, owner_kind=""), pod("fill1", "n1", 6, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    p = plan(state(items))
    assert [m.unit for m in p.moves] == ["default/cs"] and len(p.moves[0].pods) == 2


def test_the_plan_is_deterministic() -> None:
    a = plan(state(issue_3948())).to_dict()
    b = plan(state(issue_3948())).to_dict()
    assert a == b


def test_config_scoring_policies_all_plan() -> None:
    for policy in ("binpack", "spread", "fgd"):
        cfg = DeschedulerConfig.model_validate({"scheduling": {"policy": policy}})
        p = plan(state(issue_3948()), cfg)
        assert p.waiting_after == [], policy


def test_moves_whose_promise_does_not_hold_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole-plan check: a make-room move after which its gang still cannot start
    (here: only one of the two pods it needs moved) is dropped, with a note."""
    import descheduler.planning.planner as planner_module

    good = plan(state(issue_3948()))
    assert len(good.moves) == 2
    half = good.moves[:1]

    real = planner_module.STRATEGIES

    def only_half(ctx: Any) -> list[Any]:
        make_room(ctx)  # plans as usual...
        return list(half)  # ...but hands back one of its two moves

    swapped = tuple(only_half if s is make_room else s for s in real)
    monkeypatch.setattr(planner_module, "STRATEGIES", swapped)
    p = plan(state(issue_3948()))
    assert p.moves == []
    assert p.waiting_after == ["default/llm"]
    assert any("dropped" in n and "default/llm would still not start" in n for n in p.notes)


def test_apply_moves_makes_the_plan_on_a_snapshot() -> None:
    st = state(issue_3948())
    p = plan(st)
    snap = st.snapshot
    (llm,) = PlanContext.build(st, DeschedulerConfig()).demands
    assert not place_gang(snap, llm.gang, options=GangOptions(dry_run=True)).ok
    with snap.what_if():
        apply_moves(snap, p.moves)
        where = {x.name: snap.node_names[x.node] for x in snap.pods if x.name in ("s1a", "s1b")}
        assert where == {pm.name: pm.target for m in p.moves for pm in m.pods}
        assert place_gang(snap, llm.gang).ok


def ledger(last_moved: dict[str, str], room_made: dict[str, str] | None = None) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "corral-descheduler-moves", "namespace": "corral-system"},
        "data": {"last-moved": json.dumps(last_moved), "room-made": json.dumps(room_made or {})},
    }


def test_the_move_ledger_cools_down_pods_by_their_controller() -> None:
    """Pods without a PodGroup: their controller makes the replacement, so the ledger
    remembers the controller; s1a's Job moved 10 minutes ago, so s1b moves with s2a."""
    ten_min_ago = (NOW - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    st = state(issue_3948(), ledger({"default/owner:ReplicaSet/s1a": ten_min_ago}))
    assert st.ledger.last_moved == {"default/owner:ReplicaSet/s1a": NOW - timedelta(minutes=10)}
    p = plan(st)
    assert "s1a" not in moved(p) and p.waiting_after == []
    hours_ago = (NOW - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert moved(
        plan(state(issue_3948(), ledger({"default/owner:ReplicaSet/s1a": hours_ago})))
    ) == [
        "s1a",
        "s1b",
    ]


def test_a_gang_whose_room_was_taken_waits_out_the_cool_down() -> None:
    stamp = (NOW - timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    items = [x for x in issue_3948() if x["metadata"]["name"] != "llm"]
    items += gang("llm", [], 4, pending=1, pg_annotations={"corral.dev/room-made": stamp})
    p = plan(state(items))
    assert p.moves == [] and p.waiting_after == ["default/llm"]
    (u,) = p.unserved
    assert u.reason.startswith("room was made for it 20m ago") and "cool-down (1h)" in u.reason
    later = plan(state(items, now=NOW + timedelta(hours=1)))
    assert moved(later) == ["s1a", "s1b"]
    # the same through the ledger, for a gang without a PodGroup
    items = [x for x in issue_3948() if x["kind"] != "PodGroup"]
    p = plan(state(items, ledger({}, {"default/llm": stamp})))
    assert p.moves == [] and p.unserved[0].reason.startswith("room was made for it")


def run_record(
    finished: bool,
    names: list[str],
    started: datetime = NOW,
    node: str = "n0",
    last: datetime | None = None,
) -> str:
    pods = [
        {"namespace": "default", "name": n, "node": node, "queue": "default", "gpuMilli": 1000}
        for n in names
    ]
    doc = {"plan": "plan-x", "started": started.strftime("%Y-%m-%dT%H:%M:%SZ")}
    if last is not None:
        doc["last"] = last.strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps({**doc, "finished": finished, "evicted": pods})


def test_a_run_cut_short_shares_its_limits_with_the_next() -> None:
    """Volcano 3948's plan moves two pods; a run cut short 5 minutes ago had evicted
    one, so with a limit of 2 the run now cannot make the two-pod move."""
    limit = parse_config({"limits": {"max_evictions_per_run": 2}})
    assert moved(plan(state(issue_3948()), limit)) == ["s1a", "s1b"]
    five_min_ago = NOW - timedelta(minutes=5)
    cut_short = ledger({})
    cut_short["data"]["run"] = run_record(False, ["gone-0"], five_min_ago)
    p = plan(state(issue_3948(), cut_short), limit)
    assert p.moves == [] and p.waiting_after == ["default/llm"]
    assert any("1 pod(s) evicted by run plan-x, cut short" in n for n in p.notes)
    # a finished run, or one cut short longer than runner.interval ago, passes nothing on
    done = ledger({})
    done["data"]["run"] = run_record(True, ["gone-0"], five_min_ago)
    assert moved(plan(state(issue_3948(), done), limit)) == ["s1a", "s1b"]
    old = ledger({})
    old["data"]["run"] = run_record(False, ["gone-0"], NOW - timedelta(minutes=11))
    assert moved(plan(state(issue_3948(), old), limit)) == ["s1a", "s1b"]
    # the window counts from the run's last eviction: a long run that died late
    long = ledger({})
    long["data"]["run"] = run_record(
        False, ["gone-0"], NOW - timedelta(minutes=30), last=five_min_ago
    )
    assert plan(state(issue_3948(), long), limit).moves == []
    # and the per-node limit counts the node the pod was evicted from
    per_node = parse_config({"limits": {"max_evictions_per_node": 2}})
    elsewhere = ledger({})
    elsewhere["data"]["run"] = run_record(False, ["gone-0", "gone-1"], five_min_ago, "n0")
    assert moved(plan(state(issue_3948(), elsewhere), per_node)) == ["s1a", "s1b"]
    same_node = ledger({})
    same_node["data"]["run"] = run_record(False, ["gone-0", "gone-1"], five_min_ago, "n1")
    st = state(issue_3948(), same_node)
    assert plan(st, per_node).moves == []
    assert json.loads(st.ledger.to_data()["run"]) == {
        **json.loads(same_node["data"]["run"]),
        "last": format_time(five_min_ago),  # none recorded: the start
    }


def test_a_bad_ledger_is_named() -> None:
    bad = ledger({})
    bad["data"]["last-moved"] = "[1, 2"
    with pytest.raises(StateError, match=r"corral-descheduler-moves: data\.last-moved"):
        state(issue_3948(), bad)
    bad["data"]["last-moved"] = json.dumps({"default/x": "yesterday"})
    with pytest.raises(StateError, match=r"data\.last-moved\[default/x\]"):
        state(issue_3948(), bad)
    bad = ledger({})
    for raw, where in (
        ("{", r"data\.run: not a JSON object"),
        (json.dumps({"plan": "p"}), r"data\.run\.started: missing"),
        (json.dumps({"started": "2026-12-02T12:00:00Z", "evicted": 3}), r"\.evicted: not a list"),
        (
            json.dumps(
                {"started": "2026-12-02T12:00:00Z", "evicted": [{"name": "p", "gpuMilli": -1}]}
            ),
            r"\.evicted\[0\]\.gpuMilli: not a count",
        ),
    ):
        bad["data"]["run"] = raw
        with pytest.raises(StateError, match=where):
            state(issue_3948(), bad)
