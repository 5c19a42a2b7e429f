"""API_CALLS is exactly what the layer does: every request seen on the wire while the
informers, the evictor, the leader elector, the descheduler's marks and the webhook's
writes run is declared, and every declared call is made."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from gangplace.kube import (
    API_CALLS,
    ClusterCache,
    EvictionTarget,
    Evictor,
    KubeClient,
    LeaderElector,
    UndeclaredApiCall,
)
from gangplace.kube.resources import (
    COSCHED_PODGROUPS,
    NATIVE_COMPOSITES,
    NATIVE_PODGROUPS,
    NATIVE_WORKLOADS,
    NODES,
    PODS,
    SUSPENDABLE_WORKLOADS,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOADS,
    pods_on_node,
)

from descheduler.running.ledger_store import LedgerStore
from tests.kubeapi import ApiServer
from tests.kubeapi import objects as o
from tests.kubeapi.app import _resolve
from tests.kubeapi.versions import Versions

# Pods of a workload with a scale (a budget with maxUnavailable needs one to be computed).
_RS = ("ReplicaSet", "w")

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


async def demo_calls(api: ApiServer, kube: KubeClient) -> None:
    """kubectl corral demo's own calls: its checks, namespaces, a Job, a node's taint
    and pretend GPUs, and their removal."""
    import io

    from kubectl_corral.demo import Demo, job_manifest

    mwc = api.store.resource("mutatingwebhookconfigurations", "admissionregistration.k8s.io")
    if api.store.find(mwc, "", "corral-webhook") is None:
        api.store.load(
            [
                {
                    **o.namespace("x"),
                    "kind": "MutatingWebhookConfiguration",
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "metadata": {"name": "corral-webhook"},
                    "webhooks": [],
                }
            ]
        )
    api.store.load([o.volcano_queue("default"), o.node("n2"), o.node("n3")])
    demo = Demo(kube, io.StringIO(), where="here", add_gpus=True, run_id="t")
    await demo.preflight()
    await demo._namespaces()
    await demo._taint("n1", True)
    await demo._create(job_manifest("j", demo.gang_ns, 1))
    await kube.delete(WORKLOADS[0], "j", namespace=demo.gang_ns)
    await demo.cleanup()


def wire_calls(api: ApiServer) -> set[tuple[str, str, str, str]]:
    out = set()
    for r in api.log:
        t = _resolve(api.store, r.path)
        if r.method == "GET":
            verb = "get" if t.name else ("watch" if r.watch else "list")
        else:
            verb = _VERBS[r.method]
        out.add((verb, t.rt.group, t.rt.plural, t.subresource))
    return out


async def test_api_calls_match_the_wire(api: ApiServer, kube: KubeClient) -> None:
    # A release with the native gang API on, whose Workloads and PodGroups the
    # descheduler's informers read.
    api.store.versions = Versions.of("1.37", native_gangs=True)
    api.store.load(
        [
            o.namespace("corral"),
            o.node("n1"),
            o.pod("p", "ns1", node="n1", labels={"app": "p"}, owner=_RS),
            o.pdb("p", "ns1", match_labels={"app": "p"}, max_unavailable=1),
        ]
    )
    async with ClusterCache(
        kube, namespaces=True, pdbs=True, priority_classes=True, volcano=True, coscheduling=True
    ) as cache:
        await cache.wait_synced(5)
        await asyncio.sleep(0.05)  # the watches are open
        elector = LeaderElector(
            kube,
            name="l",
            namespace="corral",
            identity="me",
            lease_duration=1,
            renew_deadline=0.5,
            retry_period=0.1,
        )

        async def lead() -> None:
            ev = Evictor(kube, plan="p", guard=lambda: elector.is_leader)
            rec = cache.pods.get("ns1/p")
            assert rec is not None
            results = await ev.evict_gang([EvictionTarget.from_record(rec)])
            assert results[0].outcome.value == "evicted"
            await asyncio.sleep(0.25)  # a renewal or two

        await asyncio.wait_for(elector.run(lead), 5)
    # The descheduler's marks: last-moved on PodGroups of both APIs, and its move ledger
    # (created, then read and updated).
    merge = "application/merge-patch+json"
    note = {"metadata": {"annotations": {"corral.dev/last-moved": "2026-12-02T12:00:00Z"}}}
    for pg in (o.volcano_podgroup("g", "ns1"), o.cosched_podgroup("g", "ns1")):
        api.store.load([pg])
    await kube.patch(VOLCANO_PODGROUPS, "g", note, namespace="ns1", content_type=merge)
    await kube.patch(COSCHED_PODGROUPS, "g", note, namespace="ns1", content_type=merge)
    ledger = LedgerStore(kube, "corral")
    for unit in ("ns1/a", "ns1/b"):
        await ledger.record("last_moved", unit, datetime(2026, 12, 2, tzinfo=UTC), 3600)
    await webhook_calls(api, kube)
    await descheduler_workload_calls(api, kube)
    await demo_calls(api, kube)
    declared = {(c.verb, c.group, c.resource, c.subresource) for c in API_CALLS}
    seen = wire_calls(api) | await native_gang_calls()
    assert seen - declared == set(), "calls made but not declared in API_CALLS"
    assert declared - seen == set(), "calls declared but never made: drop them or test them"
    assert all(c.why for c in API_CALLS)


async def native_gang_calls() -> set[tuple[str, str, str, str]]:
    """The webhook's native gang objects (backend kubernetes) on a 1.37 cluster with the
    native gang API on: a Workload, PodGroup and CompositePodGroup each made, and joined
    by a second pod of a bare-pod gang (the wire calls)."""
    from tests.kubeapi import Versions
    from webhook.podgroup_intent import Existing, OwnerRef, PodGroupIntent
    from webhook.podgroups.calls import PodGroupApi

    async with ApiServer(versions=Versions.of(kube="1.37", native_gangs=True)) as api:
        api.store.load([o.namespace("ns1")])
        pods = api.store.resource("pods")
        first = api.store.create(pods, "ns1", o.pod("first", "ns1"))["metadata"]["uid"]
        second = api.store.create(pods, "ns1", o.pod("second", "ns1"))["metadata"]["uid"]
        pg = PodGroupApi(api.client("webhook"))
        ref = {"workloadName": "ng", "templateName": "gang"}
        bodies = {
            NATIVE_WORKLOADS: {
                "podGroupTemplates": [
                    {"name": "gang", "schedulingPolicy": {"gang": {"minCount": 1}}}
                ]
            },
            NATIVE_COMPOSITES: {
                "workloadRef": {**ref, "templateName": "all"},
                "schedulingPolicy": {"gang": {"minGroupCount": 1}},
            },
            NATIVE_PODGROUPS: {"workloadRef": ref, "schedulingPolicy": {"gang": {"minCount": 1}}},
        }
        for res, spec in bodies.items():
            body = {
                "apiVersion": res.api_version,
                "kind": res.kind,
                "metadata": {"name": "ng"},
                "spec": spec,
            }
            intent = PodGroupIntent(res.api_version, res.plural, "ns1", "ng", body, None)
            await pg.create(intent, intent.render(OwnerRef("v1", "Pod", "first", first)))
            joining = OwnerRef("v1", "Pod", "second", second)
            assert await pg.existing(intent, joining) is Existing.JOINED
        return wire_calls(api)


async def descheduler_workload_calls(api: ApiServer, kube: KubeClient) -> None:
    """What the descheduler does to workloads: informers of each kind it reads, a merge
    patch of each it suspends, and a PodGroup of a suspended gang removed and made again
    (both APIs). Run after :func:`webhook_calls`, which registers the workload kinds."""
    from descheduler import DeschedulerConfig
    from descheduler.running.cluster_view import ClusterView
    from tests.builders.workload_crds import workload_crd
    from tests.kubeapi import ResourceType

    # Kueue's Workloads (an informer), and the CRDs of the suspendable kinds (a GET each)
    api.store.register(
        ResourceType("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", True, builtin=False)
    )
    api.store.register(
        ResourceType(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            False,
            False,
            builtin=False,
        )
    )
    api.store.load([workload_crd("PyTorchJob")])
    view = ClusterView(kube, DeschedulerConfig(), ledger_namespace="corral")
    await view.start()
    try:
        await view.wait_synced(5)
        await asyncio.sleep(0.05)  # the watches are open
        crds = await view.switch_crds()
        assert {c["spec"]["names"]["kind"] for c in crds} == {"PyTorchJob"}
    finally:
        await view.stop()
    # after a suspend: whether the gang's pods went
    await kube.get(PODS, "first", namespace="ns1")
    # capacity_room.nominate: the waiting gang's pod nominated to its room, and cleared
    from descheduler.planning.nominate import Nomination
    from descheduler.running.suspender import Suspender

    suspender = Suspender(kube, view, DeschedulerConfig(), clock=lambda: datetime.now(UTC))
    for node, was in (("n1", ""), (None, "n1")):
        nominated = Nomination("ns1", "first", "", node, "ns1/g", "a test", was)
        assert await suspender.nominate([nominated]) == []
        got = await kube.get(PODS, "first", namespace="ns1")
        assert (got.get("status") or {}).get("nominatedNodeName") == node
    merge = "application/merge-patch+json"
    for r in SUSPENDABLE_WORKLOADS:
        body: dict[str, Any] = {
            "apiVersion": r.api_version,
            "kind": r.kind,
            "metadata": {"name": "w"},
        }
        if (r.group, r.kind) == ("batch", "Job"):  # a Job the API server accepts
            pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
            body["spec"] = {"template": {"spec": pod}}
        api.store.create(api.store.resource(r.plural, r.group), "ns1", body)
        note = {"metadata": {"annotations": {"corral.dev/suspended-by": "{}"}}}
        await kube.patch(r, "w", note, namespace="ns1", content_type=merge)
    for res in (VOLCANO_PODGROUPS, COSCHED_PODGROUPS):
        body = {"apiVersion": res.api_version, "kind": "PodGroup", "metadata": {"name": "sg"}}
        await kube.create(res, body, namespace="ns1")
        await kube.delete(res, "sg", namespace="ns1")


async def webhook_calls(api: ApiServer, kube: KubeClient) -> None:
    """What the webhook does beside the informers: PodGroups of both kinds (made, found
    made, joined by a bare pod), owner lookups of every kind, the self-signed Secret and
    caBundle."""
    from tests.kubeapi import ResourceType
    from webhook.podgroup_intent import Existing, OwnerRef, PodGroupIntent
    from webhook.podgroups.calls import PodGroupApi
    from webhook.tls.contexts import server_context
    from webhook.tls.rotation import SelfSignedManager
    from webhook.tls.store import SecretCertStore

    for r in WORKLOADS:
        if (r.group, r.version, r.plural) not in api.store.types:
            api.store.register(
                ResourceType(r.group, r.version, r.plural, r.kind, r.namespaced, builtin=False)
            )
    pods = api.store.resource("pods")
    first = api.store.create(pods, "ns1", o.pod("first", "ns1"))["metadata"]["uid"]
    second = api.store.create(pods, "ns1", o.pod("second", "ns1"))["metadata"]["uid"]
    pg = PodGroupApi(kube)
    for res in (VOLCANO_PODGROUPS, COSCHED_PODGROUPS):
        body = {"apiVersion": res.api_version, "kind": "PodGroup", "metadata": {"name": "wg"}}
        intent = PodGroupIntent(res.api_version, res.plural, "ns1", "wg", body, None)
        owner = OwnerRef("v1", "Pod", "first", first)
        await pg.create(intent, intent.render(owner))
        joining = OwnerRef("v1", "Pod", "second", second)
        assert await pg.existing(intent, joining) is Existing.JOINED
        scaled = {**body, "spec": {"minMember": 3}}
        assert await pg.update(intent, owner, scaled) is Existing.UPDATED
    assert await pg.resolve_owner("ns1", OwnerRef("v1", "Pod", "first")) == first
    for r in WORKLOADS:
        assert await pg.resolve_owner("ns1", OwnerRef(r.api_version, r.kind, "absent")) is None
    api.store.load(
        [
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "corral-webhook"},
                "webhooks": [
                    {
                        "name": "pods.corral.dev",
                        "clientConfig": {"service": {"name": "svc", "namespace": "corral"}},
                    }
                ],
            }
        ]
    )
    store = SecretCertStore(
        kube, "corral", secret="tls", webhook_config="corral-webhook", service="svc"
    )
    manager = SelfSignedManager(server_context(), store, "svc", "corral")
    await manager.ensure()
    assert manager.bundle is not None
    await store.save(manager.bundle)  # an update, as a renewal makes


async def test_undeclared_calls_are_refused(kube: KubeClient) -> None:
    with pytest.raises(UndeclaredApiCall, match="create nodes is not declared"):
        await kube.create(NODES, o.node("x"))
    with pytest.raises(UndeclaredApiCall, match=r"get queues.scheduling.volcano.sh"):
        await kube.get(VOLCANO_QUEUES, "q")


def test_paths() -> None:
    assert PODS.path() == "/api/v1/pods"
    assert PODS.path("ns1") == "/api/v1/namespaces/ns1/pods"
    assert PODS.path("ns1", "p", "eviction") == "/api/v1/namespaces/ns1/pods/p/eviction"
    assert VOLCANO_QUEUES.path(name="q") == "/apis/scheduling.volcano.sh/v1beta1/queues/q"
    assert pods_on_node("n1") == "spec.nodeName=n1"
    with pytest.raises(ValueError, match="cluster-scoped"):
        NODES.path("ns1")
    with pytest.raises(ValueError, match="needs a name"):
        PODS.path("ns1", subresource="eviction")
    rules = {c.rule for c in API_CALLS}
    assert ("create", "", "pods/eviction") in rules
