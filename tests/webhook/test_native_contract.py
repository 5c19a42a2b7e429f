"""The ``kubernetes`` backend against the native gang fixtures
(``tests/webhook/fixtures/native``) under 1.35, 1.36 and 1.37 with the native gang API
on: the version the webhook finds by discovery, its answer to each review (well formed,
stable on reinvocation, a pod's existing group reference never touched, the Job the Job
controller gangs itself left alone), and each workload created over HTTP through the
webhook with the gang objects it then makes accepted by that release."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import pytest

from tests.builders.reviews import with_object
from tests.kubeapi import ApiServer, Versions
from tests.kubeapi import objects as o
from tests.scenarios.corral_webhook import CorralWebhook
from tests.webhook.test_every_kube_version import _CUSTOM, Cluster
from webhook.admission.entry import admit
from webhook.admission.native_gangs import Served
from webhook.config import parse_config
from webhook.served import discover

Json = dict[str, Any]
FIXTURES = Path(__file__).parent / "fixtures" / "native"
NAMES = sorted(p.name for p in FIXTURES.glob("*.json"))
REFS = ("workloadRef", "schedulingGroup")
# As manifests/components/backend-kubernetes configures it.
NATIVE = parse_config({"backend": "kubernetes", "nonGangPods": "ignore"})
# What each release serves with the native gang API on: the version written, whether
# pods name a runtime PodGroup, and whether a CompositePodGroup is there.
EXPECTED = {
    "1.35": ("v1alpha1", False, False),
    "1.36": ("v1alpha2", True, False),
    "1.37": ("v1beta1", True, True),
}


def _review(name: str) -> Json:
    doc: Json = json.loads((FIXTURES / name).read_text())
    return doc


def _ref(obj: Json) -> tuple[str, Json] | None:
    spec = obj.get("spec") or {}
    return next(((f, spec[f]) for f in REFS if f in spec), None)


@pytest.fixture(params=sorted(EXPECTED))
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Cluster, Served]]:
    versions = Versions.of(
        kube=request.param, volcano=None, volcano_pod_validation=False, native_gangs=True
    )
    async with ApiServer(versions=versions) as api:
        for rt in _CUSTOM:
            api.store.register(rt)
        api.store.load(
            [
                o.node("n1", gpus=8, memory="256Gi"),
                o.namespace("corral-system"),
                o.namespace("ml", {"corral.dev/gang-scheduling": "enabled"}),
            ]
        )
        served = await discover(api.client("corral-webhook"))
        async with CorralWebhook(api, NATIVE) as hook, aiohttp.ClientSession() as http:
            yield Cluster(api, http), served
            await hook.drain()


def _names(cluster: Cluster, plural: str) -> list[str]:
    api = cluster.api
    return sorted(
        x["metadata"]["name"]
        for (g, _v, p), rt in api.store.types.items()
        if (g, p) == ("scheduling.k8s.io", plural)
        for x in api.store.items(rt, "ml")
    )


async def test_each_fixture_answered_in_the_served_dialect(
    cluster: tuple[Cluster, Served],
) -> None:
    c, served = cluster
    release = str(c.api.store.versions.kube)
    native = served.native
    assert native is not None
    assert (native.version, native.runtime_groups, native.composite) == EXPECTED[release]
    for name in NAMES:
        rev = _review(name)
        obj = rev["request"]["object"]
        result = admit(rev, None, NATIVE, served)
        resp = result.review["response"]
        assert resp["allowed"], (name, release, resp)
        assert resp["uid"] == rev["request"]["uid"]
        patched = jsonpatch.apply_patch(obj, result.patch) if result.patch else obj
        again = admit(with_object(rev, patched), None, NATIVE, served)
        assert again.patch == [], (name, release, again.patch)
        if _ref(obj) is not None:
            # In a native gang already (its controller's): left as it is.
            assert result.patch == [] and result.intents == (), (name, release)
            continue
        kind = obj["kind"]
        if kind == "Pod":  # a Deployment's pod: not a gang (nonGangPods: ignore)
            assert result.patch == [] and result.intents == (), (name, release)
        elif kind == "Job":  # KEP-5547: the Job controller gangs it where it can
            plurals = [i.plural for i in result.intents]
            assert plurals == ([] if native.runtime_groups else ["workloads"]), (release, plurals)
        elif kind == "LeaderWorkerSet":  # one gang per group of 3
            plurals = [i.plural for i in result.intents]
            want = ["workloads", *(["podgroups"] * 3 if native.runtime_groups else [])]
            assert plurals == want, (release, plurals)
        elif kind == "PyTorchJob":
            plurals = [i.plural for i in result.intents]
            if native.composite:
                want = ["workloads", "compositepodgroups", "podgroups", "podgroups"]
            else:
                want = ["workloads", *(["podgroups"] if native.runtime_groups else [])]
            assert plurals == want, (release, plurals)


async def test_workloads_through_the_webhook_and_their_gang_objects_accepted(
    cluster: tuple[Cluster, Served],
) -> None:
    c, served = cluster
    native = served.native
    assert native is not None
    for name in ("lws-create-1.36-vllm.json", "pytorchjob-create-1.37-bert.json"):
        obj = copy.deepcopy(_review(name)["request"]["object"])
        rt = c.rt(obj)
        for k in ("uid", "resourceVersion", "creationTimestamp", "generation"):
            obj["metadata"].pop(k, None)
        obj.pop("status", None)
        url = f"{c.api.url}/apis/{rt.group}/{rt.version}/namespaces/ml/{rt.plural}"
        async with c.http.post(url, json=obj) as r:
            answer = await r.json()
            assert r.status == 201, (name, answer.get("message"))
    # The reconciler makes them off the request path.
    await _until(lambda: _names(c, "workloads") == ["pytorchjob-bert", "vllm"])
    if native.runtime_groups:
        want = ["vllm-0", "vllm-1", "vllm-2"]
        want += (
            ["pytorchjob-bert-master", "pytorchjob-bert-worker"]
            if native.composite
            else ["pytorchjob-bert"]
        )
        await _until(lambda: _names(c, "podgroups") == sorted(want))
    if native.composite:
        assert _names(c, "compositepodgroups") == ["pytorchjob-bert"]


async def _until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "condition not met in time"
        await asyncio.sleep(0.05)
