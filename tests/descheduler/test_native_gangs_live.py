"""``corral-descheduler run --dry-run`` against the in-memory API server playing
Kubernetes 1.37 with the native gang API on: the informers read the v1beta1 PodGroups
and the pods' group references, the plan moves a group whose disruption mode is ``all``
whole, and a pod opted out of KAI-Scheduler's consolidation stays where it is, named
with why. On 1.34 the same run reads no native API and fails nothing."""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import pytest

from descheduler import DeschedulerConfig, plan, state_from_list
from descheduler.running.process import RunOptions, run_descheduler
from tests.builders.descheduler_cluster import NOW, as_list, gpu_node, pod
from tests.kubeapi import ApiServer
from tests.kubeapi.native_objects import Group, gang_objects, refer
from tests.kubeapi.versions import Versions

pytestmark = pytest.mark.scenario

NS = "corral-system"
KAI = "kai.scheduler/safe-to-consolidate"


def podgroup(
    name: str, min_count: int, disruption: str, parent: str | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-npg-{name}"},
        "spec": {
            "workloadRef": {"workloadName": name, "templateName": "gang"},
            "schedulingPolicy": {"gang": {"minCount": min_count}},
            "disruptionMode": {disruption: {}},
        },
    }
    if parent is not None:
        out["spec"]["parentCompositePodGroupName"] = parent
    return out


def member(name: str, group: str, node: str, gpus: int, **kw: Any) -> dict[str, Any]:
    p = pod(name, node, gpus, owner=group, **kw)
    p["spec"]["schedulingGroup"] = {"podGroupName": group}
    p["spec"]["schedulerName"] = "default-scheduler"
    return p


def cluster() -> list[dict[str, Any]]:
    """n0: a native gang of four 1-GPU pods (minCount 2, disrupted only whole) and a
    2-GPU pod opted out of KAI consolidation; n1: 6 GPUs busy. A native gang of one
    4-GPU pod waits. Moving the opted-out pod to n1 would be the cheapest room; the
    plan moves the whole gang instead (two of its pods land back on n0)."""
    items: list[dict[str, Any]] = [gpu_node("n0"), gpu_node("n1")]
    items.append(podgroup("elastic", 2, "all"))
    items += [member(f"elastic-{i}", "elastic", "n0", 1) for i in range(4)]
    items.append(pod("pinned", "n0", 2, annotations={KAI: "false"}))
    items.append(pod("busy", "n1", 6, owner_kind=""))
    items.append(podgroup("job", 1, "single"))
    items.append(member("job-0", "job", "", 4, priority=1000))
    return items


