"""The in-memory API server held to the released schemas: built-in objects decoded by
their release's OpenAPI schema (unknown fields at any depth by ``fieldValidation``,
wrong types refused as the decoder refuses them), custom resources checked by their
CRD's structural schema, the status a create sends dropped where the real strategy
drops it, discovery per release as the release's schemas list the kinds, and Volcano's
own Queues."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from gangplace.thirdparty import crds_dir

from tests.builders import objects as b
from tests.controllers.volcano_queue import installed_queues, synced_status
from tests.kubeapi import KUBE_VERSIONS, ApiServer, Versions, discovery
from tests.kubeapi import objects as o
from tests.kubeapi.crd_validation import custom_resource_errors
from tests.kubeapi.crds import prune
from tests.kubeapi.fields import SPEC_FIELDS, SPEC_FIELDS_SINCE, SPEC_FIELDS_UNTIL, TOP_FIELDS
from tests.kubeapi.released_schemas import decode, kinds_of
from tests.kubeapi.resources import BUILTIN_TYPES, NATIVE_TYPES
from tests.kubeapi.scheduler_crds import volcano_podgroup_schema
from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.store import ApiStore
from tests.kubeapi.test_admission import Client
from tests.kubeapi.versions import Release

Json = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
async def client(api: ApiServer) -> AsyncIterator[Client]:
    async with aiohttp.ClientSession() as s:
        yield Client(api, s)


def pod(**container: Any) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox", **container}]},
    }


# --- built-in kinds: decoding -----------------------------------------------------------


def test_a_wrong_type_is_worded_as_the_real_decoder_words_it() -> None:
    """As a real server answered a StatefulSet whose env value was a number."""
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "s"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "spec": {"containers": [{"name": "c", "env": [{"name": "P", "value": 1}]}]}
            },
        },
    }
    found = decode(Release(1, 28), sts, "apps/v1", "StatefulSet")
    assert found.mismatch is not None
    assert found.mismatch.message() == (
        "json: cannot unmarshal number into Go struct field "
        "EnvVar.spec.template.spec.containers.env.value of type string"
    )


@pytest.mark.parametrize(
    ("container", "message"),
    [
        ({"image": 3}, "Container.spec.containers.image of type string"),
        (
            {"ports": [{"containerPort": "80"}]},
            "ContainerPort.spec.containers.ports.containerPort of type int32",
        ),
        (
            {"resources": {"limits": ["1"]}},
            "ResourceRequirements.spec.containers.resources.limits of type "
            "map[string]resource.Quantity",
        ),
    ],
)
async def test_a_wrong_type_is_400_whatever_the_field_validation(
    client: Client, container: Json, message: str
) -> None:
    for mode in ("Strict", "Warn", "Ignore"):
        status, body, _ = await client.send(
            "POST", f"{PODS}?fieldValidation={mode}", pod(**container)
        )
        assert (status, body["reason"]) == (400, "BadRequest")
        assert body["message"].startswith('Pod in version "v1" cannot be handled as a Pod: json: ')
        assert body["message"].endswith(message)
    assert client.api.store.find(client.api.store.resource("pods"), "default", "p") is None


@pytest.mark.parametrize(
    ("mode", "status", "warnings"),
    [
        ("Strict", 400, []),
        ("Warn", 201, ['299 - "unknown field \\"spec.containers[0].bogus\\""']),
        ("Ignore", 201, []),
    ],
)
async def test_unknown_fields_deep_in_an_object_follow_field_validation(
    client: Client, mode: str, status: int, warnings: list[str]
) -> None:
    got, body, warned = await client.send("POST", f"{PODS}?fieldValidation={mode}", pod(bogus=1))
    assert got == status, body
    assert warned == warnings
    if status == 400:
        assert body["message"] == (
            'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
            'unknown field "spec.containers[0].bogus"'
        )
    else:
        assert "bogus" not in body["spec"]["containers"][0]


def test_a_json_patch_adding_an_unknown_field_stores_without_it() -> None:
    store = ApiStore()
    pods = store.resource("pods")
    store.create(pods, "default", pod())
    patched = store.patch(
        pods,
        "default",
        "p",
        "application/json-patch+json",
        [{"op": "add", "path": "/spec/containers/0/bogus", "value": 1}],
    )
    assert "bogus" not in patched["spec"]["containers"][0]
    assert store.dropped == ["Pod p: spec.containers[0].bogus"]


def test_a_field_of_a_later_release_is_unknown_before_it() -> None:
    """Pod ``resources`` arrived in 1.32 (kubernetes v1.32 core/v1 types.go PodSpec)."""
    spec = {"resources": {"limits": {"cpu": "1"}}, "containers": [{"name": "c"}]}
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    assert decode(Release(1, 31), obj, "v1", "Pod").unknown == ("spec.resources",)
    assert decode(Release(1, 32), obj, "v1", "Pod").unknown == ()


@pytest.mark.parametrize("kube", KUBE_VERSIONS, ids=str)
def test_the_fields_told_to_kubectl_are_the_releases_own(kube: Release) -> None:
    """What :mod:`.openapi` tells kubectl exists in the release's schema."""
    kinds = kinds_of(kube)
    types = {(rt.group, rt.plural): rt for rt in BUILTIN_TYPES}
    for key, top in TOP_FIELDS.items():
        rt = types[key]
        fields = {f: None for f in top}
        spec = dict.fromkeys(SPEC_FIELDS.get(key, ()), 0)
        for (g, p, f), since in SPEC_FIELDS_SINCE.items():
            if (g, p) == key and since <= kube <= SPEC_FIELDS_UNTIL.get((g, p, f), kube):
                spec[f] = 0
        if spec:
            fields["spec"] = spec  # type: ignore[assignment]
        obj = {"apiVersion": rt.api_version, "kind": rt.kind, **fields}
        assert (rt.api_version, rt.kind) in kinds
        found = decode(kube, obj, rt.api_version, rt.kind)
        assert found.unknown == (), (kube, key)


