"""The planner over gangs of the native gang API (scheduling.k8s.io, 1.35-1.37) and
KAI-Scheduler's opt-out, on plain data: membership and minCount from the group objects,
a group that may be disrupted only whole moved whole or not at all, a basic group's pods
moved as lone pods, and ``kai.scheduler/safe-to-consolidate: "false"`` never moved."""

from __future__ import annotations

from typing import Any

import pytest
from gangplace.engine.objects import RecordError

from descheduler import Plan, parse_config, plan, state_from_list
from descheduler.planning.gang_views import build_views
from descheduler.planning.state import ClusterState, StateError
from tests.builders import objects as b
from tests.builders.descheduler_cluster import NOW, as_list, gang, gpu_node, pod

KAI = "kai.scheduler/safe-to-consolidate"


def state(*groups: Any) -> ClusterState:
    return state_from_list(as_list(*groups), NOW)


def podgroup_v1beta1(
    name: str,
    min_count: int | None,
    *,
    disruption: str | None = None,
    annotations: dict[str, str] | None = None,
    priority: int | None = None,
    parent: str | None = None,
) -> dict[str, Any]:
    """A 1.37 PodGroup (scheduling.k8s.io/v1beta1) as the API server returns it."""
    spec: dict[str, Any] = {
        "workloadRef": {"workloadName": "w", "templateName": name},
        "schedulingPolicy": {"gang": {"minCount": min_count}}
        if min_count is not None
        else {"basic": {}},
    }
    if disruption is not None:
        spec["disruptionMode"] = {disruption: {}}
    if priority is not None:
        spec["priority"] = priority
    if parent is not None:
        spec["parentCompositePodGroupName"] = parent
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-npg-{name}",
            "creationTimestamp": "2026-12-02T08:00:00Z",
            "annotations": annotations or {},
        },
        "spec": spec,
    }


def native_pods(group: str, nodes: list[str], gpus: int, **kw: Any) -> list[dict[str, Any]]:
    """Pods naming PodGroup ``group`` (1.36+ ``spec.schedulingGroup``), one per node
    entry ('' for a pending one), owned by a controller that makes them again."""
    out = []
    for i, n in enumerate(nodes):
        p = pod(f"{group}-{i}", n, gpus, owner=group, **kw)
        p["spec"]["schedulingGroup"] = {"podGroupName": group}
        out.append(p)
    return out


