"""Volcano 1.12+ PodGroup fields over the in-memory API server: the webhook reads the
fields of the installed PodGroup CRD (its schema as each Volcano release installs it,
:mod:`tests.kubeapi.scheduler_crds`), writes ``networkTopology`` and ``subGroupPolicy``
only where they are declared, and the PodGroup it makes keeps them (a field the CRD does
not declare would be pruned)."""

from __future__ import annotations

import pytest
from gangplace.kube import KubeClient
from gangplace.kube.resources import VOLCANO_PODGROUPS

from tests.builders.reviews import pod_template, review
from tests.kubeapi import ApiServer, Release, Versions
from tests.kubeapi import objects as o
from tests.kubeapi.scheduler_crds import volcano_podgroup_schema
from webhook.admission.entry import admit
from webhook.config import WebhookConfig
from webhook.served import discover

GPU = {"cpu": "4", "nvidia.com/gpu": "1"}


def podgroup_crd(volcano: Release) -> dict[str, object]:
    """Volcano's PodGroup CRD as its chart at ``volcano`` installs it (the schema only)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "podgroups.scheduling.volcano.sh"},
        "spec": {
            "group": "scheduling.volcano.sh",
            "names": {"kind": "PodGroup", "plural": "podgroups", "singular": "podgroup"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1beta1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": volcano_podgroup_schema(volcano)},
                }
            ],
        },
    }


def jobset() -> dict[str, object]:
    def rjob(name: str, replicas: int, parallelism: int) -> dict[str, object]:
        spec = {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": pod_template(GPU),
        }
        return {"name": name, "replicas": replicas, "template": {"spec": spec}}

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "js",
            "namespace": "ml",
            "annotations": {"corral.dev/network-topology": "hard:1"},
        },
        "spec": {"replicatedJobs": [rjob("workers", 2, 2)]},
    }


@pytest.mark.parametrize(
    ("volcano", "fields"),
    [
        ("1.11", set()),
        ("1.12", {"networkTopology"}),
        ("1.14", {"networkTopology", "subGroupPolicy"}),
    ],
)
async def test_written_where_the_installed_crd_declares_them(
    volcano: str, fields: set[str]
) -> None:
    # Volcano at that release, and its CRD as the chart installs it (what the webhook reads).
    async with ApiServer(versions=Versions.of(kube="1.31", volcano=volcano)) as api:
        api.store.load([o.namespace("ml")])
        crds = api.store.resource("customresourcedefinitions", "apiextensions.k8s.io")
        api.store.create(crds, "", podgroup_crd(Release.parse(volcano)))
        await _check(api.client("test"), fields)


async def _check(kube: KubeClient, fields: set[str]) -> None:
    served = await discover(kube)
    assert {"networkTopology", "subGroupPolicy"} & served.volcano_podgroup_fields == fields
    rev = review(jobset(), group="jobset.x-k8s.io", version="v1alpha2")
    result = admit(rev, None, WebhookConfig(), served)
    (intent,) = result.intents
    body = intent.render(None)
    assert {"networkTopology", "subGroupPolicy"} & set(body["spec"]) == fields
    made = await kube.create(VOLCANO_PODGROUPS, body, namespace="ml")
    assert {"networkTopology", "subGroupPolicy"} & set(made["spec"]) == fields  # not pruned
    if "networkTopology" in fields:
        assert made["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    else:
        assert any("corral.dev/network-topology is not applied" in w for w in result.warnings)
    if "subGroupPolicy" in fields:
        (sg,) = made["spec"]["subGroupPolicy"]
        assert (sg["name"], sg["subGroupSize"], sg["minSubGroups"]) == ("workers", 2, 2)
