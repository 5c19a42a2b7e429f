"""The native gang API as the in-memory API server serves it per release: which group
versions each release serves (and only when switched on), what each version refuses
with the real server's words, what may not change, and the pod's reference to its group
(accepted where served, dropped with the gate off, unknown before, immutable)."""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import pytest

from tests.kubeapi import KUBE_VERSIONS, ApiServer, ApiStatusError, ApiStore, Release, Versions
from tests.kubeapi import objects as o
from tests.kubeapi.native_objects import Group, gang_objects, refer

Json = dict[str, Any]
NS = "ml"
OWNER = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "bert", "uid": "7f1c2e4a-0000-4000-8000-000000000001"},
}
SERVED = {
    "1.35": {("v1alpha1", "workloads")},
    "1.36": {("v1alpha2", "workloads"), ("v1alpha2", "podgroups")},
    "1.37": {
        ("v1beta1", "workloads"),
        ("v1beta1", "podgroups"),
        ("v1alpha3", "workloads"),
        ("v1alpha3", "podgroups"),
        ("v1alpha3", "compositepodgroups"),
    },
}


def store_at(
    kube: str, native: bool = True, apis: set[str] | None = None, gates: tuple[str, ...] = ()
) -> ApiStore:
    versions = Versions.of(kube=kube, native_gangs=native, native_apis=apis, gates=gates)
    store = ApiStore(versions=versions)
    store.load([o.namespace(NS)])
    return store


def create(store: ApiStore, api_version: str, plural: str, obj: Json) -> Json:
    version = api_version.rpartition("/")[2]
    rt = store.types[("scheduling.k8s.io", version, plural)] if "/" in api_version else None
    if rt is None:
        rt = store.resource(plural)
    return store.create(rt, NS, copy.deepcopy(obj))


def refused(store: ApiStore, api_version: str, plural: str, obj: Json) -> str:
    with pytest.raises(ApiStatusError) as e:
        create(store, api_version, plural, obj)
    assert e.value.code == 422 and e.value.reason == "Invalid", e.value.message
    return e.value.message


def templates(n: int) -> list[Json]:
    return [{"name": f"g{i}", "schedulingPolicy": {"gang": {"minCount": 1}}} for i in range(n)]


@pytest.mark.parametrize("release", KUBE_VERSIONS, ids=str)
async def test_each_release_serves_its_own_version_only_when_switched_on(release: Release) -> None:
    want = SERVED.get(str(release), set())
    for native in (False, True):
        async with (
            ApiServer(versions=Versions.of(kube=str(release), native_gangs=native)) as api,
            aiohttp.ClientSession() as http,
        ):
            for version in ("v1alpha1", "v1alpha2", "v1alpha3", "v1beta1"):
                async with http.get(f"{api.url}/apis/scheduling.k8s.io/{version}") as r:
                    listed = (
                        {(version, res["name"]) for res in (await r.json())["resources"]}
                        if r.status == 200
                        else set()
                    )
                expected = {(v, p) for v, p in want if v == version} if native else set()
                # (v1alpha1 and v1beta1 PriorityClasses are not served here: v1 only)
                listed = {x for x in listed if "/" not in x[1]}
                assert listed == expected, (str(release), native, version, listed)
                for _, plural in expected:
                    url = f"{api.url}/apis/scheduling.k8s.io/{version}/namespaces/{NS}/{plural}"
                    async with http.get(url) as r:
                        assert r.status == 200


@pytest.mark.parametrize("kube", ["1.35", "1.36", "1.37"])
def test_the_objects_for_a_workload_are_accepted_in_each_dialect(kube: str) -> None:
    store = store_at(kube)
    versions = store.versions
    objects = gang_objects(versions, "bert", [Group("master", 1), Group("worker", 4)], owner=OWNER)
    assert objects, kube
    for api_version, plural, obj in objects:
        stored = create(store, api_version, plural, obj)
        assert stored["metadata"]["ownerReferences"][0]["name"] == "bert"
    if kube == "1.37":
        composite = gang_objects(
            versions, "lws", [Group("g0", 2), Group("g1", 2)], composite_min_groups=2
        )
        assert [p for _, p, _ in composite] == [
            "workloads",
            "compositepodgroups",
            "podgroups",
            "podgroups",
        ]
        for api_version, plural, obj in composite:
            create(store, api_version, plural, obj)


