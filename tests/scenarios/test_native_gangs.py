"""A PyTorchJob and a LeaderWorkerSet on a cluster that gangs natively (1.35, 1.36,
1.37), with corral's objects and nothing else: the Workload/PodGroups corral writes and
the group reference on each pod, scheduled by kube-scheduler's native gang rule.

Three nodes of 8 GPUs. The PyTorchJob (a 4-GPU master and two 8-GPU workers) waits
while only part of it exists, then binds whole; the LWS (two groups of a leader and a
worker, 4 GPUs each) finds 4 GPUs free, room for one pod of a group but not two, and
binds nothing; once the PyTorchJob's pods are gone both of its groups bind, each whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.controllers import ControllerSet, NativeGangScheduler, Rest
from tests.kubeapi import ApiServer, ResourceType, Versions
from tests.kubeapi import objects as o
from tests.kubeapi.native_objects import create_gang_objects
from tests.scenarios.native_writer import NativeGangWriter

pytestmark = pytest.mark.scenario

Json = dict[str, Any]
NS = "ml"
PYTORCH = ResourceType("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True, builtin=False)
LWS = ResourceType(
    "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True, builtin=False
)


def _replica(gpus: int, n: int) -> Json:
    container: Json = {"name": "pytorch", "image": "ghcr.io/example/bert:1.0"}
    container["resources"] = {"requests": {"nvidia.com/gpu": str(gpus)}}
    return {"replicas": n, "template": {"spec": {"containers": [container]}}}


PYTORCHJOB: Json = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "bert"},
    "spec": {"pytorchReplicaSpecs": {"Master": _replica(4, 1), "Worker": _replica(8, 2)}},
}
LEADERWORKERSET: Json = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "vllm"},
    "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2}},
}


class Story:
    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.rest = Rest(api.url)
        self.writer = NativeGangWriter(api.store.versions)
        self.models = ControllerSet([NativeGangScheduler(Rest(api.url), api.store.versions)])

    async def workload(self, rt: ResourceType, body: Json) -> Json:
        created = await self.rest.create(rt.api_version, rt.plural, NS, body)
        await create_gang_objects(self.rest, NS, self.writer.objects_for(created))
        return created

    async def pod(self, owner: Json, name: str, gpus: int, labels: dict[str, str]) -> None:
        pod = o.pod(name, NS, gpus=gpus, labels=labels)
        pod["metadata"].pop("namespace")
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
        await self.rest.create("v1", "pods", NS, self.writer.reference(pod))

    def bound(self, prefix: str) -> list[str]:
        pods = self.api.store.items(self.api.store.resource("pods"), NS)
        return sorted(
            p["metadata"]["name"]
            for p in pods
            if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName")
        )

    def unschedulable(self, prefix: str) -> list[str]:
        pods = self.api.store.items(self.api.store.resource("pods"), NS)
        return sorted(
            p["metadata"]["name"]
            for p in pods
            if p["metadata"]["name"].startswith(prefix)
            and any(
                c.get("reason") == "Unschedulable"
                for c in (p.get("status") or {}).get("conditions") or ()
            )
        )


@pytest.fixture(params=["1.35", "1.36", "1.37"])
async def story(request: pytest.FixtureRequest) -> AsyncIterator[Story]:
    async with ApiServer(versions=Versions.of(kube=request.param, native_gangs=True)) as api:
        api.store.register(PYTORCH)
        api.store.register(LWS)
        api.store.load([o.namespace(NS), *(o.node(f"n{i}", gpus=8) for i in range(3))])
        s = Story(api)
        yield s
        await s.models.stop()
        await s.rest.close()


def _pt(role: str, i: int) -> dict[str, str]:
    return {
        "training.kubeflow.org/job-name": "bert",
        "training.kubeflow.org/replica-type": role,
        "training.kubeflow.org/replica-index": str(i),
    }


def _lws(group: int, worker: int) -> dict[str, str]:
    return {
        "leaderworkerset.sigs.k8s.io/name": "vllm",
        "leaderworkerset.sigs.k8s.io/group-index": str(group),
        "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
    }


async def test_a_pytorchjob_and_an_lws_are_scheduled_all_or_nothing(story: Story) -> None:
    s = story
    job = await s.workload(PYTORCH, PYTORCHJOB)
    await s.pod(job, "bert-master-0", 4, _pt("master", 0))
    await s.pod(job, "bert-worker-0", 8, _pt("worker", 0))
    await s.models.settle()
    assert s.bound("bert") == []  # two of three: the gang waits, nothing runs alone
    await s.pod(job, "bert-worker-1", 8, _pt("worker", 1))
    await s.models.settle()
    assert s.bound("bert") == ["bert-master-0", "bert-worker-0", "bert-worker-1"]

    lws = await s.workload(LWS, LEADERWORKERSET)
    for g in (0, 1):
        await s.pod(lws, f"vllm-{g}", 4, _lws(g, 0))
        await s.pod(lws, f"vllm-{g}-1", 4, _lws(g, 1))
    await s.models.settle()
    # 4 GPUs free: one pod of a group would fit, a group of two does not
    assert s.bound("vllm") == []
    assert s.unschedulable("vllm") == ["vllm-0", "vllm-0-1", "vllm-1", "vllm-1-1"]

    for name in ("bert-master-0", "bert-worker-0", "bert-worker-1"):
        s.api.store.delete(s.api.store.resource("pods"), NS, name, grace_period_seconds=0)
    await s.models.settle()
    assert s.bound("vllm") == ["vllm-0", "vllm-0-1", "vllm-1", "vllm-1-1"]
