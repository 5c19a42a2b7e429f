"""A PyTorchJob and a LeaderWorkerSet admitted by corral's ``kubernetes`` backend on a
cluster that gangs natively (1.35, 1.36, and 1.37 with v1alpha3, v1beta1 or both turned
on), and scheduled all or nothing by
kube-scheduler's native gang rule with corral's objects and nothing else: the webhook
finds the served version at start, patches the workloads' templates, makes each gang's
Workload (PodGroups, and where 1.37 serves v1alpha3 the PyTorchJob's CompositePodGroup)
off the request path, and names the group on each pod at its CREATE. The descheduler's
informers and ``kubectl corral gangs`` then read the gang back, in the version the
cluster serves.

Three nodes of 8 GPUs. The PyTorchJob (a 4-GPU master and two 8-GPU workers) waits while
only part of it exists, then binds whole; the LWS (two groups of a leader and a worker,
4 GPUs each) finds 4 GPUs free, room for one pod of a group but not two, and binds
nothing; once the PyTorchJob's pods are gone both of its groups bind, each whole.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from descheduler.config import DeschedulerConfig
from descheduler.running.cluster_view import ClusterView
from tests.controllers import ControllerSet, NativeGangScheduler, Rest
from tests.kubeapi import ApiServer, ResourceType, Versions
from tests.kubeapi import objects as o
from tests.plugin.test_kubectl_corral import corral
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
        return sorted(name for name, _ in self.made(plural))

    def made(self, plural: str) -> list[tuple[str, str]]:
        """(name, version) of the native gang objects of a kind."""
        return sorted(
            (x["metadata"]["name"], v)
            for (g, v, p), rt in self.api.store.types.items()
            if (g, p) == ("scheduling.k8s.io", plural)
            for x in self.api.store.items(rt, NS)
        )

    @property
    def composite(self) -> bool:
        """Whether the cluster serves CompositePodGroup (1.37 with v1alpha3 on)."""
        return self.api.store.versions.native_api_on("v1alpha3")

    @property
    def preferred(self) -> str:
        """The version of Workload and PodGroup corral writes and reads."""
        on = self.api.store.versions.native_api_on
        return next(v for v in ("v1beta1", "v1alpha3", "v1alpha2", "v1alpha1") if on(v))

    def bound(self, prefix: str) -> list[str]:
        pods = self.api.store.items(self.api.store.resource("pods"), NS)
        return sorted(
            p["metadata"]["name"]
            for p in pods
            if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName")
        )


# (release, the scheduling.k8s.io versions turned on: None for all the release has,
# alpha gates turned on besides the gang API's)
CLUSTERS: list[tuple[str, set[str] | None, tuple[str, ...]]] = [
    ("1.35", None, ()),
    ("1.36", None, ()),
    ("1.36", None, ("WorkloadAwarePreemption",)),
    ("1.37", {"v1alpha3"}, ()),
    ("1.37", {"v1beta1"}, ()),
    ("1.37", None, ()),
]
IDS = ["1.35", "1.36", "1.36-preemption", "1.37-v1alpha3", "1.37-v1beta1", "1.37-both"]


@pytest.fixture(params=CLUSTERS, ids=IDS)
async def story(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Story, CorralWebhook]]:
    kube, apis, gates = request.param
    versions = Versions.of(
        kube=kube, volcano=None, native_gangs=True, native_apis=apis, gates=gates
    )
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
    elif s.composite:  # a PodGroup per role under one CompositePodGroup (v1alpha3)
        assert s.names("podgroups") == ["pytorchjob-bert-master", "pytorchjob-bert-worker"]
        assert s.made("compositepodgroups") == [("pytorchjob-bert", "v1alpha3")]
    else:  # v1beta1 only: no CompositePodGroup, the roles are one PodGroup
        assert s.names("podgroups") == ["pytorchjob-bert"]
        assert s.made("compositepodgroups") == []
    assert {v for _, v in s.made("workloads") + s.made("podgroups")} == {s.preferred}

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


def _kubeconfig(api: ApiServer, path: Path) -> Path:
    api.accept("t0ken")
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "t", "cluster": {"server": api.url}}],
        "users": [{"name": "admin", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "ml", "context": {"cluster": "t", "user": "admin", "namespace": NS}}],
        "current-context": "ml",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


async def test_the_descheduler_and_kubectl_corral_read_the_gang_back(
    story: tuple[Story, CorralWebhook], tmp_path: Path
) -> None:
    """What corral wrote, read in the version the cluster serves: the descheduler's
    informers find the gang's groups (none left out as unreadable) and ``kubectl corral
    gangs`` shows the gang running with its minimum."""
    s, hook = story
    release = str(s.api.store.versions.kube)
    job = await s.workload(PYTORCH, PYTORCHJOB)
    specs = job["spec"]["pytorchReplicaSpecs"]
    await hook.drain()
    await s.pod(job, specs["Master"]["template"], "bert-master-0", _pt("master", 0))
    for i in (0, 1):
        await s.pod(job, specs["Worker"]["template"], f"bert-worker-{i}", _pt("worker", i))
    await s.models.settle()
    assert len(s.bound("bert")) == 3

    view = ClusterView(s.api.client("descheduler"), DeschedulerConfig(), ledger_namespace=NS)
    await view.start()
    try:
        await view.wait_synced(5.0)
        state = await view.state(datetime.now(UTC))
    finally:
        await view.stop()
    assert view.invalid() == {}
    groups = {
        k: (g.min_count, g.whole, g.parent)
        for k, g in state.native_groups.items()
        if g.workload == "pytorchjob-bert"
    }
    if release == "1.35":  # the Workload holds the group
        assert groups == {"ml/pytorchjob-bert-gang": (3, False, "")}
    elif release == "1.36":
        # corral asks for PodGroup; kept only with WorkloadAwarePreemption (else dropped,
        # and Pod, the default, holds)
        whole = "WorkloadAwarePreemption" in s.api.store.versions.gates
        assert groups == {"ml/pytorchjob-bert": (3, whole, "")}
    elif s.composite:
        assert groups == {
            "ml/pytorchjob-bert-master": (1, True, "pytorchjob-bert"),
            "ml/pytorchjob-bert-worker": (2, True, "pytorchjob-bert"),
        }
    else:
        assert groups == {"ml/pytorchjob-bert": (3, True, "")}
    listed = {r.path for r in s.api.log if r.method == "GET" and not r.watch}
    plural = "workloads" if release == "1.35" else "podgroups"
    assert f"/apis/scheduling.k8s.io/{s.preferred}/{plural}" in listed

    code, out, err = await corral(_kubeconfig(s.api, tmp_path / "kc"), "gangs", "-o", "json")
    assert code == 0, err
    gangs = {g["name"]: g for g in json.loads(out)["gangs"]}
    gang = gangs["pytorchjob-bert-gang" if release == "1.35" else "pytorchjob-bert"]
    assert (gang["keys"], gang["placed"], gang["min_available"], gang["status"]) == (
        "kubernetes",
        3,
        3,
        "running",
    )