async def run(
    api: ApiServer, items: list[dict[str, Any]], *, dry_run: bool = True
) -> dict[str, Any]:
    api.store.load([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    api.store.load(copy.deepcopy(items))
    out = io.StringIO()
    opts = RunOptions(
        once=True,
        dry_run=dry_run,
        output="json",
        lease_namespace=NS,
        sync_timeout=5.0,
        backoff_initial=0.01,
    )
    code = await run_descheduler(
        opts,
        DeschedulerConfig(),
        client=api.client("once"),
        clock=lambda: NOW,
        out=out,
        install_signals=False,
    )
    assert code == 0
    doc: dict[str, Any] = json.loads(out.getvalue())
    if dry_run:
        assert not [r for r in api.log if r.method in ("POST", "PATCH", "PUT", "DELETE")]
    return doc


async def test_a_live_plan_moves_a_native_group_whole_and_keeps_a_kai_opt_out() -> None:
    items = cluster()
    async with ApiServer(
        bookmark_interval=0.2, versions=Versions.of("1.37", native_gangs=True)
    ) as api:
        doc = await run(api, items)
        listed = {r.path for r in api.log if r.method == "GET" and not r.watch}
    assert "/apis/scheduling.k8s.io/v1beta1/podgroups" in listed
    (move,) = doc["moves"]
    assert move["unit"] == "default/elastic" and move["for_gang"] == "default/job"
    assert not move["partial"] and sorted(p["name"] for p in move["pods"]) == [
        f"elastic-{i}" for i in range(4)
    ]
    assert {o["status"] for o in doc["run"]["outcomes"]} == {"dry-run"}
    not_moved = {x["unit"]: x["reason"] for x in doc["not_moved"]}
    assert not_moved["default/pod:pinned"] == f'pod default/pinned is annotated {KAI}: "false"'
    # the same plan as from a dump of the same objects
    assert doc["evictions"] == plan(state_from_list(as_list(items), NOW)).evictions
    # without the opt-out the pinned pod is the cheaper room
    free = copy.deepcopy(items)
    for x in free:
        if x["metadata"]["name"] == "pinned":
            x["metadata"]["annotations"].pop(KAI)
    assert [e["name"] for e in plan(state_from_list(as_list(free), NOW)).evictions] == ["pinned"]


async def test_before_1_35_no_native_api_is_read_and_the_run_goes_on() -> None:
    items = [gpu_node("n0"), pod("a", "n0", 2)]
    async with ApiServer(bookmark_interval=0.2, versions=Versions.of("1.34")) as api:
        doc = await run(api, items)
        watched = {r.path for r in api.log if r.watch}
    native = [
        p
        for p in watched
        if p.startswith("/apis/scheduling.k8s.io/") and "/priorityclasses" not in p
    ]
    assert doc["moves"] == [] and native == []
    assert "/apis/scheduling.k8s.io/v1/priorityclasses" in watched


async def test_room_is_made_for_a_waiting_composite_gang() -> None:
    """1.37: a gang of two roles (two PodGroups under one CompositePodGroup) waits; the
    run finds its pending pods through their groups and evicts the one pod in its way."""
    items: list[dict[str, Any]] = [gpu_node("n0"), gpu_node("n1"), gpu_node("n2")]
    items += [pod("small", "n0", 2), pod("fill0", "n0", 4, owner_kind="")]
    items += [pod("fill1", "n1", 5, owner_kind=""), pod("fill2", "n2", 6, owner_kind="")]
    items += [podgroup("pt-master", 1, "all", "pt"), podgroup("pt-worker", 1, "all", "pt")]
    items += [member("pt-master-0", "pt-master", "", 3, priority=1000)]
    items += [member("pt-worker-0", "pt-worker", "", 3, priority=1000)]
    async with ApiServer(
        bookmark_interval=0.2, versions=Versions.of("1.37", native_gangs=True)
    ) as api:
        doc = await run(api, items, dry_run=False)
        evicted = [r.path for r in api.log if r.method == "POST" and "dryRun" not in r.query]
    (move,) = doc["moves"]
    assert move["for_gang"] == "default/pt" and move["unit"] == "default/pod:small"
    assert [o["status"] for o in doc["run"]["outcomes"]] == ["evicted"]
    assert [p for p in evicted if p.endswith("/eviction")] == [
        "/api/v1/namespaces/default/pods/small/eviction"
    ]


@pytest.mark.parametrize(
    ("kube", "moved"),
    [("1.35", 2), ("1.36", 2), ("1.37", 4)],
)
async def test_each_release_s_native_gang_is_read(kube: str, moved: int) -> None:
    """The objects each release serves, as a writer of native gangs makes them
    (v1alpha1 Workload and spec.workloadRef; v1alpha2 Workload, PodGroup and
    spec.schedulingGroup; v1beta1 with disruptionMode all): the gang of four needs 2, so
    before 1.37 two members move alone; on 1.37 it moves whole."""
    versions = Versions.of(kube, native_gangs=True)
    items: list[dict[str, Any]] = [gpu_node("n0"), gpu_node("n1")]
    kinds = {"workloads": "Workload", "podgroups": "PodGroup"}
    for api_version, plural, obj in gang_objects(versions, "elastic", [Group("gang", 2)]):
        obj["metadata"]["namespace"] = "default"
        items.append({"apiVersion": api_version, "kind": kinds[plural], **obj})
    for i in range(4):
        p = pod(f"elastic-{i}", "n0", 1, owner="elastic")
        items.append(refer(versions, p, "elastic", "gang"))
    items += [pod("fixed", "n0", 2, owner_kind=""), pod("busy", "n1", 6, owner_kind="")]
    items += [pod("job-0", "", 4, priority=1000, annotations={"corral.dev/gang": "job"})]
    async with ApiServer(bookmark_interval=0.2, versions=versions) as api:
        doc = await run(api, items)
    (move,) = doc["moves"]
    assert move["unit"] == "default/elastic-gang" and len(move["pods"]) == moved
    assert move["partial"] is (moved == 2)


@pytest.mark.parametrize(("mode", "moved"), [("PodGroup", 4), ("Pod", 2), (None, 2)])
async def test_a_1_36_string_disruption_mode_is_read(
    mode: str | None, moved: int, caplog: pytest.LogCaptureFixture
) -> None:
    """1.36 with WorkloadAwarePreemption: ``disruptionMode`` is a string (v0.36.0
    v1alpha2 DisruptionMode), ``Pod`` by default. ``PodGroup`` moves the gang whole;
    ``Pod`` (what the server defaults to) lets members above minCount move alone."""
    versions = Versions.of("1.36", native_gangs=True, gates=["WorkloadAwarePreemption"])
    items: list[dict[str, Any]] = [gpu_node("n0"), gpu_node("n1")]
    for i in range(4):
        p = pod(f"elastic-{i}", "n0", 1, owner="elastic")
        items.append(refer(versions, p, "elastic", "gang"))
    items += [pod("fixed", "n0", 2, owner_kind=""), pod("busy", "n1", 6, owner_kind="")]
    items += [pod("job-0", "", 4, priority=1000, annotations={"corral.dev/gang": "job"})]
    async with ApiServer(bookmark_interval=0.2, versions=versions) as api:
        # created, not loaded: the server defaults the mode as a real one does
        for api_version, plural, obj in gang_objects(versions, "elastic", [Group("gang", 2)]):
            if plural == "podgroups" and mode is not None:
                obj["spec"]["disruptionMode"] = mode
            rt = api.store.types[("scheduling.k8s.io", api_version.rpartition("/")[2], plural)]
            api.store.create(rt, "default", obj)
        stored = api.store.items(api.store.types[("scheduling.k8s.io", "v1alpha2", "podgroups")])
        assert [g["spec"]["disruptionMode"] for g in stored] == [mode or "Pod"]
        doc = await run(api, items)
    assert not [r for r in caplog.records if r.getMessage().startswith("object left out")]
    (move,) = doc["moves"]
    assert move["unit"] == "default/elastic-gang" and len(move["pods"]) == moved
    assert move["partial"] is (moved == 2)
