"""What a tool sees first of the in-memory API server: its version, discovery, OpenAPI
v3, server-side field validation, the namespaces and ServiceAccounts it starts with,
the workload kinds with their defaults, and 401 for a token it does not know."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.kubeapi import KUBE_VERSIONS, ApiServer, Versions
from tests.kubeapi import objects as o
from tests.kubeapi.test_admission import Client

Json = dict[str, Any]


@pytest.fixture
async def client(api: ApiServer) -> AsyncIterator[Client]:
    async with aiohttp.ClientSession() as s:
        yield Client(api, s)


async def get(client: Client, path: str) -> Any:
    status, body, _ = await client.send("GET", path)
    assert status == 200, (path, body)
    return body


@pytest.mark.parametrize("kube", [str(v) for v in KUBE_VERSIONS])
async def test_the_version_is_the_release_played(kube: str) -> None:
    async with ApiServer(versions=Versions.of(kube=kube)) as api, aiohttp.ClientSession() as s:
        body = await get(Client(api, s), "/version")
    major, minor = kube.split(".")
    assert (body["major"], body["minor"], body["gitVersion"]) == (major, minor, f"v{kube}.0")


async def test_discovery_lists_exactly_what_is_served(client: Client) -> None:
    assert (await get(client, "/api"))["versions"] == ["v1"]
    groups = {g["name"]: g for g in (await get(client, "/apis"))["groups"]}
    assert {"apps", "batch", "apiextensions.k8s.io", "admissionregistration.k8s.io"} <= set(groups)
    assert groups["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    core = {r["name"]: r for r in (await get(client, "/api/v1"))["resources"]}
    assert core["pods"]["shortNames"] == ["po"] and core["pods"]["namespaced"] is True
    assert core["pods/eviction"] == {
        "name": "pods/eviction",
        "singularName": "",
        "namespaced": True,
        "group": "policy",
        "version": "v1",
        "kind": "Eviction",
        "verbs": ["create"],
    }
    assert core["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert "deletecollection" not in core["namespaces"]["verbs"]
    assert core["serviceaccounts/token"]["kind"] == "TokenRequest"
    batch = {r["name"]: r for r in (await get(client, "/apis/batch/v1"))["resources"]}
    assert set(batch) == {"jobs", "jobs/status", "cronjobs", "cronjobs/status"}
    assert batch["cronjobs"]["shortNames"] == ["cj"]
    apps = await get(client, "/apis/apps")
    assert apps["kind"] == "APIGroup" and apps["versions"] == [
        {"groupVersion": "apps/v1", "version": "v1"}
    ]
    for missing in ("/apis/apps/v1beta1", "/apis/nope", "/api/v2"):
        status, body, _ = await client.send("GET", missing)
        assert (status, body["reason"]) == (404, "NotFound"), missing


async def test_volcano_kinds_are_served_only_with_volcano() -> None:
    async with (
        ApiServer(versions=Versions.of(volcano=None)) as api,
        aiohttp.ClientSession() as s,
    ):
        client = Client(api, s)
        names = [g["name"] for g in (await get(client, "/apis"))["groups"]]
        assert "scheduling.volcano.sh" not in names
        status, _, _ = await client.send("GET", "/apis/scheduling.volcano.sh/v1beta1/queues")
        assert status == 404


WIDGETS = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"size": {"type": "integer"}},
                            }
                        },
                    }
                },
            }
        ],
    },
}
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


async def test_a_crd_serves_its_kind_at_once_and_stops_when_deleted(client: Client) -> None:
    status, crd, _ = await client.send("POST", CRDS, WIDGETS)
    assert status == 201, crd
    assert crd["spec"]["names"]["singular"] == "widget"
    assert crd["spec"]["names"]["listKind"] == "WidgetList"
    conditions = {c["type"]: (c["status"], c["reason"]) for c in crd["status"]["conditions"]}
    assert conditions == {
        "NamesAccepted": ("True", "NoConflicts"),
        "Established": ("True", "InitialNamesAccepted"),
    }
    assert crd["status"]["storedVersions"] == ["v1"]
    resources = (await get(client, "/apis/example.com/v1"))["resources"]
    assert resources == [
        {
            "name": "widgets",
            "singularName": "widget",
            "namespaced": True,
            "kind": "Widget",
            "verbs": [
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ],
            "shortNames": ["wd"],
        }
    ]
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 2, "colour": "red"},
        "extra": 1,
    }
    path = "/apis/example.com/v1/namespaces/default/widgets"
    status, body, warnings = await client.send("POST", path, widget)
    assert status == 201, body
    assert body["spec"] == {"size": 2} and "extra" not in body  # pruned
    assert warnings == [
        '299 - "unknown field \\"extra\\""',
        '299 - "unknown field \\"spec.colour\\""',
    ]
    status, body, _ = await client.send("DELETE", f"{CRDS}/widgets.example.com")
    assert status == 200, body
    status, _, _ = await client.send("GET", path)
    assert status == 404
    status, _, _ = await client.send("GET", "/apis/example.com/v1")
    assert status == 404


async def test_a_crd_is_checked_before_it_is_stored(client: Client) -> None:
    bad = {**WIDGETS, "metadata": {"name": "gadgets.example.com"}}
    status, body, _ = await client.send("POST", CRDS, bad)
    assert status == 422
    assert body["message"] == (
        'CustomResourceDefinition.apiextensions.k8s.io "gadgets.example.com" is invalid: '
        'metadata.name: Invalid value: "gadgets.example.com": must be '
        'spec.names.plural+"."+spec.group'
    )


def job_body(name: str, **spec: Any) -> Json:
    template = {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": template, **spec},
    }


@pytest.mark.parametrize(
    ("mode", "status", "warned", "kept"),
    [
        ("Strict", 400, 0, False),
        ("Warn", 201, 1, False),
        ("", 201, 1, False),
        ("Ignore", 201, 0, False),
    ],
)
async def test_field_validation(
    client: Client, mode: str, status: int, warned: int, kept: bool
) -> None:
    query = f"?fieldValidation={mode}" if mode else ""
    got, body, warnings = await client.send(
        "POST", f"/apis/batch/v1/namespaces/default/jobs{query}", job_body("j", bogus=1)
    )
    assert got == status, body
    if status == 400:
        assert body["message"] == (
            'Job in version "v1" cannot be handled as a Job: strict decoding error: '
            'unknown field "spec.bogus"'
        )
        return
    assert len(warnings) == warned
    if warned:
        assert warnings == ['299 - "unknown field \\"spec.bogus\\""']
    assert ("bogus" in body["spec"]) is kept


async def test_field_validation_knows_the_fields_of_the_release() -> None:
    """JobSpec.managedBy arrived in 1.30: unknown before."""
    for kube, known in (("1.29", False), ("1.30", True)):
        async with (
            ApiServer(versions=Versions.of(kube=kube)) as api,
            aiohttp.ClientSession() as s,
        ):
            status, body, _ = await Client(api, s).send(
                "POST",
                "/apis/batch/v1/namespaces/default/jobs?fieldValidation=Strict",
                job_body("j", managedBy="kueue.x-k8s.io/multikueue"),
            )
            assert (status == 201) is known, (kube, body)


async def test_an_unknown_field_validation_is_refused(client: Client) -> None:
    status, body, _ = await client.send(
        "POST", "/apis/batch/v1/namespaces/default/jobs?fieldValidation=Loud", job_body("j")
    )
    assert (status, body["message"]) == (
        400,
        'fieldValidation: Unsupported value: "Loud": supported values: "Ignore", "Strict", "Warn"',
    )


async def test_openapi_v3_tells_kubectl_writes_take_field_validation(client: Client) -> None:
    index = (await get(client, "/openapi/v3"))["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/batch/v1"} <= set(index)
    doc = await get(client, index["apis/apps/v1"]["serverRelativeURL"])
    item = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    patch = item["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "version": "v1",
        "kind": "Deployment",
    }
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    spec = doc["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]
    assert {"replicas", "selector", "template", "strategy"} <= set(spec)
    status, _, _ = await client.send("GET", "/openapi/v3/apis/apps/v1beta1")
    assert status == 404


async def test_the_server_starts_with_the_system_namespaces_and_default_service_accounts(
    client: Client,
) -> None:
    namespaces = await get(client, "/api/v1/namespaces")
    names = [n["metadata"]["name"] for n in namespaces["items"]]
    assert sorted(names) == ["default", "kube-node-lease", "kube-public", "kube-system"]
    status, _, _ = await client.send("POST", "/api/v1/namespaces", o.namespace("ml"))
    assert status == 201
    sas = await get(client, "/api/v1/serviceaccounts")
    assert sorted(
        (s["metadata"]["namespace"], s["metadata"]["name"]) for s in sas["items"]
    ) == sorted((ns, "default") for ns in [*names, "ml"])


@pytest.mark.parametrize(
    ("path", "kind", "defaults"),
    [
        (
            "/apis/apps/v1/namespaces/default/deployments",
            "Deployment",
            {
                "replicas": 1,
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600,
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
                },
            },
        ),
        (
            "/apis/apps/v1/namespaces/default/statefulsets",
            "StatefulSet",
            {
                "replicas": 1,
                "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "persistentVolumeClaimRetentionPolicy": {
                    "whenDeleted": "Retain",
                    "whenScaled": "Retain",
                },
            },
        ),
        ("/apis/apps/v1/namespaces/default/replicasets", "ReplicaSet", {"replicas": 1}),
    ],
)
async def test_workloads_get_the_real_defaults(
    client: Client, path: str, kind: str, defaults: Json
) -> None:
    template = {
        "metadata": {"labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    body = {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "a"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template},
    }
    status, got, _ = await client.send("POST", path, body)
    assert status == 201, got
    for key, value in defaults.items():
        assert got["spec"][key] == value, key
    pod_spec = got["spec"]["template"]["spec"]
    assert (pod_spec["restartPolicy"], pod_spec["schedulerName"]) == (
        "Always",
        "default-scheduler",
    )


async def test_a_cron_job_gets_the_real_defaults(client: Client) -> None:
    body = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {
            "schedule": "0 3 * * *",
            "jobTemplate": {"spec": {"template": job_body("x")["spec"]["template"]}},
        },
    }
    status, got, _ = await client.send("POST", "/apis/batch/v1/namespaces/default/cronjobs", body)
    assert status == 201, got
    spec = got["spec"]
    assert (
        spec["concurrencyPolicy"],
        spec["suspend"],
        spec["successfulJobsHistoryLimit"],
        spec["failedJobsHistoryLimit"],
    ) == ("Allow", False, 3, 1)


async def test_an_unknown_token_is_401_and_no_token_is_the_admin(client: Client) -> None:
    async with client.session.get(
        client.api.url + "/api/v1/namespaces", headers={"Authorization": "Bearer guess"}
    ) as r:
        assert r.status == 401
        assert (await r.json())["reason"] == "Unauthorized"
    assert (await get(client, "/api/v1/namespaces"))["items"]
    client.api.accept("known")
    async with client.session.get(
        client.api.url + "/api/v1/namespaces", headers={"Authorization": "Bearer known"}
    ) as r:
        assert r.status == 200


async def test_a_strategic_merge_patch_directive_is_no_unknown_field(client: Client) -> None:
    status, _, _ = await client.send(
        "POST", "/api/v1/namespaces/default/pods", o.pod("p", "default")
    )
    assert status == 201
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "main"}],
            "activeDeadlineSeconds": 60,
        }
    }
    status, body, warnings = await client.send(
        "PATCH",
        "/api/v1/namespaces/default/pods/p?fieldValidation=Strict",
        patch,
        "application/strategic-merge-patch+json",
    )
    assert (status, warnings) == (200, []), body
    status, body, _ = await client.send(
        "PATCH",
        "/api/v1/namespaces/default/pods/p?fieldValidation=Strict",
        {"spec": {"bogus": 1}},
        "application/merge-patch+json",
    )
    assert (status, body["message"]) == (400, 'strict decoding error: unknown field "spec.bogus"')


KUBECTL_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)


@pytest.mark.parametrize(("kube", "version"), [("1.28", "v2beta1"), ("1.30", "v2"), ("1.37", "v2")])
async def test_aggregated_discovery_for_a_client_that_asks_for_it(kube: str, version: str) -> None:
    async with ApiServer(versions=Versions.of(kube=kube)) as api, aiohttp.ClientSession() as s:
        async with s.get(api.url + "/apis", headers={"Accept": KUBECTL_ACCEPT}) as r:
            assert r.headers["Content-Type"] == (
                f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
            )
            body = await r.json(content_type=None)
        async with s.get(api.url + "/api", headers={"Accept": KUBECTL_ACCEPT}) as r:
            core = await r.json(content_type=None)
        async with s.get(api.url + "/apis", headers={"Accept": "application/json"}) as r:
            assert r.headers["Content-Type"] == "application/json"
            assert (await r.json())["kind"] == "APIGroupList"
    assert (body["kind"], body["apiVersion"]) == (
        "APIGroupDiscoveryList",
        f"apidiscovery.k8s.io/{version}",
    )
    groups = {g["metadata"]["name"]: g for g in body["items"]}
    (batch,) = groups["batch"]["versions"]
    cronjobs = next(r for r in batch["resources"] if r["resource"] == "cronjobs")
    assert cronjobs == {
        "resource": "cronjobs",
        "responseKind": {"group": "batch", "version": "v1", "kind": "CronJob"},
        "scope": "Namespaced",
        "singularResource": "cronjob",
        "verbs": [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ],
        "shortNames": ["cj"],
        "categories": ["all"],
        "subresources": [
            {
                "subresource": "status",
                "responseKind": {"group": "batch", "version": "v1", "kind": "CronJob"},
                "verbs": ["get", "patch", "update"],
            }
        ],
    }
    (v1,) = core["items"][0]["versions"]
    pods = next(r for r in v1["resources"] if r["resource"] == "pods")
    eviction = next(s for s in pods["subresources"] if s["subresource"] == "eviction")
    assert eviction["responseKind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}


async def test_a_server_with_a_ca_publishes_it_in_every_namespace(
    api: ApiServer, client: Client
) -> None:
    api.store.publish_root_ca("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    status, _, _ = await client.send("POST", "/api/v1/namespaces", o.namespace("ml"))
    assert status == 201
    for ns in ("default", "kube-system", "ml"):
        cm = await get(client, f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt")
        assert cm["data"]["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
        assert "kubernetes.io/description" in cm["metadata"]["annotations"]