def elastic(disruption: str | None) -> list[Any]:
    """n0 holds 4 one-GPU members of a native gang that needs 2 and a 2-GPU pod; n1 has
    2 GPUs free; a 4-GPU job waits. Two members moving to n1 make the room."""
    items: list[Any] = [gpu_node("n0"), gpu_node("n1")]
    items += [podgroup_v1beta1("elastic", 2, disruption=disruption)]
    items += native_pods("elastic", ["n0"] * 4, 1)
    items += [pod("fixed", "n0", 2, owner_kind=""), pod("n1-busy", "n1", 6, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    return items


def test_a_native_group_is_one_gang_with_its_min_count() -> None:
    st = state(elastic("single"))
    views = build_views(st, "default")
    v = views["default/elastic"]
    assert v.is_gang and v.min_available == 2 and len(v.pods) == 4
    assert v.extras == 2 and not v.whole
    assert not any(k.startswith("default/pod:elastic") for k in views)


@pytest.mark.parametrize("disruption", ["single", None])
def test_a_single_disruption_group_gives_up_members_above_min_count(
    disruption: str | None,
) -> None:
    # single, or unset (the API's default): the rule of any gang, extras may move alone
    p = plan(state(elastic(disruption)))
    assert len(p.moves) == 1
    m = p.moves[0]
    assert m.partial and m.unit == "default/elastic" and len(m.pods) == 2
    assert all(pm.target == "n1" for pm in m.pods)
    assert p.waiting_after == []


def test_an_all_disruption_group_moves_whole_or_not_at_all() -> None:
    # Two of its members would make the room, but the group may only be disrupted
    # whole: all four go (two land back on n0), or none.
    p = plan(state(elastic("all")))
    assert len(p.moves) == 1
    m = p.moves[0]
    assert m.unit == "default/elastic" and not m.partial and len(m.pods) == 4
    assert p.waiting_after == []
    # Allowed three evictions a run, the two extras would still do; the whole group
    # would not, so it is not moved at all.
    three = parse_config({"limits": {"max_evictions_per_run": 3}})
    assert len(plan(state(elastic("single")), three).moves[0].pods) == 2
    p = plan(state(elastic("all")), three)
    assert p.moves == [] and p.waiting_after == ["default/job"]


def test_the_group_object_decides_min_count_over_corral_keys() -> None:
    items = elastic("single")
    for x in items:
        if x["kind"] == "Pod" and x["metadata"]["name"].startswith("elastic-"):
            x["metadata"]["annotations"]["corral.dev/min-available"] = "4"
            x["metadata"]["annotations"]["corral.dev/gang"] = "other"
    v = build_views(state(items), "default")["default/elastic"]
    assert v.min_available == 2 and "default/other" not in build_views(state(items), "default")


def test_without_its_group_object_a_native_gang_needs_all_its_pods() -> None:
    items = [x for x in elastic("single") if not x["apiVersion"].startswith("scheduling.k8s.io")]
    v = build_views(state(items), "default")["default/elastic"]
    assert v.is_gang and v.min_available == 4 and v.extras == 0


def test_a_basic_group_is_no_gang() -> None:
    items = [gpu_node("n0"), podgroup_v1beta1("svc", None), *native_pods("svc", ["n0"] * 2, 1)]
    views = build_views(state(items), "default")
    assert "default/svc" not in views
    assert {"default/pod:svc-0", "default/pod:svc-1"} <= views.keys()


def test_1_35_workload_groups_and_replica_keys() -> None:
    """v1alpha1: the Workload holds each group's policy; every replica key of a group is
    a gang of its own with that group's minCount."""
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "train", "namespace": "default", "uid": "uid-w"},
        "spec": {
            "podGroups": [
                {"name": "workers", "policy": {"gang": {"minCount": 2}}},
                {"name": "driver", "policy": {"basic": {}}},
            ]
        },
    }
    items: list[Any] = [gpu_node("n0"), gpu_node("n1"), workload]
    for replica in ("a", "b"):
        for i in range(3):
            p = pod(f"w-{replica}-{i}", "n0" if replica == "a" else "n1", 1, owner="train")
            ref = {"name": "train", "podGroup": "workers", "podGroupReplicaKey": replica}
            p["spec"]["workloadRef"] = ref
            items.append(p)
    d = pod("driver", "n0", 0, owner="train")
    d["spec"]["workloadRef"] = {"name": "train", "podGroup": "driver"}
    items.append(d)
    views = build_views(state(items), "default")
    for replica in ("a", "b"):
        v = views[f"default/train-workers-{replica}"]
        assert v.is_gang and v.min_available == 2 and len(v.pods) == 3
    assert "default/pod:driver" in views and "default/train-driver" not in views


def test_the_groups_under_one_composite_are_one_gang_moved_whole() -> None:
    """1.37: a PyTorchJob as a master group and a worker group under one
    CompositePodGroup; the planner moves all of it or none, under the composite's name."""
    items: list[Any] = [gpu_node("n0"), gpu_node("n1")]
    items += [podgroup_v1beta1("pt-master", 1, parent="pt", disruption="single")]
    items += [podgroup_v1beta1("pt-worker", 2, parent="pt", disruption="single")]
    items += native_pods("pt-master", ["n0"], 1) + native_pods("pt-worker", ["n0"] * 3, 1)
    items += [pod("fixed", "n0", 2, owner_kind=""), pod("n1-busy", "n1", 6, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    st = state(items)
    views = build_views(st, "default")
    v = views["default/pt"]
    assert v.is_gang and len(v.pods) == 4 and v.min_available == 3 and v.whole
    assert "default/pt-master" not in views and "default/pt-worker" not in views
    p = plan(st)
    assert [(m.unit, m.partial, len(m.pods)) for m in p.moves] == [("default/pt", False, 4)]


def test_the_group_priority_counts_for_its_gang() -> None:
    items = [gpu_node("n0"), podgroup_v1beta1("hi", 2, priority=5000)]
    items += native_pods("hi", ["n0", "n0"], 1)
    assert build_views(state(items), "default")["default/hi"].priority == 5000


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (podgroup_v1beta1("x", 0), "PodGroup default/x: spec.schedulingPolicy.gang.minCount=0"),
        (
            {**podgroup_v1beta1("x", 2), "spec": {"schedulingPolicy": {}}},
            "PodGroup default/x: spec.schedulingPolicy: expected one of basic, gang",
        ),
        (
            {
                **podgroup_v1beta1("x", 2),
                "spec": {
                    "schedulingPolicy": {"gang": {"minCount": 2}},
                    "disruptionMode": {"some": {}},
                },
            },
            "PodGroup default/x: spec.disruptionMode={'some': {}}",
        ),
    ],
)
def test_a_group_that_cannot_be_read_is_named(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(StateError) as e:
        state([gpu_node("n0"), obj])
    assert str(e.value).startswith(message)
    assert StateError is RecordError


def podgroup_v1alpha2(name: str, min_count: int, mode: str | None) -> dict[str, Any]:
    """A 1.36 PodGroup (scheduling.k8s.io/v1alpha2); with WorkloadAwarePreemption on its
    disruptionMode is a string."""
    spec: dict[str, Any] = {
        "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "g"}},
        "schedulingPolicy": {"gang": {"minCount": min_count}},
    }
    if mode is not None:
        spec["disruptionMode"] = mode
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-npg-{name}"},
        "spec": spec,
    }


