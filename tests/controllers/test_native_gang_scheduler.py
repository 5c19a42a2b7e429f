"""kube-scheduler's native gang rule, per release (1.35 Workload + workloadRef, 1.36
PodGroup + schedulingGroup, 1.37 v1beta1 and CompositePodGroup): a gang binds all at
once or not at all, waits for its group object and its minCount pods without a word,
and says why when it does not fit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.controllers import ControllerSet, JobController, NativeGangScheduler, Rest
from tests.kubeapi import ApiServer, Versions
from tests.kubeapi import objects as o
from tests.kubeapi.native_objects import Group, create_gang_objects, gang_objects, refer

Json = dict[str, Any]
NS = "ml"
RELEASES = ["1.35", "1.36", "1.37"]


class World:
    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.versions = api.store.versions
        self.rest = Rest(api.url)
        self.models = ControllerSet([NativeGangScheduler(Rest(api.url), self.versions)])

    async def gang(self, name: str, groups: list[Group], **kw: Any) -> None:
        await create_gang_objects(self.rest, NS, gang_objects(self.versions, name, groups, **kw))

    async def pods(
        self, workload: str, group: str, n: int, *, gpus: int = 2, first: int = 0, **kw: Any
    ) -> None:
        for i in range(first, first + n):
            pod = refer(
                self.versions,
                o.pod(f"{workload}-{group}-{i}", NS, gpus=gpus, **kw),
                workload,
                group,
            )
            pod["metadata"].pop("namespace", None)
            await self.rest.create("v1", "pods", NS, pod)

    def pod_list(self, prefix: str = "") -> list[Json]:
        pods = self.api.store.items(self.api.store.resource("pods"), NS)
        return sorted(
            (p for p in pods if p["metadata"]["name"].startswith(prefix)),
            key=lambda p: p["metadata"]["name"],
        )

    def bound(self, prefix: str = "") -> list[str]:
        return [p["metadata"]["name"] for p in self.pod_list(prefix) if p["spec"].get("nodeName")]

    def pod_group(self, name: str) -> Json:
        version = "v1alpha2" if self.versions.kube.minor == 36 else "v1beta1"
        return self.api.store.get(
            self.api.store.types[("scheduling.k8s.io", version, "podgroups")], NS, name
        )


@pytest.fixture(params=RELEASES)
async def world(request: pytest.FixtureRequest) -> AsyncIterator[World]:
    async with ApiServer(versions=Versions.of(kube=request.param, native_gangs=True)) as api:
        api.store.load([o.namespace(NS), *(o.node(f"n{i}", gpus=8) for i in range(3))])
        w = World(api)
        yield w
        await w.models.stop()
        await w.rest.close()


async def test_a_gang_waits_for_its_min_count_then_binds_whole(world: World) -> None:
    w = world
    await w.gang("bert", [Group("worker", 4)])
    await w.pods("bert", "worker", 3)
    await w.models.settle()
    assert w.bound() == []
    # PreEnqueue: waiting for members is silent (no condition, no event)
    assert all("conditions" not in (p.get("status") or {}) for p in w.pod_list())
    await w.pods("bert", "worker", 1, first=3)
    await w.models.settle()
    assert w.bound() == [f"bert-worker-{i}" for i in range(4)]
    if w.versions.kube.minor >= 36:
        (cond,) = w.pod_group("bert-worker")["status"]["conditions"]
        assert cond["status"] == "True" and cond["reason"] == "Scheduled"


async def test_pods_wait_for_their_group_object(world: World) -> None:
    w = world
    await w.pods("late", "worker", 2)
    await w.models.settle()
    assert w.bound() == []
    await w.gang("late", [Group("worker", 2)])
    await w.models.settle()
    assert w.bound() == ["late-worker-0", "late-worker-1"]


async def test_a_gang_that_does_not_fit_binds_nothing_and_says_why(world: World) -> None:
    w = world
    await w.gang("huge", [Group("worker", 4)])
    await w.pods("huge", "worker", 4, gpus=8)  # 32 GPUs asked, 24 in the cluster
    await w.models.settle()
    assert w.bound() == []
    for p in w.pod_list():
        (cond,) = p["status"]["conditions"]
        assert cond["reason"] == "Unschedulable" and cond["message"].startswith(
            "0/3 nodes are available"
        )
    if w.versions.kube.minor >= 36:
        (cond,) = w.pod_group("huge-worker")["status"]["conditions"]
        assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")


async def test_pods_beyond_min_count_and_loose_pods_go_one_by_one(world: World) -> None:
    w = world
    await w.gang("elastic", [Group("worker", 2)])
    await w.pods("elastic", "worker", 3)
    loose = o.pod("loose", NS, gpus=1)
    loose["metadata"].pop("namespace", None)
    await w.rest.create("v1", "pods", NS, loose)
    await w.models.settle()
    assert w.bound() == ["elastic-worker-0", "elastic-worker-1", "elastic-worker-2", "loose"]


async def test_one_scheduler_name_per_group(world: World) -> None:
    w = world
    await w.gang("mixed", [Group("worker", 2)])
    await w.pods("mixed", "worker", 1)
    await w.pods("mixed", "worker", 1, first=1, scheduler="other-scheduler")
    await w.models.settle()
    assert w.bound() == []
    if w.versions.kube.minor >= 36:
        (cond,) = w.pod_group("mixed-worker")["status"]["conditions"]
        assert cond["message"] == "pods of one group must share one schedulerName"


async def test_a_composite_group_waits_for_enough_complete_groups() -> None:
    async with ApiServer(versions=Versions.of(kube="1.37", native_gangs=True)) as api:
        api.store.load([o.namespace(NS), *(o.node(f"n{i}", gpus=8) for i in range(3))])
        w = World(api)
        try:
            await w.gang("lws", [Group("g0", 2), Group("g1", 2)], composite_min_groups=2)
            await w.pods("lws", "g0", 2)
            await w.pods("lws", "g1", 1)
            await w.models.settle()
            assert w.bound() == []  # g0 is complete, but 2 groups are needed
            await w.pods("lws", "g1", 1, first=1)
            await w.models.settle()
            assert w.bound() == ["lws-g0-0", "lws-g0-1", "lws-g1-0", "lws-g1-1"]
        finally:
            await w.models.stop()
            await w.rest.close()


def _indexed_job(name: str, n: int, gpus: int, mode: str = "Indexed") -> Json:
    container: Json = {"name": "train", "image": "busybox"}
    container["resources"] = {"requests": {"nvidia.com/gpu": str(gpus)}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": n,
            "completions": n,
            "completionMode": mode,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


async def test_the_job_controller_gangs_an_indexed_job_itself(world: World) -> None:
    """KEP-5547 (1.36+): an Indexed Job with parallelism == completions gets its Workload
    and PodGroup from the Job controller, and its pods bind all or nothing; on 1.35, and
    for a NonIndexed Job, the pods carry no group and go one by one."""
    w = world
    w.models.add(JobController(Rest(w.api.url), backoff=0, versions=w.versions))
    for body in (
        _indexed_job("fits", 2, 8),
        _indexed_job("toobig", 4, 8),
        _indexed_job("plain", 2, 0, "NonIndexed"),
    ):
        await w.rest.create("batch/v1", "jobs", NS, body)
        await w.models.settle()
    store = w.api.store
    kept = w.versions.kube.minor >= 36
    groups = sorted(
        (
            p["metadata"]["name"].split("-")[0],
            (p["spec"].get("schedulingGroup") or {}).get("podGroupName", ""),
        )
        for p in w.pod_list()
    )
    if kept:
        version = "v1alpha2" if w.versions.kube.minor == 36 else "v1beta1"
        names = sorted(
            pg["metadata"]["name"]
            for pg in store.items(store.types[("scheduling.k8s.io", version, "podgroups")], NS)
        )
        assert [n.split("-")[0] for n in names] == ["fits", "toobig"]
        assert {g for job, g in groups if job in ("fits", "toobig")} == set(names)
        assert all(g == "" for job, g in groups if job == "plain")
    else:
        assert all(g == "" for _, g in groups)
    per_job = {
        job: sum(1 for p in w.bound() if p.startswith(f"{job}-"))
        for job in ("fits", "toobig", "plain")
    }
    assert per_job["plain"] == 2 and per_job["fits"] == 2
    # 8 GPUs are left for a 4x8 Job: pod by pod one of its pods runs (and holds the
    # GPUs the rest will never get); as a gang none does
    assert per_job["toobig"] == (0 if kept else 1)


async def test_a_nominated_gang_pod_holds_its_room_against_its_priority_or_lower(
    world: World,
) -> None:
    """A gang pod nominated to n0 (corral's capacity_room.nominate) holds n0 while its
    group waits for its second pod: a lone pod of its priority or lower stays pending, and
    loses nothing it had; one of higher priority takes the room; a nominated pod that
    fails loses its nomination."""
    w = world
    w.api.store.load([o.pod(f"fill-{n}", NS, node=n, gpus=8) for n in ("n1", "n2")])
    await w.gang("bert", [Group("worker", 2)])
    await w.pods("bert", "worker", 1, gpus=8)
    (gang_pod,) = w.pod_list("bert-")
    gang_pod["spec"]["priority"] = 1000
    gang_pod["status"]["nominatedNodeName"] = "n0"
    rt = w.api.store.resource("pods")
    w.api.store.load([gang_pod])  # as written: the priority and the nomination
    for name, prio in (("low", 0), ("peer", 1000)):
        lone = o.pod(name, NS, gpus=8)
        lone["spec"]["priority"] = prio
        lone["status"]["nominatedNodeName"] = "n1"  # nominated where there is no room
        w.api.store.load([lone])
    await w.models.settle()
    assert w.bound("low") == [] and w.bound("peer") == []
    # each failed: its nomination is cleared, as the scheduler's preemption does
    for name in ("low", "peer"):
        assert "nominatedNodeName" not in (w.api.store.get(rt, NS, name).get("status") or {})
    assert (
        w.api.store.get(rt, NS, gang_pod["metadata"]["name"])["status"]["nominatedNodeName"] == "n0"
    )
    high = o.pod("high", NS, gpus=8)
    high["spec"]["priority"] = 2000
    await w.rest.create("v1", "pods", NS, {**high, "metadata": {"name": "high"}})
    await w.models.settle()
    assert w.bound("high") == ["high"]
