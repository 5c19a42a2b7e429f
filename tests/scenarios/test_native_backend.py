"""A PyTorchJob and a LeaderWorkerSet admitted by corral's ``kubernetes`` backend on a
cluster that gangs natively (1.35, 1.36, 1.37), and scheduled all or nothing by
kube-scheduler's native gang rule with corral's objects and nothing else: the webhook
finds the served version at start, patches the workloads' templates, makes each gang's
Workload (PodGroups, and on 1.37 the PyTorchJob's CompositePodGroup) off the request
path, and names the group on each pod at its CREATE.

Three nodes of 8 GPUs. The PyTorchJob (a 4-GPU master and two 8-GPU workers) waits while
only part of it exists, then binds whole; the LWS (two groups of a leader and a worker,
4 GPUs each) finds 4 GPUs free, room for one pod of a group but not two, and binds
nothing; once the PyTorchJob's pods are gone both of its groups bind, each whole.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.controllers import ControllerSet, NativeGangScheduler, Rest
from tests.kubeapi import ApiServer, ResourceType, Versions
from tests.kubeapi import objects as o
from tests.scenarios.corral_webhook import CorralWebhook
from webhook.config import parse_config

pytestmark = pytest.mark.scenario

Json = dict[str, Any]
NS = "ml"
PYTORCH = ResourceType("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True, builtin=False)
LWS = ResourceType(
    "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True, builtin=False
)
NATIVE = parse_config({"backend": "kubernetes"})


def _template(gpus: int) -> Json:
    container: Json = {"name": "main", "image": "ghcr.io/example/bert:1.0"}
    container["resources"] = {"requests": {"nvidia.com/gpu": str(gpus)}}
    return {"spec": {"containers": [container]}}


PYTORCHJOB: Json = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "bert"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": _template(4)},
            "Worker": {"replicas": 2, "template": _template(8)},
        }
    },
}
LEADERWORKERSET: Json = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "vllm"},
    "spec": {
        "replicas": 2,
        "leaderWorkerTemplate": {
            "size": 2,
            "leaderTemplate": _template(4),
            "workerTemplate": _template(4),
        },
    },
}


class Story:
    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.rest = Rest(api.url)
        self.models = ControllerSet([NativeGangScheduler(Rest(api.url), api.store.versions)])

    async def workload(self, rt: ResourceType, body: Json) -> Json:
        """Created through the API server's admission chain: corral's webhook patches it."""
        return await self.rest.create(rt.api_version, rt.plural, NS, copy.deepcopy(body))

    async def pod(self, owner: Json, template: Json, name: str, labels: dict[str, str]) -> Json:
        """A pod as the workload's controller makes it from its (patched) template; its
        CREATE goes through corral's webhook, which names the pod's group."""
        meta = copy.deepcopy(template.get("metadata") or {})
        meta["name"] = name
        meta.setdefault("labels", {}).update(labels)
        meta["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta}
        pod["spec"] = copy.deepcopy(template["spec"])
        return await self.rest.create("v1", "pods", NS, pod)

    def names(self, plural: str) -> list[str]:
        """The native gang objects of a kind, at whichever version they were made."""
        return sorted(
            x["metadata"]["name"]
            for (g, _v, p), rt in self.api.store.types.items()
            if (g, p) == ("scheduling.k8s.io", plural)
            for x in self.api.store.items(rt, NS)
        )

    def bound(self, prefix: str) -> list[str]:
        pods = self.api.store.items(self.api.store.resource("pods"), NS)
        return sorted(
            p["metadata"]["name"]
            for p in pods
            if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName")
        )


@pytest.fixture(params=["1.35", "1.36", "1.37"])
async def story(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Story, CorralWebhook]]:
    versions = Versions.of(kube=request.param, volcano=None, native_gangs=True)
    async with ApiServer(versions=versions) as api:
        api.store.register(PYTORCH)
        api.store.register(LWS)
        api.store.load(
            [
                o.namespace("corral-system"),
                o.namespace(NS, {"corral.dev/gang-scheduling": "enabled"}),
                *(o.node(f"n{i}", gpus=8) for i in range(3)),
            ]
        )
        s = Story(api)
        async with CorralWebhook(api, NATIVE) as hook:
            yield s, hook
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


async def test_admitted_by_corral_and_scheduled_all_or_nothing(
    story: tuple[Story, CorralWebhook],
) -> None:
    s, hook = story
    release = str(s.api.store.versions.kube)
    job = await s.workload(PYTORCH, PYTORCHJOB)
    specs = job["spec"]["pytorchReplicaSpecs"]
    master, worker = specs["Master"]["template"], specs["Worker"]["template"]
    assert master["metadata"]["annotations"]["corral.dev/native-gang"] == "pytorchjob-bert"
    await hook.drain()
    assert s.names("workloads") == ["pytorchjob-bert"]
    if release == "1.35":
        assert s.names("podgroups") == []  # v1alpha1: pods name the Workload
    elif release == "1.36":
        assert s.names("podgroups") == ["pytorchjob-bert"]
    else:  # a PodGroup per role under one CompositePodGroup
        assert s.names("podgroups") == ["pytorchjob-bert-master", "pytorchjob-bert-worker"]
        assert s.names("compositepodgroups") == ["pytorchjob-bert"]

    m0 = await s.pod(job, master, "bert-master-0", _pt("master", 0))
    assert m0["spec"].get("workloadRef") or m0["spec"].get("schedulingGroup")
    await s.pod(job, worker, "bert-worker-0", _pt("worker", 0))
    await s.models.settle()
    assert s.bound("bert") == []  # two of three: the gang waits, nothing runs alone
    await s.pod(job, worker, "bert-worker-1", _pt("worker", 1))
    await s.models.settle()
    assert s.bound("bert") == ["bert-master-0", "bert-worker-0", "bert-worker-1"]

    lws = await s.workload(LWS, LEADERWORKERSET)
    lwt = lws["spec"]["leaderWorkerTemplate"]
    await hook.drain()
    assert "vllm" in s.names("workloads")
    if release != "1.35":
        assert {"vllm-0", "vllm-1"} <= set(s.names("podgroups"))
    for g in (0, 1):
        await s.pod(lws, lwt["leaderTemplate"], f"vllm-{g}", _lws(g, 0))
        await s.pod(lws, lwt["workerTemplate"], f"vllm-{g}-1", _lws(g, 1))
    await s.models.settle()
    # 4 GPUs free: one pod of a group would fit, a group of two does not
    assert s.bound("vllm") == []

    for name in ("bert-master-0", "bert-worker-0", "bert-worker-1"):
        s.api.store.delete(s.api.store.resource("pods"), NS, name, grace_period_seconds=0)
    await s.models.settle()
    assert s.bound("vllm") == ["vllm-0", "vllm-0-1", "vllm-1", "vllm-1-1"]