@pytest.mark.parametrize(("mode", "whole"), [("PodGroup", True), ("Pod", False), (None, False)])
def test_a_1_36_string_disruption_mode(mode: str | None, whole: bool) -> None:
    (g,) = state([gpu_node("n0"), podgroup_v1alpha2("x", 2, mode)]).native_groups.values()
    assert (g.min_count, g.whole, g.workload) == (2, whole, "w")


def test_an_unknown_string_disruption_mode_is_named() -> None:
    with pytest.raises(StateError) as e:
        state([gpu_node("n0"), podgroup_v1alpha2("x", 2, "Whole")])
    assert str(e.value) == (
        "PodGroup default/x: spec.disruptionMode='Whole': expected Pod or PodGroup (1.36), "
        "or {single: {}} or {all: {}} (1.37)"
    )


def test_kueue_workloads_and_volcano_podgroups_are_not_read_as_native() -> None:
    kueue = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "k", "namespace": "default"},
        "spec": {},
    }
    st = state([gpu_node("n0"), kueue, *gang("v", ["n0"], 1)])
    assert st.native_groups == {} and "default/v" in st.podgroups


# --- KAI-Scheduler's opt-out ---------------------------------------------------------


def room_for_job(**only_kw: Any) -> list[Any]:
    """n0 is freed for a 4-GPU job by moving the 2-GPU pod ``only`` to n1."""
    items = [gpu_node("n0"), gpu_node("n1")]
    items += [pod("only", "n0", 2, **only_kw), pod("fill0", "n0", 4, owner_kind="")]
    items += [pod("fill1", "n1", 6, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    return items


def reasons(p: Plan) -> dict[str, str]:
    return {x.unit: x.reason for x in p.not_moved}


@pytest.mark.parametrize(
    ("only_kw", "reason"),
    [
        ({"annotations": {KAI: "false"}}, f'pod default/only is annotated {KAI}: "false"'),
        ({"labels": {KAI: "False"}}, f'pod default/only is labelled {KAI}: "false"'),
    ],
)
def test_a_pod_opted_out_of_kai_consolidation_is_never_moved(
    only_kw: dict[str, Any], reason: str
) -> None:
    p = plan(state(room_for_job(**only_kw)))
    assert p.moves == [] and p.waiting_after == ["default/job"]
    assert reasons(p)["default/pod:only"] == reason
    assert [x["name"] for x in p.evictions] == []
    # "true", or no key, leaves it movable
    p = plan(state(room_for_job(annotations={KAI: "true"})))
    assert [x["name"] for x in p.evictions] == ["only"]


def test_a_gang_whose_podgroup_opts_out_is_never_moved() -> None:
    items = [gpu_node("n0"), gpu_node("n1")]
    items += gang("sweep", ["n0", "n0"], 1, pg_annotations={KAI: "false"})
    items += [pod("fill0", "n0", 4, owner_kind=""), pod("fill1", "n1", 6, owner_kind="")]
    items += gang("job", [], 4, pending=1)
    p = plan(state(items))
    assert p.moves == []
    assert reasons(p)["default/sweep"] == f'gang default/sweep is annotated {KAI}: "false"'


def test_a_native_group_that_opts_out_is_never_moved() -> None:
    items = elastic("single")
    items[2] = podgroup_v1beta1("elastic", 2, annotations={KAI: "false"})
    p = plan(state(items))
    assert [m for m in p.moves if m.unit == "default/elastic"] == []
    assert reasons(p)["default/elastic"] == f'gang default/elastic is annotated {KAI}: "false"'


def test_pods_of_a_workload_that_opts_out_are_never_moved() -> None:
    """The key on the Job above the pod (owner chain), not on the pod."""
    job = b.job("train", "default", uid="uid-job-train", annotations={KAI: "false"})
    items = room_for_job(owner_kind="Job", owner="train")
    p = plan(state([*items, job]))
    assert p.moves == []
    assert reasons(p)["default/pod:only"] == f'Job default/train is annotated {KAI}: "false"'
