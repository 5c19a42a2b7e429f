"""The in-memory API server's object lifecycle beside the kubelet model: graceful deletion
and finalizers, strategic merge patches, and the kubelet's Failed-then-delete, checked
against what the real control plane recorded."""

from __future__ import annotations

import asyncio

import pytest

from tests.kubeapi import ApiServer, ApiStatusError, ApiStore
from tests.kubeapi import objects as o
from tests.kubeapi.kubelet import Kubelet
from tests.kubeapi.kubelet.kubelet import finish_pod
from tests.kubeapi.recording import assert_same, load
from tests.kubeapi.strategic import strategic_merge

# the smallest pod template a Job may have (restartPolicy is required)
_NEVER = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}

SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
EVICT = {"apiVersion": "policy/v1", "kind": "Eviction"}


def _store() -> ApiStore:
    store = ApiStore()
    store.load([o.namespace("ns"), o.node("n1")])
    return store


def _settle(store: ApiStore, kubelet: Kubelet) -> None:
    while kubelet.step(store):
        pass


def _failed_pod_of_variant_b() -> dict:
    rec = load("job-evicted-podfailurepolicy")
    for obs in rec.observed:
        for pod in (obs.object or {}).get("items") or ():
            if pod["status"].get("phase") == "Failed":
                return pod
    raise AssertionError("the recording has no Failed pod")


def test_a_real_kubelet_fails_a_terminating_pod_then_deletes_it() -> None:
    """Variant B of job-evicted-podfailurepolicy: phase Failed, exit 143, Ready False,
    DisruptionTarget kept, the grace period still running; gone on the next tick."""
    recorded = _failed_pod_of_variant_b()
    store = ApiStore()
    ns = recorded["metadata"]["namespace"]
    store.load([o.namespace(ns), o.node("n1")])
    pods = store.resource("pods")
    meta = recorded["metadata"]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": meta["generateName"],
            "labels": meta["labels"],
            "ownerReferences": meta["ownerReferences"],
        },
        "spec": {
            "restartPolicy": recorded["spec"]["restartPolicy"],
            "containers": [
                {k: c[k] for k in ("name", "image", "command", "resources")}
                for c in recorded["spec"]["containers"]
            ],
        },
    }
    name = store.create(pods, ns, body)["metadata"]["name"]
    store.bind(ns, name, {"kind": "Binding", "metadata": {"name": name}, "target": {"name": "n1"}})
    kubelet = Kubelet(fail_terminating=True)
    _settle(store, kubelet)
    store.evict(ns, name, {**EVICT, "metadata": {"name": name}})
    assert kubelet.step(store) == 1
    names = {meta["name"]: "<pod>", name: "<pod>", "n1": "<node>"}
    answer = store.get(pods, ns, name)
    assert_same(recorded, answer, names=names, ignore=("kind", "apiVersion"))  # a list item
    assert kubelet.step(store) == 1
    assert store.find(pods, ns, name) is None


