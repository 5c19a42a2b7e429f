"""The native gang fixtures (``tests/webhook/fixtures/native``, each named in its README)
against the contract under 1.35, 1.36 and 1.37 with the native gang API on: corral's
webhook answers each review well formed and never touches a pod's group reference (it is
immutable once the pod exists), and each object, created over HTTP through the webhook,
is accepted, keeping its reference where the release speaks that dialect and losing it
with an unknown-field warning where it does not."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.builders.reviews import checked
from tests.kubeapi import ApiServer, Release, Versions
from tests.kubeapi import objects as o
from tests.kubeapi.native_gangs import pod_group_field
from tests.scenarios.corral_webhook import CorralWebhook
from tests.webhook.test_every_kube_version import _CUSTOM, Cluster

Json = dict[str, Any]
FIXTURES = Path(__file__).parent / "fixtures" / "native"
NAMES = sorted(p.name for p in FIXTURES.glob("*.json"))
RELEASES = ("1.35", "1.36", "1.37")
REFS = ("workloadRef", "schedulingGroup")


def _review(name: str) -> Json:
    doc: Json = json.loads((FIXTURES / name).read_text())
    return doc


def _ref(obj: Json) -> tuple[str, Json] | None:
    spec = obj.get("spec") or {}
    for f in REFS:
        if f in spec:
            return f, spec[f]
    return None


def test_twelve_fixtures_each_named_in_the_readme_in_each_dialect() -> None:
    described = (FIXTURES / "README.md").read_text()
    assert len(NAMES) == 12
    for name in NAMES:
        assert f"`{name}`" in described, name
    for release in RELEASES:
        assert any(f"-{release}-" in n for n in NAMES), release
    refs = {f for n in NAMES if (r := _ref(_review(n)["request"]["object"])) for f in [r[0]]}
    assert refs == set(REFS)


@pytest.mark.parametrize("name", NAMES)
def test_the_webhook_answers_and_leaves_the_group_reference_alone(name: str) -> None:
    rev = _review(name)
    result, patched = checked(rev)
    assert result.review["response"]["allowed"], result.review["response"]
    assert _ref(patched) == _ref(rev["request"]["object"])
    for op in result.patch:
        assert not any(op["path"].startswith(f"/spec/{f}") for f in REFS), op


@pytest.fixture(params=RELEASES)
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    versions = Versions.of(kube=request.param, volcano_pod_validation=False, native_gangs=True)
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
        async with CorralWebhook(api) as hook, aiohttp.ClientSession() as http:
            yield Cluster(api, http)
            await hook.drain()


async def test_every_native_fixture_is_accepted_in_every_release(cluster: Cluster) -> None:
    kube: Release = cluster.api.store.versions.kube
    served = pod_group_field(kube)
    for name in NAMES:
        obj = copy.deepcopy(_review(name)["request"]["object"])
        rt = cluster.rt(obj)
        body = copy.deepcopy(obj)
        for k in ("uid", "resourceVersion", "creationTimestamp", "generation"):
            body["metadata"].pop(k, None)
        body.pop("status", None)
        base = "/api/v1" if not rt.group else f"/apis/{rt.group}/{rt.version}"
        url = f"{cluster.api.url}{base}/namespaces/ml/{rt.plural}"
        async with cluster.http.post(url, json=body) as r:
            answer = await r.json()
            warnings = r.headers.getall("Warning", [])
            assert r.status == 201, (name, str(kube), answer.get("message"))
        ref = _ref(obj)
        if ref is None:
            assert _ref(answer) is None, (name, str(kube))
        elif ref[0] == served:
            assert _ref(answer) == ref, (name, str(kube))
        else:
            assert _ref(answer) is None, (name, str(kube))
            assert any(f'unknown field \\"spec.{ref[0]}\\"' in w for w in warnings), warnings
