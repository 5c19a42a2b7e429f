"""The gang schedulers' custom resources as each release installs them: a Volcano
PodGroup keeps ``networkTopology`` from 1.12 and ``subGroupPolicy`` from 1.14 (older
releases drop them with a warning, or refuse them under Strict), and KAI's PodGroup and
Queue are served only where KAI is installed, pruned by their schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from gangplace.thirdparty import crds_dir

from tests.kubeapi import ApiServer, Versions
from tests.kubeapi import objects as o
from tests.kubeapi.scheduler_crds import volcano_podgroup_schema
from tests.kubeapi.versions import Release

Json = dict[str, Any]
NS = "ml"
CRDS = crds_dir(Path(__file__).resolve().parent)
PG_URL = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups"
TOPOLOGY = {"mode": "hard", "highestTierAllowed": 2}
SUBGROUPS = [{"name": "group", "subGroupSize": 2, "minSubGroups": 3, "matchLabelKeys": ["g"]}]


def podgroup(name: str) -> Json:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {
            "minMember": 6,
            "queue": "default",
            "networkTopology": TOPOLOGY,
            "subGroupPolicy": SUBGROUPS,
        },
    }


@pytest.mark.parametrize(
    ("volcano", "kept"),
    [
        ("1.11", set()),
        ("1.12", {"networkTopology"}),
        ("1.14", {"networkTopology", "subGroupPolicy"}),
    ],
)
async def test_a_volcano_podgroup_keeps_what_its_release_declares(
    volcano: str, kept: set[str]
) -> None:
    async with (
        ApiServer(versions=Versions.of(volcano=volcano)) as api,
        aiohttp.ClientSession() as http,
    ):
        api.store.load([o.namespace(NS)])
        async with http.post(api.url + PG_URL, json=podgroup("pg")) as r:
            body = await r.json()
            assert r.status == 201, body
            warnings = r.headers.getall("Warning", [])
        dropped = {"networkTopology", "subGroupPolicy"} - kept
        assert set(body["spec"]) == {"minMember", "queue", *kept}
        assert sorted(warnings) == sorted(f'299 - "unknown field \\"spec.{f}\\""' for f in dropped)
        async with http.post(
            api.url + PG_URL, json=podgroup("strict"), params={"fieldValidation": "Strict"}
        ) as r:
            assert r.status == (400 if dropped else 201)


@pytest.mark.crds
def test_the_newest_volcano_schema_declares_what_the_published_crd_does() -> None:
    assert CRDS is not None
    crd = yaml.safe_load((CRDS / "scheduling.volcano.sh_podgroups.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    published = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    ours = volcano_podgroup_schema(Release(1, 15))["properties"]["spec"]["properties"]
    assert set(ours) == set(published)
    for key in ("networkTopology",):
        assert set(ours[key]["properties"]) == set(published[key]["properties"])
    sub_ours = ours["subGroupPolicy"]["items"]["properties"]
    assert set(sub_ours) == set(published["subGroupPolicy"]["items"]["properties"])


async def test_kai_kinds_are_served_only_with_kai_and_pruned_by_their_schemas() -> None:
    pg = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "bert"},
        "spec": {
            "minMember": 4,
            "queue": "research",
            "subGroups": [{"name": "w", "minMember": 3}],
            "bogus": 1,
        },
    }
    queue = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "research"},
        "spec": {"resources": {"gpu": {"quota": 8, "limit": 16, "overQuotaWeight": 1}}},
    }
    for kai in (False, True):
        async with (
            ApiServer(versions=Versions.of(kube="1.33", kai=kai)) as api,
            aiohttp.ClientSession() as http,
        ):
            api.store.load([o.namespace(NS)])
            url = f"{api.url}/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups"
            async with http.post(url, json=pg) as r:
                body = await r.json()
                assert r.status == (201 if kai else 404), body
            if kai:
                assert "bogus" not in body["spec"]
                assert body["spec"]["subGroups"] == [{"name": "w", "minMember": 3}]
            async with http.post(f"{api.url}/apis/scheduling.run.ai/v2/queues", json=queue) as r:
                assert r.status == (201 if kai else 404)