@pytest.mark.parametrize("kube", KUBE_VERSIONS, ids=str)
def test_every_object_the_server_makes_decodes_by_its_release(kube: Release) -> None:
    """The namespaces, ServiceAccounts and Queues a store starts with, and the defaults
    of a Job, go through the same check (a model's mistake fails loudly)."""
    store = ApiStore(versions=Versions.of(kube=str(kube)))
    jobs = store.resource("jobs", "batch")
    job = {
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}}},
    }
    created = store.create(jobs, "default", job)
    assert decode(kube, created, "batch/v1", "Job") == decode(kube, {}, "batch/v1", "Job")
    with pytest.raises(ValueError, match=r"does not decode by the Kubernetes .*spec\.bogus"):
        store.load([{**o.node("n1"), "spec": {"bogus": 1}}])


# --- status on create -------------------------------------------------------------------


async def test_the_status_a_create_sends_is_dropped_where_the_strategy_drops_it(
    client: Client,
) -> None:
    running = {**pod(), "status": {"phase": "Running", "podIP": "10.0.0.1"}}
    status, body, _ = await client.send("POST", PODS, running)
    assert status == 201 and body["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}}},
        "status": {"succeeded": 1},
    }
    status, body, _ = await client.send("POST", "/apis/batch/v1/namespaces/default/jobs", job)
    assert status == 201 and body["status"] == {}
    ready = {**o.node("n1"), "status": {"allocatable": {"cpu": "8"}, "capacity": {"cpu": "8"}}}
    status, body, _ = await client.send("POST", "/api/v1/nodes", ready)
    assert status == 201 and body["status"]["allocatable"] == {"cpu": "8"}  # a Node keeps it


async def test_a_custom_resource_loses_its_status_only_with_a_status_subresource(
    client: Client,
) -> None:
    """KAI's Queue (status subresource) and Volcano's PodGroup (none, v1beta1 CRD)."""
    store = client.api.store
    store.versions = Versions.of(kube="1.28", volcano="1.7", kai=True)
    queue = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {},
        "status": {"allocated": {"gpu": 1}},
    }
    status, body, _ = await client.send("POST", "/apis/scheduling.run.ai/v2/queues", queue)
    assert status == 201 and "status" not in body
    pg = {**o.volcano_podgroup("g", "default", min_member=1), "status": {"phase": "Running"}}
    path = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
    status, body, _ = await client.send("POST", path, pg)
    assert status == 201 and body["status"] == {"phase": "Running"}


# --- custom resources: structural schema --------------------------------------------------