def test_at_most_8_templates() -> None:
    store = store_at("1.36")
    w = {"metadata": {"name": "big"}, "spec": {"podGroupTemplates": templates(9)}}
    assert refused(store, "scheduling.k8s.io/v1alpha2", "workloads", w) == (
        'Workload.scheduling.k8s.io "big" is invalid: spec.podGroupTemplates: Too many: 9: '
        "must have at most 8 items"
    )
    w1 = {
        "metadata": {"name": "big"},
        "spec": {"podGroups": [{"name": f"g{i}", "policy": {"basic": {}}} for i in range(9)]},
    }
    assert "spec.podGroups: Too many: 9" in refused(
        store_at("1.35"), "scheduling.k8s.io/v1alpha1", "workloads", w1
    )


def test_composite_trees_are_at_most_4_deep() -> None:
    store = store_at("1.37")

    def tree(depth: int) -> Json:
        node: Json = {"name": f"c{depth}", "schedulingPolicy": {"gang": {"minGroupCount": 1}}}
        node["podGroupTemplates"] = templates(1)
        for d in range(depth - 1, 0, -1):
            node = {
                "name": f"c{d}",
                "schedulingPolicy": {"gang": {"minGroupCount": 1}},
                "compositePodGroupTemplates": [node],
            }
        return node

    # depth counts the composite levels and the pod groups under them: 3 composites + 1
    ok = {"metadata": {"name": "ok"}, "spec": {"compositePodGroupTemplates": [tree(3)]}}
    create(store, "scheduling.k8s.io/v1beta1", "workloads", ok)
    deep = {"metadata": {"name": "deep"}, "spec": {"compositePodGroupTemplates": [tree(4)]}}
    message = refused(store, "scheduling.k8s.io/v1beta1", "workloads", deep)
    assert "maximum template hierarchy depth is 4" in message, message


def test_exactly_one_policy_and_a_positive_min_count() -> None:
    store = store_at("1.36")
    both = {"basic": {}, "gang": {"minCount": 2}}
    w = {
        "metadata": {"name": "w"},
        "spec": {"podGroupTemplates": [{"name": "a", "schedulingPolicy": both}]},
    }
    assert "must specify exactly one of: `basic`, `gang`" in refused(
        store, "scheduling.k8s.io/v1alpha2", "workloads", w
    )
    zero = {"metadata": {"name": "pg"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}}
    assert refused(store, "scheduling.k8s.io/v1alpha2", "podgroups", zero) == (
        'PodGroup.scheduling.k8s.io "pg" is invalid: spec.schedulingPolicy.gang.minCount: '
        "Invalid value: 0: must be greater than or equal to 1"
    )
    missing = {"metadata": {"name": "w2"}, "spec": {}}
    assert refused(store, "scheduling.k8s.io/v1alpha2", "workloads", missing) == (
        'Workload.scheduling.k8s.io "w2" is invalid: spec.podGroupTemplates: Required value'
    )


