"""Every object corral's webhook writes is one the API server accepts, on every
Kubernetes release of the support matrix (1.28-1.37).

Each webhook fixture (``webhook/fixtures`` and ``tests/webhook/fixtures/workloads``: the
objects inside the reviews) is created over HTTP through the in-memory API server's
admission chain, with corral's real webhook registered as the manifests register it,
under each release the server plays (defaulting, the re-defaulting after each webhook's
patch, validation: ``tests/kubeapi/defaults.py``, ``validation.py``). A Job with
``restartPolicy: Never`` is stored with the rule that makes an eviction not count.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import pytest
from gangplace.engine.quirks.job_disruption import ignores_disruption

from tests.kubeapi import KUBE_VERSIONS, ApiServer, Release, ResourceType, Versions
from tests.kubeapi import objects as o
from tests.scenarios.corral_webhook import CorralWebhook

Json = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted(
    [
        *(ROOT / "webhook/fixtures").glob("*.json"),
        *(ROOT / "tests/webhook/fixtures/workloads").glob("*.json"),
    ]
)
NS = "ml"
# The fixtures corral's webhook refuses (bad values), with a word of its message.
DENIED = {
    "sparkapp-create-bad-instances.json": "instances",
    "pod-create-dry-gpu-dryrun.json": "min-available",
}
# Custom resources of the fixtures, served without a schema (no ../shared needed).
_CUSTOM = (
    ResourceType(
        "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True, builtin=False
    ),
    ResourceType(
        "sparkoperator.k8s.io",
        "v1beta2",
        "sparkapplications",
        "SparkApplication",
        True,
        builtin=False,
    ),
    ResourceType("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True, builtin=False),
    ResourceType("batch.volcano.sh", "v1alpha1", "jobs", "Job", True, builtin=False),
)


def _path(rt: ResourceType, namespace: str, name: str = "") -> str:
    base = "/api/v1" if not rt.group else f"/apis/{rt.group}/{rt.version}"
    tail = f"/{name}" if name else ""
    return f"{base}/namespaces/{namespace}/{rt.plural}{tail}"


class Cluster:
    """An API server playing one release, corral's webhook in front of it."""

    def __init__(self, api: ApiServer, http: aiohttp.ClientSession) -> None:
        self.api, self.http = api, http

    def rt(self, obj: Json) -> ResourceType:
        group, _, version = str(obj["apiVersion"]).rpartition("/")
        return next(
            rt
            for (g, v, _p), rt in self.api.store.types.items()
            if g == group and v == version and rt.kind == obj["kind"]
        )

    async def send(
        self, method: str, path: str, body: Json, dry_run: bool = False
    ) -> tuple[int, Json]:
        params = {"dryRun": "All"} if dry_run else {}
        async with self.http.request(method, self.api.url + path, json=body, params=params) as r:
            return r.status, await r.json()

    async def create(self, obj: Json, dry_run: bool = False) -> tuple[int, Json]:
        rt = self.rt(obj)
        return await self.send("POST", _path(rt, NS), _fresh(obj), dry_run)

    async def update(self, old: Json, new: Json) -> tuple[int, Json]:
        """The change from ``old`` to ``new`` made to the stored object (as ``kubectl
        patch`` makes it), after ``old`` was created through the chain."""
        status, stored = await self.create(old)
        assert status == 201, stored
        changed = jsonpatch.make_patch(_fresh(old), _fresh(new)).apply(stored)
        rt = self.rt(new)
        return await self.send("PUT", _path(rt, NS, stored["metadata"]["name"]), changed)


def _fresh(obj: Json) -> Json:
    """The object as a client sends it: no uid, resourceVersion or status."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    for k in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
        meta.pop(k, None)
    meta["namespace"] = NS
    out.pop("status", None)
    return out


@pytest.fixture(params=KUBE_VERSIONS, ids=str)
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    release: Release = request.param
    # Volcano's pod admission is left out: the fixtures' pods come without the workloads
    # they belong to, whose PodGroups it would look for (tests/scenarios/
    # test_volcano_admission.py checks it with them, on the releases it runs on).
    versions = Versions.of(kube=str(release), volcano_pod_validation=False)
    async with ApiServer(versions=versions) as api:
        for rt in _CUSTOM:
            api.store.register(rt)
        api.store.load(
            [
                o.node("n1", gpus=8, memory="256Gi"),
                o.namespace("corral-system"),
                o.namespace(NS, {"corral.dev/gang-scheduling": "enabled"}),
            ]
        )
        async with CorralWebhook(api) as hook, aiohttp.ClientSession() as http:
            yield Cluster(api, http)
            await hook.drain()


def _review(path: Path) -> Json:
    request: Json = json.loads(path.read_text())["request"]
    return request


def _never_restarts(job: Json) -> bool:
    return bool(job["spec"]["template"]["spec"].get("restartPolicy") == "Never")


async def test_every_fixture_is_accepted(cluster: Cluster) -> None:
    """201 for every fixture the webhook admits; a Job whose pods never restart carries
    the rule first, or its own rules already ignore evictions first."""
    versions = cluster.api.store.versions
    for path in FIXTURES:
        req = _review(path)
        obj = req["object"]
        if req["operation"] == "UPDATE":
            status, body = await cluster.update(req["oldObject"], obj)
            assert status == 200, (path.name, str(versions), body)
        else:
            status, body = await cluster.create(obj, dry_run=bool(req.get("dryRun")))
            if path.name in DENIED:
                # corral refuses it itself, naming the key: no object reaches the server
                assert status == 400, (path.name, body)
                assert 'admission webhook "gangs.corral.dev" denied' in body["message"], body
                assert DENIED[path.name] in body["message"], body
                continue
            assert status == 201, (path.name, str(versions), body.get("message"))
        if obj["kind"] == "Job" and obj["apiVersion"] == "batch/v1" and _never_restarts(body):
            rules = body["spec"]["podFailurePolicy"]["rules"]
            assert ignores_disruption(rules), (path.name, str(versions), rules)
            if versions.kube.at_least("1.29"):
                assert body["spec"]["podReplacementPolicy"] == "Failed"
            else:
                assert "podReplacementPolicy" not in body["spec"]
