"""The in-memory API server speaks the REST protocol the real client expects.

These tests drive it with kubernetes-asyncio's own typed APIs (not corral's layer), so a
mismatch with the real protocol shows up here and not as a puzzle in a layer test.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
import yaml
from gangplace.thirdparty import crds_dir
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubeapi import ApiServer, ApiStore
from tests.kubeapi import objects as o
from tests.kubeapi.resources import CUSTOM_TYPES

# Other projects' CRDs: $CORRAL_DATA's or ../shared's; tests marked `crds` run only then.
CRDS = crds_dir(Path(__file__).resolve().parent)


@pytest.fixture
async def typed(api: ApiServer) -> AsyncIterator[k8s.ApiClient]:
    async with k8s.ApiClient(api.configuration()) as c:
        yield c


def _status(e: ApiException) -> dict:
    return json.loads(e.body)


async def test_crud_and_status_bodies(
    api: ApiServer, typed: k8s.ApiClient, kubelet: Callable[[], int]
) -> None:
    core = k8s.CoreV1Api(typed)
    await core.create_namespace(o.namespace("ns1"))
    created = await core.create_namespaced_pod("ns1", o.pod("p1", "ns1", node="n1"))
    assert created.metadata.uid and created.metadata.resource_version
    # The status a create sends is the server's to set: Pending, until the kubelet runs it.
    assert created.status.phase == "Pending"
    kubelet()
    assert (await core.read_namespaced_pod("p1", "ns1")).status.phase == "Running"
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("ns1", o.pod("p1", "ns1"))
    assert err.value.status == 409
    assert _status(err.value)["reason"] == "AlreadyExists"
    assert _status(err.value)["message"] == 'pods "p1" already exists'
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod("nope", "ns1")
    assert err.value.status == 404 and _status(err.value)["kind"] == "Status"
    assert _status(err.value)["message"] == 'pods "nope" not found'
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("missing", o.pod("p", "missing"))
    assert err.value.status == 404 and "namespaces" in _status(err.value)["message"]
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("ns1", o.pod("Bad_Name", "ns1"))
    assert err.value.status == 422 and "RFC 1123" in _status(err.value)["message"]

    # PUT with a stale resourceVersion is a conflict; with the current one it succeeds.
    pod = await core.read_namespaced_pod("p1", "ns1")
    pod.metadata.labels = {"a": "1"}
    updated = await core.replace_namespaced_pod("p1", "ns1", pod)
    assert int(updated.metadata.resource_version) > int(pod.metadata.resource_version)
    with pytest.raises(ApiException) as err:
        await core.replace_namespaced_pod("p1", "ns1", pod)
    assert err.value.status == 409 and _status(err.value)["reason"] == "Conflict"

    # A running pod on a node is deleted gracefully: terminating until its kubelet ends it.
    await core.delete_namespaced_pod("p1", "ns1")
    terminating = await core.read_namespaced_pod("p1", "ns1")
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 30
    kubelet()
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod("p1", "ns1")
    assert err.value.status == 404


async def test_resource_versions_increase(api: ApiServer, typed: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(typed)
    await core.create_namespace(o.namespace("ns1"))
    rvs = []
    for i in range(5):
        p = await core.create_namespaced_pod("ns1", o.pod(f"p{i}", "ns1"))
        rvs.append(int(p.metadata.resource_version))
    assert rvs == sorted(rvs) and len(set(rvs)) == 5
    lst = await core.list_namespaced_pod("ns1")
    assert int(lst.metadata.resource_version) >= rvs[-1]


async def test_list_selectors(api: ApiServer, typed: k8s.ApiClient) -> None:
    api.store.load(
        [
            o.pod("a", "ns1", node="n1", labels={"app": "web"}),
            o.pod("b", "ns1", node="n2", labels={"app": "db"}),
            o.pod("c", "ns2", labels={"app": "web"}),
            o.pod("d", "ns2", node="n1", phase="Succeeded"),
        ]
    )
    core = k8s.CoreV1Api(typed)

    async def names(**kw: str) -> list[str]:
        lst = await core.list_pod_for_all_namespaces(**kw)
        return [p.metadata.name for p in lst.items]

    assert await names() == ["a", "b", "c", "d"]
    assert await names(label_selector="app=web") == ["a", "c"]
    assert await names(label_selector="app in (db),!missing") == ["b"]
    assert await names(field_selector="spec.nodeName=n1") == ["a", "d"]
    assert await names(field_selector="spec.nodeName=") == ["c"]
    assert await names(field_selector="status.phase!=Succeeded,status.phase!=Failed") == [
        "a",
        "b",
        "c",
    ]
    assert await names(field_selector="metadata.namespace=ns2") == ["c", "d"]
    assert await names(field_selector="metadata.name=b") == ["b"]
    assert [p.metadata.name for p in (await core.list_namespaced_pod("ns2")).items] == ["c", "d"]
    with pytest.raises(ApiException) as err:
        await names(field_selector="spec.bogus=1")
    assert err.value.status == 400 and "field label not supported: spec.bogus" in err.value.body
    with pytest.raises(ApiException) as err:
        await names(label_selector="app in (")
    assert err.value.status == 400


async def test_paging_is_a_consistent_snapshot(api: ApiServer, typed: k8s.ApiClient) -> None:
    api.store.load([o.pod(f"p{i:02d}", "ns1") for i in range(7)])
    core = k8s.CoreV1Api(typed)
    first = await core.list_namespaced_pod("ns1", limit=3)
    assert [p.metadata.name for p in first.items] == ["p00", "p01", "p02"]
    assert first.metadata.remaining_item_count == 4
    # A change between pages does not show up in the rest of this list.
    api.store.delete(api.store.resource("pods"), "ns1", "p05")
    second = await core.list_namespaced_pod("ns1", limit=3, _continue=first.metadata._continue)
    third = await core.list_namespaced_pod("ns1", limit=3, _continue=second.metadata._continue)
    assert [p.metadata.name for p in second.items + third.items] == ["p03", "p04", "p05", "p06"]
    assert not third.metadata._continue
    assert second.metadata.resource_version == first.metadata.resource_version
    # An expired continue token is 410, as the API server answers.
    page = await core.list_namespaced_pod("ns1", limit=2)
    api.store.expire_continues()
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_pod("ns1", limit=2, _continue=page.metadata._continue)
    assert err.value.status == 410 and _status(err.value)["reason"] == "Expired"


async def test_list_at_old_resource_version(api: ApiServer, typed: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(typed)
    await core.create_namespace(o.namespace("ns1"))
    await core.create_namespaced_pod("ns1", o.pod("a", "ns1"))
    rv = (await core.list_namespaced_pod("ns1")).metadata.resource_version
    await core.create_namespaced_pod("ns1", o.pod("b", "ns1"))
    await core.delete_namespaced_pod("a", "ns1")
    then = await core.list_namespaced_pod(
        "ns1", resource_version=rv, resource_version_match="Exact"
    )
    assert [p.metadata.name for p in then.items] == ["a"]
    api.store.compact()
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_pod("ns1", resource_version=rv, resource_version_match="Exact")
    assert err.value.status == 410
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_pod("ns1", resource_version="999999999")
    assert err.value.status == 504


async def _events(api: ApiServer, query: str, n: int, timeout: float = 3.0) -> list[dict]:
    """The first ``n`` events of a raw watch request."""
    kube = api.client()
    out: list[dict] = []
    resp = await kube._send(
        "GET", "/api/v1/pods", [tuple(kv.split("=", 1)) for kv in query.split("&")]
    )  # type: ignore[misc]
    try:
        async with asyncio.timeout(timeout):
            async for line in resp.content:
                if line.strip():
                    out.append(json.loads(line))
                    if len(out) >= n:
                        break
    finally:
        resp.close()
    return out


async def test_watch_events_and_selector_transitions(api: ApiServer) -> None:
    store = api.store
    pods = store.resource("pods")
    store.load([o.pod("a", "ns1", node="n1")])
    rv = str(store.rv)
    store.create(pods, "ns1", o.pod("b", "ns1", node="n1"))
    # A PUT of the pod leaves its status alone (pods have a status subresource).
    put = store.replace(
        pods, "ns1", "a", o.pod("a", "ns1", node="n1", phase="Failed"), dry_run=True
    )
    assert put["status"]["phase"] == "Running"
    done = o.pod("a", "ns1", node="n1", phase="Succeeded")
    store.replace(pods, "ns1", "a", done, subresource="status")  # leaves the selection: DELETED
    store.replace(
        pods, "ns1", "a", o.pod("a", "ns1", node="n1"), subresource="status"
    )  # back: ADDED
    store.replace(pods, "ns1", "a", o.pod("a", "ns1", node="n1", labels={"x": "1"}))
    store.delete(pods, "ns1", "b", grace_period_seconds=0)  # forced: gone at once
    events = await _events(
        api, f"watch=true&resourceVersion={rv}&fieldSelector=status.phase!=Succeeded", 5
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"),
        ("DELETED", "a"),
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "b"),
    ]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs)
    # Without a resourceVersion the watch starts with the current objects.
    initial = await _events(api, "watch=1", 1)
    assert initial[0]["type"] == "ADDED" and initial[0]["object"]["metadata"]["name"] == "a"


async def test_watch_bookmarks_and_gone(api: ApiServer) -> None:
    store = api.store
    store.load([o.pod("a", "ns1")])
    rv = str(store.rv)
    events = await _events(api, f"watch=true&resourceVersion={rv}&allowWatchBookmarks=true", 1)
    assert events[0]["type"] == "BOOKMARK"
    assert events[0]["object"]["metadata"]["resourceVersion"] == str(store.rv)
    store.create(store.resource("pods"), "ns1", o.pod("b", "ns1"))
    store.compact()
    events = await _events(api, f"watch=true&resourceVersion={rv}", 1)
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"


async def test_bounded_history_expires_old_versions() -> None:
    store = ApiStore(history=3)
    store.load([o.namespace("ns1")])
    pods = store.resource("pods")
    start = str(store.rv)
    for i in range(3):
        store.create(pods, "ns1", o.pod(f"p{i}", "ns1"))
    assert store.watch(pods, resource_version=start).queue.qsize() == 3
    store.create(pods, "ns1", o.pod("p3", "ns1"))
    with pytest.raises(Exception, match="too old resource version"):
        store.watch(pods, resource_version=start)


async def test_pdb_status_follows_pods(
    api: ApiServer, typed: k8s.ApiClient, kubelet: Callable[[], int]
) -> None:
    store = api.store
    rs = ("ReplicaSet", "w")  # an owner with a scale: every kind of budget is computed
    store.load([o.pod(f"w{i}", "ns1", node="n1", labels={"app": "w"}, owner=rs) for i in range(4)])
    store.load([o.pod("sick", "ns1", node="n1", labels={"app": "w"}, ready=False, owner=rs)])
    policy = k8s.PolicyV1Api(typed)
    cases = [
        ({"min_available": 2}, 2, 2),
        ({"min_available": "50%"}, 3, 1),  # 50% of 5 expected, rounded up
        ({"max_unavailable": 1}, 4, 0),
        ({"max_unavailable": "30%"}, 3, 1),  # 5 - ceil(1.5)
        ({}, 0, 4),
    ]
    for i, (kw, desired, allowed) in enumerate(cases):
        created = await policy.create_namespaced_pod_disruption_budget(
            "ns1", o.pdb(f"b{i}", "ns1", match_labels={"app": "w"}, **kw)
        )
        # The create answer has zeros: the disruption controller writes the status after.
        assert created.status.observed_generation is None
        assert (created.status.expected_pods, created.status.disruptions_allowed) == (0, 0)
        pdb = await policy.read_namespaced_pod_disruption_budget(f"b{i}", "ns1")
        assert (pdb.status.expected_pods, pdb.status.current_healthy) == (5, 4)
        assert (pdb.status.desired_healthy, pdb.status.disruptions_allowed) == (desired, allowed), (
            kw
        )
    with pytest.raises(ApiException) as err:
        await policy.create_namespaced_pod_disruption_budget(
            "ns1", o.pdb("both", "ns1", min_available=1, max_unavailable=1)
        )
    assert err.value.status == 422
    # A new healthy pod raises what the budget allows (once its kubelet runs it).
    store.create(store.resource("pods"), "ns1", o.pod("w9", "ns1", node="n1", labels={"app": "w"}))
    kubelet()
    b0 = await policy.read_namespaced_pod_disruption_budget("b0", "ns1")
    assert b0.status.disruptions_allowed == 3


async def test_eviction_honours_budgets(
    api: ApiServer, typed: k8s.ApiClient, kubelet: Callable[[], int]
) -> None:
    store = api.store
    store.load([o.pod(f"w{i}", "ns1", node="n1", labels={"app": "w"}) for i in range(3)])
    store.load([o.pod("pending", "ns1", labels={"app": "w"})])
    store.create(
        store.resource("poddisruptionbudgets", "policy"),
        "ns1",
        o.pdb("b", "ns1", match_labels={"app": "w"}, min_available=2),
    )
    core = k8s.CoreV1Api(typed)

    def eviction(name: str) -> dict:
        return {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": "ns1"},
        }

    await core.create_namespaced_pod_eviction("w0", "ns1", eviction("w0"), dry_run="All")
    assert store.find(store.resource("pods"), "ns1", "w0") is not None  # dry run
    await core.create_namespaced_pod_eviction("w0", "ns1", eviction("w0"))
    w0 = store.get(store.resource("pods"), "ns1", "w0")  # terminating, marked
    assert w0["metadata"]["deletionTimestamp"]
    assert {"type": "DisruptionTarget", "reason": "EvictionByEvictionAPI"}.items() <= next(
        c for c in w0["status"]["conditions"] if c["type"] == "DisruptionTarget"
    ).items()
    kubelet()
    assert store.find(store.resource("pods"), "ns1", "w0") is None
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_eviction("w1", "ns1", eviction("w1"))
    body = _status(err.value)
    assert err.value.status == 429
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert "needs 2 healthy pods and has 2 currently" in body["details"]["causes"][0]["message"]
    # A pending pod is evicted whatever the budget says.
    await core.create_namespaced_pod_eviction("pending", "ns1", eviction("pending"))
    # A second budget over the same pods: the eviction subresource refuses.
    store.create(
        store.resource("poddisruptionbudgets", "policy"),
        "ns1",
        o.pdb("b2", "ns1", match_labels={"app": "w"}),
    )
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_eviction("w1", "ns1", eviction("w1"))
    assert err.value.status == 500 and "more than one PodDisruptionBudget" in err.value.body


async def test_evicted_pods_count_until_replaced(
    api: ApiServer, kubelet: Callable[[], int]
) -> None:
    """Under maxUnavailable: 1, one eviction uses the budget up until the pod's
    replacement appears, as with a workload controller."""
    store = api.store
    pods, pdbs = store.resource("pods"), store.resource("poddisruptionbudgets", "policy")
    store.load(
        [
            o.pod(f"w{i}", "ns1", node="n1", labels={"app": "w"}, owner=("ReplicaSet", "w"))
            for i in range(4)
        ]
    )
    store.create(pdbs, "ns1", o.pdb("b", "ns1", match_labels={"app": "w"}, max_unavailable=1))
    evict = {"kind": "Eviction", "metadata": {"name": "w0"}}
    store.evict("ns1", "w0", evict)
    status = store.get(pdbs, "ns1", "b")["status"]
    assert (status["expectedPods"], status["currentHealthy"], status["disruptionsAllowed"]) == (
        4,
        3,
        0,
    )
    # Seen terminating, the pod leaves disruptedPods at once (as the real controller does).
    assert "disruptedPods" not in status
    with pytest.raises(Exception, match="disruption budget"):
        store.evict("ns1", "w1", {"kind": "Eviction", "metadata": {"name": "w1"}})
    kubelet()  # w0 is gone, not yet replaced: still expected
    status = store.get(pdbs, "ns1", "b")["status"]
    assert (status["expectedPods"], status["disruptionsAllowed"]) == (4, 0)
    store.create(
        pods,
        "ns1",
        o.pod("w0-new", "ns1", node="n1", labels={"app": "w"}, owner=("ReplicaSet", "w")),
    )
    kubelet()  # the replacement runs
    status = store.get(pdbs, "ns1", "b")["status"]
    assert (status["expectedPods"], status["disruptionsAllowed"]) == (4, 1)
    assert "disruptedPods" not in status


async def test_patches_and_dry_run(api: ApiServer, typed: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(typed)
    await core.create_namespace(o.namespace("ns1"))
    await core.create_namespaced_pod("ns1", o.pod("p", "ns1", labels={"a": "1", "b": "2"}))
    # The typed client sends a dict as a strategic merge patch, read as a merge patch.
    p = await core.patch_namespaced_pod("p", "ns1", {"metadata": {"labels": {"a": None, "c": "3"}}})
    assert p.metadata.labels == {"b": "2", "c": "3"}
    p = await core.patch_namespaced_pod(
        "p", "ns1", [{"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}}]
    )
    assert p.metadata.annotations == {"x": "y"}
    p = await core.patch_namespaced_pod(
        "p",
        "ns1",
        {"metadata": {"labels": {"d": "4"}}},
        _content_type="application/merge-patch+json",
    )
    assert p.metadata.labels == {"b": "2", "c": "3", "d": "4"}
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod(
            "p", "ns1", [{"op": "test", "path": "/metadata/name", "value": "q"}]
        )
    assert err.value.status == 422
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod(
            "p",
            "ns1",
            {"metadata": {"resourceVersion": "1"}},
            _content_type="application/merge-patch+json",
        )
    assert err.value.status == 409
    rv = api.store.rv
    await core.patch_namespaced_pod("p", "ns1", {"metadata": {"labels": {"e": "5"}}}, dry_run="All")
    await core.create_namespaced_pod("ns1", o.pod("q", "ns1"), dry_run="All")
    await core.delete_namespaced_pod("p", "ns1", dry_run="All")
    assert api.store.rv == rv
    assert "e" not in (await core.read_namespaced_pod("p", "ns1")).metadata.labels
    with pytest.raises(ApiException):
        await core.read_namespaced_pod("q", "ns1")


async def test_custom_resources(api: ApiServer, typed: k8s.ApiClient) -> None:
    custom = k8s.CustomObjectsApi(typed)
    await k8s.CoreV1Api(typed).create_namespace(o.namespace("ns1"))
    await custom.create_namespaced_custom_object(
        "scheduling.volcano.sh",
        "v1beta1",
        "ns1",
        "podgroups",
        o.volcano_podgroup("g", "ns1", min_member=4),
    )
    await custom.create_cluster_custom_object(
        "scheduling.volcano.sh", "v1beta1", "queues", o.volcano_queue("q", weight=2)
    )
    await custom.create_namespaced_custom_object(
        "scheduling.x-k8s.io",
        "v1alpha1",
        "ns1",
        "podgroups",
        o.cosched_podgroup("g", "ns1", min_member=2),
    )
    got = await custom.get_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", "ns1", "podgroups", "g"
    )
    assert got["spec"]["minMember"] == 4 and got["kind"] == "PodGroup"
    lst = await custom.list_cluster_custom_object("scheduling.x-k8s.io", "v1alpha1", "podgroups")
    assert [i["metadata"]["name"] for i in lst["items"]] == ["g"]
    assert lst["items"][0]["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"  # custom items keep it
    with pytest.raises(ApiException) as err:
        await custom.list_cluster_custom_object("example.com", "v1", "widgets")
    assert err.value.status == 404
    # Registering a new type makes it servable.
    api.store.register_crd(
        {
            "spec": {
                "group": "example.com",
                "names": {"plural": "widgets", "kind": "Widget"},
                "scope": "Cluster",
                "versions": [{"name": "v1", "served": True}],
            }
        }
    )
    await custom.create_cluster_custom_object(
        "example.com",
        "v1",
        "widgets",
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
    )


@pytest.mark.slow
@pytest.mark.crds
def test_custom_types_match_the_published_crds() -> None:
    assert CRDS is not None
    store = ApiStore()
    builtin_groups = {rt.group for rt in CUSTOM_TYPES}
    registered = []
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        types = store.register_crd(crd)
        assert types, f"{path.name} registered no served version"
        if crd["spec"]["group"] in builtin_groups:
            registered.extend(types)
    # The gang objects the fake serves without being told match the published CRDs exactly;
    # every other handout CRD (the workload kinds, Kueue's objects) registers too.
    assert sorted(registered, key=lambda r: r.gvr) == sorted(CUSTOM_TYPES, key=lambda r: r.gvr)


async def test_fault_injection(api: ApiServer, typed: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(typed)
    api.faults.fail(503, times=2, method="GET", path="/namespaces$")
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            await core.list_namespace()
        assert err.value.status == 503
    await core.list_namespace()  # the third goes through
    rule = api.faults.delay(0.2, path="/namespaces$")
    t0 = asyncio.get_running_loop().time()
    await core.list_namespace()
    assert asyncio.get_running_loop().time() - t0 >= 0.2
    api.faults.remove(rule)
    api.store.load([o.pod(f"p{i}", "ns1") for i in range(5)])
    api.faults.drop_watches(after_events=2)
    kube = api.client()
    resp = await kube._send("GET", "/api/v1/pods", [("watch", "true")])
    got = []
    with pytest.raises(aiohttp.ClientPayloadError):
        async for line in resp.content:
            if line.strip():
                got.append(line)
    resp.close()
    assert len(got) == 2
    assert [r.method for r in api.requests(path_contains="/namespaces")] == ["GET"] * 4


async def test_authentication(tmp_path: Path) -> None:
    async with ApiServer(tokens=frozenset({"good"})) as api:
        async with k8s.ApiClient(api.configuration(token="bad")) as c:
            with pytest.raises(ApiException) as err:
                await k8s.CoreV1Api(c).list_namespace()
            assert err.value.status == 401
        async with k8s.ApiClient(api.configuration(token="good")) as c:
            await k8s.CoreV1Api(c).list_namespace()
        assert [r.authorization for r in api.log] == ["Bearer bad", "Bearer good"]