def test_a_1_36_workload_and_pod_group_never_change() -> None:
    store = store_at("1.36")
    objs = gang_objects(store.versions, "bert", [Group("worker", 4)])
    for api_version, plural, obj in objs:
        create(store, api_version, plural, obj)
    rt = store.types[("scheduling.k8s.io", "v1alpha2", "workloads")]
    w = copy.deepcopy(store.get(rt, NS, "bert"))
    w["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = 2
    with pytest.raises(ApiStatusError) as e:
        store.replace(rt, NS, "bert", w)
    assert e.value.message == (
        'Workload.scheduling.k8s.io "bert" is invalid: spec.podGroupTemplates: '
        "Invalid value: field is immutable"
    )


def test_a_1_37_min_count_may_change_but_templates_not_be_added() -> None:
    store = store_at("1.37")
    for api_version, plural, obj in gang_objects(store.versions, "bert", [Group("worker", 4)]):
        create(store, api_version, plural, obj)
    rt = store.types[("scheduling.k8s.io", "v1beta1", "workloads")]
    w = copy.deepcopy(store.get(rt, NS, "bert"))
    w["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = 2
    assert store.replace(rt, NS, "bert", w)["metadata"]["generation"] == 2
    w = copy.deepcopy(store.get(rt, NS, "bert"))
    w["spec"]["podGroupTemplates"].append({"name": "extra", "schedulingPolicy": {"basic": {}}})
    with pytest.raises(ApiStatusError) as e:
        store.replace(rt, NS, "bert", w)
    assert "spec.podGroupTemplates: Forbidden: items may not be added or removed" in e.value.message
    pg = store.types[("scheduling.k8s.io", "v1beta1", "podgroups")]
    g = copy.deepcopy(store.get(pg, NS, "bert-worker"))
    g["spec"]["schedulingPolicy"] = {"basic": {}}
    with pytest.raises(ApiStatusError) as e:
        store.replace(pg, NS, "bert-worker", g)
    assert "spec.schedulingPolicy: Forbidden: the policy may not be set or unset" in e.value.message


def _pod(name: str = "p") -> Json:
    return o.pod(name, namespace=NS)


@pytest.mark.parametrize("kube", ["1.35", "1.36", "1.37"])
def test_a_pod_keeps_its_group_reference_and_may_not_change_it(kube: str) -> None:
    store = store_at(kube)
    pods = store.resource("pods")
    pod = refer(store.versions, _pod(), "bert", "worker")
    stored = store.create(pods, NS, pod)
    field = "workloadRef" if kube == "1.35" else "schedulingGroup"
    assert stored["spec"][field] == pod["spec"][field]
    changed = copy.deepcopy(stored)
    changed["spec"].pop(field)
    with pytest.raises(ApiStatusError) as e:
        store.replace(pods, NS, "p", changed)
    assert e.value.message == f'Pod "p" is invalid: spec.{field}: Invalid value: field is immutable'


@pytest.mark.parametrize("kube", ["1.35", "1.36", "1.37"])
def test_with_the_gate_off_the_reference_is_dropped_without_a_word(kube: str) -> None:
    store = store_at(kube, native=False)
    on = Versions.of(kube=kube, native_gangs=True)
    stored = store.create(store.resource("pods"), NS, refer(on, _pod(), "bert", "worker"))
    assert "workloadRef" not in stored["spec"] and "schedulingGroup" not in stored["spec"]


async def test_before_its_release_the_reference_is_an_unknown_field() -> None:
    pod = refer(Versions.of(kube="1.36", native_gangs=True), _pod(), "bert", "worker")
    pod.setdefault("metadata", {}).pop("namespace", None)
    for kube, field in (("1.34", "schedulingGroup"), ("1.35", "schedulingGroup")):
        async with (
            ApiServer(versions=Versions.of(kube=kube, native_gangs=True)) as api,
            aiohttp.ClientSession() as http,
        ):
            api.store.load([o.namespace(NS)])
            url = f"{api.url}/api/v1/namespaces/{NS}/pods"
            async with http.post(url, json=pod, params={"fieldValidation": "Strict"}) as r:
                body = await r.json()
                assert r.status == 400, body
                assert f'unknown field "spec.{field}"' in body["message"]
            async with http.post(url, json=pod) as r:
                assert r.status == 201
                assert f'unknown field \\"spec.{field}\\"' in r.headers["Warning"] or (
                    f'unknown field "spec.{field}"' in r.headers["Warning"]
                )
                assert field not in (await r.json())["spec"]


def test_a_bad_reference_is_refused() -> None:
    store = store_at("1.36")
    pod = _pod()
    pod["spec"]["schedulingGroup"] = {"podGroupName": "Not_A_Name"}
    with pytest.raises(ApiStatusError) as e:
        store.create(store.resource("pods"), NS, pod)
    assert e.value.message.startswith(
        'Pod "p" is invalid: spec.schedulingGroup.podGroupName: Invalid value: "Not_A_Name": '
    )


def test_a_workload_has_either_pod_groups_or_composites() -> None:
    store = store_at("1.37")
    composite = {
        "name": "c",
        "schedulingPolicy": {"gang": {"minGroupCount": 1}},
        "podGroupTemplates": [{"name": "h0", "schedulingPolicy": {"basic": {}}}],
    }
    w = {
        "metadata": {"name": "w"},
        "spec": {"podGroupTemplates": templates(1), "compositePodGroupTemplates": [composite]},
    }
    assert refused(store, "scheduling.k8s.io/v1beta1", "workloads", w) == (
        'Workload.scheduling.k8s.io "w" is invalid: spec: Invalid value: "{...}": must specify '
        "exactly one of: `podGroupTemplates`, `compositePodGroupTemplates`"
    )


# --- each release's own shapes (kubernetes/api at v0.35.0, v0.36.0, v0.37.0-beta.0) ------

V1ALPHA2 = "scheduling.k8s.io/v1alpha2"
V1ALPHA3 = "scheduling.k8s.io/v1alpha3"
V1BETA1 = "scheduling.k8s.io/v1beta1"


@pytest.mark.parametrize(
    ("apis", "served"),
    [
        ({"v1alpha3"}, {"v1alpha3"}),
        ({"v1beta1"}, {"v1beta1"}),
        ({"v1alpha3", "v1beta1"}, {"v1alpha3", "v1beta1"}),
    ],
    ids=["v1alpha3", "v1beta1", "both"],
)
async def test_1_37_serves_the_versions_the_cluster_turned_on(
    apis: set[str], served: set[str]
) -> None:
    """Each 1.37 version is off by default: a cluster turns on v1alpha3 (Workload,
    PodGroup, CompositePodGroup), v1beta1 (Workload, PodGroup) or both."""
    versions = Versions.of(kube="1.37", native_gangs=True, native_apis=apis)
    async with ApiServer(versions=versions) as api, aiohttp.ClientSession() as http:
        async with http.get(f"{api.url}/apis/scheduling.k8s.io") as r:
            listed = {v["version"] for v in (await r.json())["versions"]}
        assert listed == {"v1", *served}
        for version, plurals in (
            ("v1alpha3", {"workloads", "podgroups", "compositepodgroups"}),
            ("v1beta1", {"workloads", "podgroups"}),
        ):
            async with http.get(f"{api.url}/apis/scheduling.k8s.io/{version}") as r:
                names = (
                    {x["name"] for x in (await r.json())["resources"] if "/" not in x["name"]}
                    if r.status == 200
                    else set()
                )
            assert names == (plurals if version in served else set()), version


def test_a_release_is_asked_only_for_versions_it_has() -> None:
    with pytest.raises(ValueError, match=r"Kubernetes 1.36 has the native gang API at v1alpha2"):
        Versions.of(kube="1.36", native_gangs=True, native_apis={"v1beta1"})


def test_1_36_pod_group_names_a_workload_by_a_subdomain() -> None:
    """``workloadName`` is a k8s-long-name (v0.36.0 WorkloadPodGroupTemplateReference):
    a dotted name is valid; the template name stays a DNS label."""
    store = store_at("1.36")
    ref = {"workload": {"workloadName": "train.v2", "podGroupTemplateName": "gang"}}
    pg = {
        "metadata": {"name": "train.v2"},
        "spec": {"podGroupTemplateRef": ref, "schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    assert create(store, V1ALPHA2, "podgroups", pg)["spec"]["podGroupTemplateRef"] == ref
    bad = copy.deepcopy(pg)
    bad["metadata"]["name"] = "other"
    bad["spec"]["podGroupTemplateRef"]["workload"]["podGroupTemplateName"] = "g.1"
    assert "spec.podGroupTemplateRef.workload.podGroupTemplateName: Invalid value" in refused(
        store, V1ALPHA2, "podgroups", bad
    )


def _constrained(topology: list[Json], name: str = "bad") -> Json:
    return {
        "metadata": {"name": name},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "schedulingConstraints": {"topology": topology},
        },
    }


@pytest.mark.parametrize(("kube", "api"), [("1.36", V1ALPHA2), ("1.37", V1BETA1)])
def test_topology_constraints_are_a_list_of_keys(kube: str, api: str) -> None:
    """``schedulingConstraints.topology[{key}]``, at most one, a label key; only with
    TopologyAwareWorkloadScheduling on (else dropped, as dropDisabledPodGroupFields)."""
    store = store_at(kube, gates=("TopologyAwareWorkloadScheduling",))
    rack = [{"key": "topology.kubernetes.io/rack"}]
    stored = create(store, api, "podgroups", _constrained(rack, "pg"))
    assert stored["spec"]["schedulingConstraints"] == {"topology": rack}
    two = _constrained([{"key": "a"}, {"key": "b"}])
    assert "spec.schedulingConstraints.topology: Too many: 2: must have at most 1 items" in (
        refused(store, api, "podgroups", two)
    )
    assert "spec.schedulingConstraints.topology[0].key: Required value" in refused(
        store, api, "podgroups", _constrained([{}])
    )
    assert "spec.schedulingConstraints.topology[0].key: Invalid value" in refused(
        store, api, "podgroups", _constrained([{"key": "-rack-"}])
    )
    off = store_at(kube)
    assert "schedulingConstraints" not in create(off, api, "podgroups", _constrained(rack))["spec"]


def _pg_1_36(name: str, mode: Any = None) -> Json:
    spec: Json = {"schedulingPolicy": {"gang": {"minCount": 2}}}
    if mode is not None:
        spec["disruptionMode"] = mode
    return {"metadata": {"name": name}, "spec": spec}


def test_1_36_disruption_mode_is_pod_or_pod_group() -> None:
    """v0.36.0 ``DisruptionMode``: a string enum, ``Pod`` by default, with
    WorkloadAwarePreemption on; with it off the field is dropped."""
    store = store_at("1.36", gates=("WorkloadAwarePreemption",))
    assert create(store, V1ALPHA2, "podgroups", _pg_1_36("a", "PodGroup"))["spec"][
        "disruptionMode"
    ] == ("PodGroup")
    assert create(store, V1ALPHA2, "podgroups", _pg_1_36("b"))["spec"]["disruptionMode"] == "Pod"
    assert refused(store, V1ALPHA2, "podgroups", _pg_1_36("c", "Whole")) == (
        'PodGroup.scheduling.k8s.io "c" is invalid: spec.disruptionMode: Unsupported value: '
        '"Whole": supported values: "Pod", "PodGroup"'
    )
    # 1.37's union sent to 1.36: the decoder refuses the type before validation runs.
    with pytest.raises(ApiStatusError) as wrong_type:
        create(store, V1ALPHA2, "podgroups", _pg_1_36("d", {"all": {}}))
    assert (
        wrong_type.value.code == 400
        and (
            "cannot unmarshal object into Go struct field PodGroupSpec.spec.disruptionMode "
            "of type string"
        )
        in wrong_type.value.message
    )
    rt = store.types[("scheduling.k8s.io", "v1alpha2", "podgroups")]
    changed = copy.deepcopy(store.get(rt, NS, "a"))
    changed["spec"]["disruptionMode"] = "Pod"
    with pytest.raises(ApiStatusError) as e:
        store.replace(rt, NS, "a", changed)
    assert "spec.disruptionMode: Invalid value: field is immutable" in e.value.message
    off = store_at("1.36")
    stored = create(off, V1ALPHA2, "podgroups", _pg_1_36("a", "PodGroup"))
    assert "disruptionMode" not in stored["spec"]


@pytest.mark.parametrize("api", [V1ALPHA3, V1BETA1])
def test_1_37_disruption_mode_is_single_or_all(api: str) -> None:
    """v0.37.0-beta.0 ``DisruptionMode``: a union, ``{single: {}}`` by default."""
    store = store_at("1.37")
    pg = {"metadata": {"name": "a"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}
    assert create(store, api, "podgroups", pg)["spec"]["disruptionMode"] == {"single": {}}
    pg["metadata"]["name"] = "b"
    pg["spec"]["disruptionMode"] = "PodGroup"
    # 1.36's string sent to 1.37: a decode error (400), as the real server's JSON decoder.
    with pytest.raises(ApiStatusError) as e:
        create(store, api, "podgroups", pg)
    assert e.value.code == 400
    assert "cannot unmarshal string into Go struct field PodGroupSpec.spec.disruptionMode" in (
        e.value.message
    )
    pg["metadata"]["name"] = "c"
    pg["spec"]["disruptionMode"] = {"single": {}, "all": {}}
    assert "spec.disruptionMode: Invalid value" in refused(store, api, "podgroups", pg)


def test_a_composite_pod_group_s_policy_never_changes() -> None:
    """Every field of a CompositePodGroupSpec is immutable, its minGroupCount too
    (unlike a PodGroup's minCount)."""
    store = store_at("1.37")
    cpg = {
        "metadata": {"name": "c"},
        "spec": {
            "workloadRef": {"workloadName": "train.v2", "templateName": "all"},
            "schedulingPolicy": {"gang": {"minGroupCount": 2}},
        },
    }
    create(store, V1ALPHA3, "compositepodgroups", cpg)
    rt = store.types[("scheduling.k8s.io", "v1alpha3", "compositepodgroups")]
    changed = copy.deepcopy(store.get(rt, NS, "c"))
    changed["spec"]["schedulingPolicy"]["gang"]["minGroupCount"] = 1
    with pytest.raises(ApiStatusError) as e:
        store.replace(rt, NS, "c", changed)
    assert e.value.message == (
        'CompositePodGroup.scheduling.k8s.io "c" is invalid: spec.schedulingPolicy: '
        "Invalid value: field is immutable"
    )


def test_template_names_are_unique_in_the_whole_tree_with_one_priority() -> None:
    """validation.go (1.37): a name used twice anywhere in the tree, or templates with
    different priority classes, are refused."""
    store = store_at("1.37")
    tree = {
        "name": "all",
        "schedulingPolicy": {"gang": {"minGroupCount": 1}},
        "podGroupTemplates": [{"name": "all", "schedulingPolicy": {"basic": {}}}],
    }
    w = {"metadata": {"name": "w"}, "spec": {"compositePodGroupTemplates": [tree]}}
    assert refused(store, V1BETA1, "workloads", w) == (
        'Workload.scheduling.k8s.io "w" is invalid: spec.compositePodGroupTemplates[0]'
        '.podGroupTemplates[0].name: Duplicate value: "all"'
    )
    two = templates(2)
    two[0]["priorityClassName"] = "high"
    assert "all priority and priorityClassName values must be identical" in refused(
        store, V1BETA1, "workloads", {"metadata": {"name": "p"}, "spec": {"podGroupTemplates": two}}
    )


def test_without_v1alpha3_there_is_no_composite_to_build() -> None:
    versions = Versions.of(kube="1.37", native_gangs=True, native_apis={"v1beta1"})
    with pytest.raises(ValueError, match="serves no CompositePodGroup"):
        gang_objects(versions, "w", [Group("a", 1), Group("b", 1)], composite_min_groups=2)