async def test_a_custom_resource_of_a_wrong_type_is_422_as_apiextensions_words_it(
    client: Client,
) -> None:
    path = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
    pg = o.volcano_podgroup("g", "default", min_member=1)
    pg["spec"]["minMember"] = "2"
    status, body, _ = await client.send("POST", path, pg)
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'PodGroup.scheduling.volcano.sh "g" is invalid: spec.minMember: Invalid value: '
        '"string": spec.minMember in body must be of type integer: "string"'
    )
    assert body["details"]["causes"][0]["reason"] == "FieldValueTypeInvalid"


def test_structural_checks_name_every_error() -> None:
    schema = volcano_podgroup_schema(Release(1, 12))
    obj = {"spec": {"minMember": 1, "networkTopology": {"mode": "firm", "highestTierAllowed": "1"}}}
    assert custom_resource_errors(schema, obj) == [
        (
            "spec.networkTopology.mode",
            'Unsupported value: "firm": supported values: "hard", "soft"',
        ),
        (
            "spec.networkTopology.highestTierAllowed",
            'Invalid value: "string": spec.networkTopology.highestTierAllowed in body must be '
            'of type integer: "string"',
        ),
    ]
    bounded = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "maximum": 8},
                    "name": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
                    "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
                },
            }
        },
    }
    assert custom_resource_errors(bounded, {}) == [("spec", "Required value")]
    errors = custom_resource_errors(
        bounded, {"spec": {"size": 0, "name": "ABCD", "tags": ["a", 2]}}
    )
    assert errors == [
        ("spec.size", "Invalid value: 0: spec.size in body should be greater than or equal to 1"),
        ("spec.name", "Too long: may not be longer than 3"),
        ("spec.name", "Invalid value: \"ABCD\": spec.name in body should match '^[a-z]+$'"),
        ("spec.tags", "Too many: 2: must have at most 1 items"),
        (
            "spec.tags[1]",
            'Invalid value: "integer": spec.tags[1] in body must be of type string: "integer"',
        ),
    ]
    assert custom_resource_errors(bounded, {"spec": {"name": "a"}}) == [
        ("spec.size", "Required value")
    ]


def test_a_refused_custom_resource_changes_nothing() -> None:
    store = ApiStore()
    pgs = store.resource("podgroups", "scheduling.volcano.sh")
    pg = o.volcano_podgroup("g", "default", min_member=1)
    pg["spec"]["minMember"] = -1.5
    with pytest.raises(ApiStatusError) as e:
        store.create(pgs, "default", pg)
    assert e.value.code == 422 and "spec.minMember in body must be of type integer" in str(e.value)
    assert store.find(pgs, "default", "g") is None


# --- discovery per release ------------------------------------------------------------------


def _served(store: ApiStore) -> set[tuple[str, str]]:
    """(apiVersion, kind) of every resource discovery lists (subresources aside)."""
    out: set[tuple[str, str]] = set()
    groups = ["", *(g["name"] for g in discovery.api_group_list(store)["groups"])]
    for group in groups:
        doc = discovery.api_group(store, group) if group else {"versions": [{"version": "v1"}]}
        assert doc is not None
        for v in doc["versions"]:
            listed = discovery.api_resource_list(store, group, v["version"])
            assert listed is not None
            out |= {
                (listed["groupVersion"], r["kind"])
                for r in listed["resources"]
                if "/" not in r["name"]
            }
    return out


@pytest.mark.parametrize("kube", KUBE_VERSIONS, ids=str)
@pytest.mark.parametrize("native_gangs", [False, True], ids=["plain", "native-gangs"])
def test_discovery_serves_the_built_in_kinds_of_the_release(
    kube: Release, native_gangs: bool
) -> None:
    """Every built-in kind served is in the release's schemas; every built-in kind the
    server models that the release has is served (the native gang API only when the
    cluster switched it on, as :func:`.resources.served` says)."""
    store = ApiStore(versions=Versions.of(kube=str(kube), native_gangs=native_gangs))
    kinds = kinds_of(kube)
    modelled = {(rt.api_version, rt.kind) for rt in BUILTIN_TYPES}
    native = {(rt.api_version, rt.kind) for rt in NATIVE_TYPES}
    served = {gvk for gvk in _served(store) if gvk in modelled | native}
    assert sorted(served - set(kinds)) == []
    expected = {gvk for gvk in modelled | (native if native_gangs else set()) if gvk in kinds}
    assert sorted(expected - served) == []
    if not native_gangs:
        assert served & native == set()