def test_a_finalizer_keeps_a_pod_its_kubelet_deleted() -> None:
    """Variant A: evicted, deleted with grace 0 by the kubelet, a finalizer left: the pod
    stays terminating (grace 0, phase Running) until the finalizer is removed."""
    store = _store()
    pods = store.resource("pods")
    pod = o.pod("p", "ns")
    pod["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
    store.create(pods, "ns", pod)
    store.bind("ns", "p", {"kind": "Binding", "metadata": {"name": "p"}, "target": {"name": "n1"}})
    kubelet = Kubelet()
    _settle(store, kubelet)
    store.evict("ns", "p", {**EVICT, "metadata": {"name": "p"}})
    _settle(store, kubelet)
    stuck = store.get(pods, "ns", "p")
    assert stuck["metadata"]["deletionGracePeriodSeconds"] == 0
    assert stuck["status"]["phase"] == "Running"
    assert kubelet.step(store) == 0  # nothing more a kubelet can do
    store.patch(pods, "ns", "p", MERGE, {"metadata": {"finalizers": None}})
    assert store.find(pods, "ns", "p") is None


def test_deletion_is_immediate_for_unbound_and_finished_pods() -> None:
    store = _store()
    pods = store.resource("pods")
    store.create(pods, "ns", o.pod("pending", "ns"))
    store.create(pods, "ns", o.pod("running", "ns", node="n1"))
    store.delete(pods, "ns", "pending")
    assert store.find(pods, "ns", "pending") is None
    finish_pod(store, "ns", "running", exit_code=0)
    assert store.get(pods, "ns", "running")["status"]["phase"] == "Succeeded"
    store.delete(pods, "ns", "running")
    assert store.find(pods, "ns", "running") is None


def test_propagation_policies_add_their_finalizers() -> None:
    store = _store()
    jobs = store.resource("jobs", "batch")
    for name in ("fg", "orphan", "bg"):
        store.create(jobs, "ns", {"metadata": {"name": name}, "spec": {"template": _NEVER}})
    fg = store.delete(jobs, "ns", "fg", propagation_policy="Foreground")
    assert fg["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert fg["metadata"]["deletionTimestamp"] and fg["metadata"]["deletionGracePeriodSeconds"] == 0
    orphan = store.delete(jobs, "ns", "orphan", propagation_policy="Orphan")
    assert orphan["metadata"]["finalizers"] == ["orphan"]
    store.delete(jobs, "ns", "bg", propagation_policy="Background")
    assert store.find(jobs, "ns", "bg") is None
    # The garbage collector's part: the finalizer goes, and so does the object.
    store.patch(
        jobs,
        "ns",
        "fg",
        "application/json-patch+json",
        [{"op": "remove", "path": "/metadata/finalizers"}],
    )
    assert store.find(jobs, "ns", "fg") is None
    with pytest.raises(ApiStatusError, match="propagationPolicy"):
        store.delete(jobs, "ns", "orphan", propagation_policy="Sideways")


def test_strategic_merge_merges_lists_by_key() -> None:
    pod = {
        "metadata": {"finalizers": ["a"]},
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "False"},
            ]
        },
        "spec": {"tolerations": [{"key": "x"}], "containers": [{"name": "m", "image": "i"}]},
    }
    out = strategic_merge(
        pod,
        {
            "metadata": {"finalizers": ["b", "a"]},
            "status": {
                "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "PodScheduled"}],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
            "spec": {
                "tolerations": [{"key": "y"}],
                "containers": [{"name": "m", "image": "j"}, {"name": "side", "$patch": "delete"}],
            },
        },
    )
    assert out["metadata"]["finalizers"] == ["a", "b"]
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]
    assert out["spec"]["tolerations"] == [{"key": "y"}]  # no merge key: replaced
    assert out["spec"]["containers"] == [{"name": "m", "image": "j"}]
    gone = strategic_merge(
        out,
        {
            "$deleteFromPrimitiveList/finalizers": ["a"],
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
            "status": {"conditions": [{"type": "Ready", "$patch": "delete"}]},
        },
    )
    assert gone["metadata"]["finalizers"] == ["b"]
    assert [c["type"] for c in gone["status"]["conditions"]] == ["PodScheduled"]
    assert pod["status"]["conditions"][1]["status"] == "False"  # the input is untouched


def test_custom_resources_refuse_strategic_merge() -> None:
    store = _store()
    pgs = store.resource("podgroups", "scheduling.volcano.sh")
    store.create(pgs, "ns", o.volcano_podgroup("g", "ns"))
    with pytest.raises(ApiStatusError) as err:
        store.patch(pgs, "ns", "g", SMP, {"spec": {"minMember": 2}})
    assert err.value.code == 415
    assert store.patch(pgs, "ns", "g", MERGE, {"spec": {"minMember": 2}})["spec"]["minMember"] == 2


async def test_the_kubelet_loop_finishes_evictions_beside_a_live_client(
    api: ApiServer, kubelet_loop: Kubelet
) -> None:
    api.store.load([o.namespace("ns"), o.node("n1"), o.pod("p", "ns", node="n1")])
    pods = api.store.resource("pods")
    await api.client("evictor").evict("ns", "p")
    for _ in range(100):
        if api.store.find(pods, "ns", "p") is None:
            break
        await asyncio.sleep(0.02)
    assert api.store.find(pods, "ns", "p") is None
