"""The KubeRay model on its own (the scenarios run the training operator, JobSet and
Kueue models): a RayJob suspended from Running loses its RayCluster and pods and comes
back with a new cluster; a RayJob KubeRay may not suspend runs on untouched."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.builders.workload_crds import workload_crd
from tests.controllers import GarbageCollector, Rest
from tests.controllers.gc import KINDS
from tests.controllers.kuberay import RAY, KubeRay
from tests.kubeapi import ApiServer
from tests.scenarios.story import NS, Cluster, Json, running, setup


@pytest.fixture
async def ray(api: ApiServer) -> AsyncIterator[Cluster]:
    setup(api)
    for kind in ("RayJob", "RayCluster"):
        api.store.register_crd(workload_crd(kind))
    c = Cluster(api, scheduler="pod")
    kinds = (*KINDS, (RAY, "rayclusters", "RayCluster"), (RAY, "rayjobs", "RayJob"))
    c.models.controllers = [
        KubeRay(Rest(api.url), version="1.3", clock=c.clock),
        *(m for m in c.models.controllers if m.name != "garbage-collector"),
        GarbageCollector(Rest(api.url), kinds),
    ]
    yield c
    await c.close()


def rayjob(name: str, **spec: Any) -> Json:
    tmpl = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.9.0"}]}}
    cluster = {
        "headGroupSpec": {"template": tmpl},
        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": tmpl}],
    }
    return {
        "apiVersion": RAY,
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"entrypoint": "python train.py", "rayClusterSpec": cluster, **spec},
    }


def status(c: Cluster, name: str) -> Json:
    rt = c.api.store.resource("rayjobs", "ray.io")
    got: Json = c.api.store.get(rt, NS, name).get("status") or {}
    return got


def pods(c: Cluster, prefix: str) -> list[Json]:
    return [p for p in c.pods() if p["metadata"]["name"].startswith(prefix)]


async def test_a_rayjob_suspended_loses_its_cluster_and_gets_a_new_one(ray: Cluster) -> None:
    c = ray
    await c.rest.create(RAY, "rayjobs", NS, rayjob("rj", shutdownAfterJobFinishes=True))
    await c.settle()
    assert status(c, "rj")["jobDeploymentStatus"] == "Running"
    first = {p["metadata"]["uid"] for p in running(pods(c, "rj-raycluster-"))}
    assert len(first) == 3

    await c.rest.patch(RAY, "rayjobs", NS, "rj", {"spec": {"suspend": True}})
    await c.settle()
    assert status(c, "rj")["jobDeploymentStatus"] == "Suspended"
    assert pods(c, "rj-raycluster-") == []
    rt = c.api.store.resource("rayclusters", "ray.io")
    assert c.api.store.find(rt, NS, "rj-raycluster") is None

    await c.rest.patch(RAY, "rayjobs", NS, "rj", {"spec": {"suspend": False}})
    await c.settle()
    assert status(c, "rj")["jobDeploymentStatus"] == "Running"
    again = {p["metadata"]["uid"] for p in running(pods(c, "rj-raycluster-"))}
    assert len(again) == 3 and not again & first


async def test_a_rayjob_kuberay_may_not_suspend_runs_on(ray: Cluster) -> None:
    c = ray
    await c.rest.create(RAY, "rayjobs", NS, rayjob("keep", shutdownAfterJobFinishes=False))
    await c.settle()
    before = {p["metadata"]["uid"] for p in running(pods(c, "keep-raycluster-"))}
    await c.rest.patch(RAY, "rayjobs", NS, "keep", {"spec": {"suspend": True}})
    await c.settle()
    assert status(c, "keep")["jobDeploymentStatus"] == "Running"
    assert {p["metadata"]["uid"] for p in running(pods(c, "keep-raycluster-"))} == before
    warnings = [
        e["message"]
        for e in c.api.store.items(c.api.store.resource("events"), NS)
        if e["reason"] == "InvalidRayJobSpec"
    ]
    assert warnings == [
        f"The RayJob spec is invalid {NS}/keep: a RayJob with shutdownAfterJobFinishes set "
        "to false is not allowed to be suspended"
    ]