# --- Volcano's install and queue controller ---------------------------------------------------


@pytest.mark.parametrize(
    ("volcano", "queues"),
    [("1.7", ["default"]), ("1.10", ["default"]), ("1.11", ["default", "root"])],
)
def test_volcano_starts_with_its_queues_open(volcano: str, queues: list[str]) -> None:
    store = ApiStore(versions=Versions.of(kube="1.30", volcano=volcano))
    rt = store.resource("queues", "scheduling.volcano.sh")
    got = {q["metadata"]["name"]: q for q in store.items(rt)}
    assert sorted(got) == queues
    assert got["default"]["spec"] == {"guarantee": {}, "reclaimable": True, "weight": 1}
    assert all(q["status"] == {"state": "Open", "reservation": {}} for q in got.values())


def test_no_volcano_no_queues() -> None:
    store = ApiStore(versions=Versions.of(kube="1.30", volcano=None))
    assert list(store.items(store.resource("queues", "scheduling.volcano.sh"))) == []


async def test_a_new_queue_becomes_open(client: Client) -> None:
    path = "/apis/scheduling.volcano.sh/v1beta1/queues"
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
    }
    status, body, _ = await client.send("POST", path, {**queue, "spec": {"weight": 2}})
    assert status == 201 and "status" not in body  # the answer is the object as created
    status, body, _ = await client.send("GET", f"{path}/q")
    assert body["status"] == {"state": "Open", "reservation": {}}
    status, body, _ = await client.send("POST", path, {**queue, "metadata": {"name": "default"}})
    assert (status, body["reason"]) == (409, "AlreadyExists")


# --- enums the validation checks ------------------------------------------------------------


async def test_an_enum_out_of_its_list_is_422_unsupported_value(client: Client) -> None:
    bad = pod(imagePullPolicy="Sometimes")
    bad["spec"]["restartPolicy"] = "Sometimes"
    bad["spec"]["tolerations"] = [{"key": "k", "operator": "Is"}]
    status, body, _ = await client.send("POST", PODS, bad)
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'Pod "p" is invalid: [spec.containers[0].imagePullPolicy: Unsupported value: '
        '"Sometimes": supported values: "Always", "IfNotPresent", "Never", '
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
        '"OnFailure", "Never", spec.tolerations[0].operator: Unsupported value: "Is": '
        'supported values: "Equal", "Exists"]'
    )
    assert [c["field"] for c in body["details"]["causes"]] == [
        "spec.containers[0].imagePullPolicy",
        "spec.restartPolicy",
        "spec.tolerations[0].operator",
    ]


@pytest.mark.crds
def test_volcanos_queues_and_the_builders_gang_objects_fit_the_published_crds() -> None:
    """Pruned by nothing and refused by nothing under the CRDs Volcano and
    scheduler-plugins publish (the handout's ``crds/``)."""
    folder = crds_dir(Path(__file__).resolve().parent)
    assert folder is not None

    def schema(name: str) -> Json:
        crd = yaml.safe_load((folder / name).read_text())
        (version,) = (v for v in crd["spec"]["versions"] if v.get("storage"))
        found: Json = version["schema"]["openAPIV3Schema"]
        return found

    queue_schema = schema("scheduling.volcano.sh_queues.yaml")
    pg_schema = schema("scheduling.volcano.sh_podgroups.yaml")
    cosched_schema = schema("scheduling.x-k8s.io_podgroups.yaml")
    queues = [*installed_queues(Release(1, 11)), b.queue("q", 2, capability={"cpu": "8"})]
    opened = [{**q, "status": synced_status(q)} for q in queues]
    for q in opened:
        assert prune(queue_schema, copy.deepcopy(q)) == [], q
        assert custom_resource_errors(queue_schema, q) == [], q
    groups = [
        b.podgroup("g", min_member=2, queue="default", min_resources={"nvidia.com/gpu": "4"}),
        b.podgroup("h", min_member=1, phase="Inqueue"),
    ]
    for pg in groups:
        assert prune(pg_schema, copy.deepcopy(pg)) == [], pg
        assert custom_resource_errors(pg_schema, pg) == [], pg
    cosched = o.cosched_podgroup("c", "default", min_member=2)
    assert prune(cosched_schema, copy.deepcopy(cosched)) == []
    assert custom_resource_errors(cosched_schema, cosched) == []
