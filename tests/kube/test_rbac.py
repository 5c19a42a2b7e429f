"""gangplace.kube.rbac: every declared call is attributed to a component, the rendered
rules are least-privilege and allow what the components do on the wire, and requests
are read as the API server's authorizer reads them."""

from __future__ import annotations

import asyncio

import pytest
from gangplace.kube import (
    API_CALLS,
    ApiCall,
    ClusterCache,
    EvictionTarget,
    Evictor,
    KubeClient,
    LeaderElector,
    rbac,
)
from gangplace.kube.rbac import Grant
from gangplace.kube.resources import NODES, PODS

from tests.kubeapi import ApiServer, RequestRecord
from tests.kubeapi import objects as o
from tests.kubeapi.app import _resolve

# Pods of a workload with a scale (a budget with maxUnavailable needs one to be computed).
_RS = ("ReplicaSet", "w")

NS = rbac.NAMESPACE


def test_every_declared_call_is_attributed_and_nothing_else() -> None:
    assert rbac.attribution_problems() == []
    declared = {rbac.calls_of(c) for c in API_CALLS}
    assert set(rbac.ATTRIBUTION) == declared


def test_an_unattributed_call_is_reported() -> None:
    extra = ApiCall("delete", "scheduling.volcano.sh", "queues", why="webhook: Queues")
    problems = rbac.attribution_problems((*API_CALLS, extra))
    assert len(problems) == 1
    assert "delete queues.scheduling.volcano.sh" in problems[0]
    assert "attributed to no component" in problems[0] and "make manifests" in problems[0]


def test_stale_and_wrong_attributions_are_reported() -> None:
    bad = {
        **rbac.ATTRIBUTION,
        ("delete", "", "secrets", ""): (Grant(rbac.WEBHOOK),),
        ("create", "", "events", ""): (Grant(rbac.KUBECTL),),
        ("list", "", "nodes", ""): (Grant("scheduler"), Grant(rbac.WEBHOOK, when=("backend", "x"))),
    }
    text = "\n".join(rbac.attribution_problems(API_CALLS, bad))
    assert "delete secrets is attributed in gangplace.kube.rbac but not declared" in text
    assert "kubectl-corral is read-only" in text
    assert "unknown component 'scheduler'" in text
    assert "unknown choice backend=x" in text


def test_rules_are_merged_sorted_and_named_only_where_rbac_can() -> None:
    role = rbac.rules(rbac.DESCHEDULER, own_namespace=True)
    assert role == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [rbac.DESCHEDULER_LEDGER],
            "verbs": ["get", "update"],
        },
    ]
    # The Lease only for the leader-elected Deployment; the CronJob elects no leader.
    assert rbac.rules(rbac.DESCHEDULER, own_namespace=True, when=("descheduler", "cronjob")) == []
    assert rbac.rules(rbac.DESCHEDULER, own_namespace=True, when=("descheduler", "deployment")) == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [rbac.DESCHEDULER_LEASE],
            "verbs": ["get", "update"],
        },
    ]
    cluster = rbac.rules(rbac.DESCHEDULER)
    assert cluster[0] == {
        "apiGroups": [""],
        "resources": ["events", "pods/eviction"],
        "verbs": ["create"],
    }
    assert cluster == sorted(
        cluster, key=lambda r: (r["apiGroups"], r.get("resourceNames", []), r["verbs"])
    )
    for r in cluster:
        assert r["resources"] == sorted(r["resources"])
    # the descheduler patches PodGroups (its marks) and the workloads it suspends and
    # resumes, nothing else it reads; it deletes only PodGroups (of suspended gangs)
    patched = {res for r in cluster if "patch" in r["verbs"] for res in r["resources"]}
    assert patched == {
        "podgroups",
        "jobs",
        "jobsets",
        "pytorchjobs",
        "tfjobs",
        "mpijobs",
        "rayjobs",
    }
    deleted = {res for r in cluster if "delete" in r["verbs"] for res in r["resources"]}
    assert deleted == {"podgroups"}
    # the webhook writes nothing in every install: its PodGroups come with the backend,
    # its Secret and caBundle with self-signed certificates
    verbs = {v for r in rbac.rules(rbac.WEBHOOK) for v in r["verbs"]}
    assert verbs == {"list", "watch"}
    assert rbac.rules(rbac.WEBHOOK, own_namespace=True) == []
    for backend in ("yunikorn", "kueue"):
        assert rbac.rbac_objects(rbac.WEBHOOK, ("backend", backend)) == []
    tls = rbac.rules(rbac.WEBHOOK, own_namespace=True, when=("certs", "self-signed"))
    assert tls == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [rbac.WEBHOOK_TLS_SECRET],
            "verbs": ["get", "update"],
        },
    ]


def test_objects_bind_each_role_to_the_components_service_account() -> None:
    objs = rbac.rbac_objects(rbac.DESCHEDULER)
    assert [x["kind"] for x in objs] == ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
    for x in objs:
        assert x["metadata"]["name"] == "corral-descheduler"
    binding = objs[3]
    assert binding["metadata"]["namespace"] == NS
    assert binding["roleRef"] == {
        "apiGroup": rbac.RBAC_API,
        "kind": "Role",
        "name": "corral-descheduler",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "corral-descheduler", "namespace": NS}
    ]
    assert rbac.rbac_objects(rbac.WEBHOOK, ("certs", "cert-manager")) == []
    assert rbac.role_name(rbac.WEBHOOK, ("certs", "self-signed")) == "corral-webhook-self-signed"
    with pytest.raises(ValueError, match="runs as the user"):
        rbac.rbac_objects(rbac.KUBECTL)


def test_viewer_role_is_read_only() -> None:
    role = rbac.viewer_role()
    assert role["kind"] == "ClusterRole"
    assert {v for r in role["rules"] for v in r["verbs"]} <= {"get", "list"}
    readable = {(g, res) for r in role["rules"] for g in r["apiGroups"] for res in r["resources"]}
    assert {("", "nodes"), ("", "pods"), ("scheduling.volcano.sh", "podgroups")} <= readable
    assert rbac.allowed(rbac.KUBECTL, "list", NODES)
    assert not rbac.allowed(rbac.KUBECTL, "watch", NODES)
    assert not rbac.allowed(rbac.WEBHOOK, "create", PODS, "eviction")


@pytest.mark.parametrize(
    ("method", "path", "query", "want"),
    [
        ("GET", "/api/v1/nodes", "", (("list", "", "nodes", ""), None, "")),
        (
            "GET",
            "/api/v1/pods",
            "watch=true&resourceVersion=1",
            (("watch", "", "pods", ""), None, ""),
        ),
        ("GET", "/api/v1/namespaces/ml/pods", "", (("list", "", "pods", ""), "ml", "")),
        ("GET", "/api/v1/namespaces/ml", "", (("get", "", "namespaces", ""), None, "ml")),
        (
            "POST",
            "/api/v1/namespaces/ml/pods/p-0/eviction",
            "",
            (("create", "", "pods", "eviction"), "ml", "p-0"),
        ),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/corral-system/leases/l",
            "",
            (("update", "coordination.k8s.io", "leases", ""), "corral-system", "l"),
        ),
        (
            "PATCH",
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/corral-webhook",
            "",
            (
                ("patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", ""),
                None,
                "corral-webhook",
            ),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/ml/pods",
            "",
            (("deletecollection", "", "pods", ""), "ml", ""),
        ),
    ],
)
def test_requests_are_read_as_the_authorizer_reads_them(
    method: str, path: str, query: str, want: tuple[rbac.CallKey, str | None, str]
) -> None:
    assert rbac.request_target(method, path, query) == want


def test_paths_that_are_not_resources_are_refused() -> None:
    for path in ("/healthz", "/api/v1", "/api/v1/namespaces/ml/pods//x"):
        with pytest.raises(ValueError, match="not a resource path"):
            rbac.request_call("GET", path)


def test_permits_follows_rbac() -> None:
    roles = [
        {"kind": "ClusterRole", "metadata": {"name": "c"}, "rules": rbac.rules(rbac.DESCHEDULER)},
        {
            "kind": "Role",
            "metadata": {"name": "r", "namespace": NS},
            "rules": rbac.rules(rbac.DESCHEDULER, own_namespace=True),
        },
        {
            "kind": "Role",
            "metadata": {"name": "deployment", "namespace": NS},
            "rules": rbac.rules(
                rbac.DESCHEDULER, own_namespace=True, when=("descheduler", "deployment")
            ),
        },
    ]
    lease = ("update", "coordination.k8s.io", "leases", "")
    assert rbac.permits(roles, lease, NS, rbac.DESCHEDULER_LEASE)
    assert not rbac.permits(roles, lease, NS, "someone-elses")
    assert not rbac.permits(roles, lease, "default", rbac.DESCHEDULER_LEASE)
    assert rbac.permits(roles, ("create", "coordination.k8s.io", "leases", ""), NS)
    assert rbac.permits(roles, ("create", "", "pods", "eviction"), "ml", "p")
    assert not rbac.permits(roles, ("delete", "", "pods", ""), "ml", "p")
    assert not rbac.permits(roles, ("create", "", "pods", ""), "ml")


def _roles_of(component: str, chosen: dict[str, str]) -> list[dict[str, object]]:
    """The roles of an install with ``chosen`` (else each choice's first value)."""
    objs = rbac.rbac_objects(component)
    for choice, values in rbac.CHOICES.items():
        objs += rbac.rbac_objects(component, (choice, chosen.get(choice, values[0])))
    return [x for x in objs if x["kind"] in ("Role", "ClusterRole")]


def _check_wire(api: ApiServer, records: list[RequestRecord], component: str, **chosen: str) -> int:
    roles = _roles_of(component, chosen)
    for r in records:
        call, ns, name = rbac.request_target(r.method, r.path, r.query)
        t = _resolve(api.store, r.path)  # the fake server's own reading of the path
        assert (call[1], call[2], call[3]) == (t.rt.group, t.rt.plural, t.subresource)
        assert rbac.permits(roles, call, ns, name), f"{component} may not {call} {ns}/{name}"
    return len(records)


async def test_the_descheduler_rules_allow_what_it_does_on_the_wire(
    api: ApiServer, kube: KubeClient
) -> None:
    api.store.load(
        [
            o.namespace(NS),
            o.node("n1"),
            o.pod("p", "ns1", node="n1", labels={"app": "p"}, owner=_RS),
            o.pdb("p", "ns1", match_labels={"app": "p"}, max_unavailable=1),
        ]
    )
    async with ClusterCache(
        kube, pdbs=True, priority_classes=True, volcano=True, coscheduling=True
    ) as cache:
        await cache.wait_synced(5)
        elector = LeaderElector(
            kube,
            name=rbac.DESCHEDULER_LEASE,
            namespace=NS,
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
            await asyncio.sleep(0.25)

        await asyncio.wait_for(elector.run(lead), 5)
    # Leader election: the Deployment install.
    assert _check_wire(api, api.log, rbac.DESCHEDULER, descheduler="deployment") > 10


def _choice_roles(component: str, choices: dict[str, str]) -> list[dict[str, object]]:
    objs = rbac.rbac_objects(component)
    for choice, values in rbac.CHOICES.items():
        objs += rbac.rbac_objects(component, (choice, choices.get(choice, values[0])))
    return [x for x in objs if x["kind"] in ("Role", "ClusterRole")]


async def exercise_webhook(api: ApiServer, kube: KubeClient, backend: str) -> None:
    """What the webhook does on the wire with ``kube``: its informers (lists and
    watches), PodGroups (made, found made, joined by a bare pod, owners read) and its
    self-signed certificate (Secret, caBundle, a renewal)."""
    from gangplace.kube.resources import COSCHED_PODGROUPS, VOLCANO_PODGROUPS

    from webhook.live import InformerSource
    from webhook.podgroup_intent import Existing, OwnerRef, PodGroupIntent
    from webhook.podgroups.calls import PodGroupApi
    from webhook.tls.contexts import server_context
    from webhook.tls.rotation import SelfSignedManager
    from webhook.tls.store import SecretCertStore

    mwc = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": rbac.WEBHOOK_CONFIGURATION},
        "webhooks": [
            {
                "name": "pods.corral.dev",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "clientConfig": {"service": {"name": "corral-webhook", "namespace": NS}},
            }
        ],
    }
    api.store.load([o.node("n1"), o.pod("a", "ml", node="n1"), o.pod("b", "ml"), mwc])
    source = InformerSource(kube)
    source.start()
    await source.wait_ready(5)
    # Ready means listed; the watches open just after, and they are calls to check too.
    for _ in range(500):
        if any(r.watch for r in api.log):
            break
        await asyncio.sleep(0.01)
    await source.stop()
    res = VOLCANO_PODGROUPS if backend == "volcano" else COSCHED_PODGROUPS
    pg = PodGroupApi(kube)
    body = {"apiVersion": res.api_version, "kind": "PodGroup", "metadata": {"name": "g"}}
    intent = PodGroupIntent(res.api_version, res.plural, "ml", "g", body, None)
    uid_a = await pg.resolve_owner("ml", OwnerRef("v1", "Pod", "a"))
    uid_b = await pg.resolve_owner("ml", OwnerRef("v1", "Pod", "b"))
    assert uid_a and uid_b
    await pg.create(intent, intent.render(OwnerRef("v1", "Pod", "a", uid_a)))
    assert await pg.existing(intent, OwnerRef("v1", "Pod", "b", uid_b)) is Existing.JOINED
    store = SecretCertStore(
        kube,
        NS,
        secret=rbac.WEBHOOK_TLS_SECRET,
        webhook_config=rbac.WEBHOOK_CONFIGURATION,
        service="corral-webhook",
    )
    manager = SelfSignedManager(server_context(), store, "corral-webhook", NS)
    await manager.ensure()
    assert manager.bundle is not None
    await store.save(manager.bundle)  # a renewal


@pytest.mark.parametrize("backend", ["volcano", "coscheduling"])
async def test_the_webhook_rules_allow_what_it_does_on_the_wire(
    api: ApiServer, kube: KubeClient, backend: str
) -> None:
    """The webhook's calls (:func:`exercise_webhook`), against the rules of an install
    with that backend."""
    from webhook.podgroup_intent import OwnerRef
    from webhook.podgroups.calls import PodGroupApi

    api.store.load([o.namespace(NS)])
    await exercise_webhook(api, kube, backend)
    assert (
        await PodGroupApi(kube).resolve_owner("ml", OwnerRef("batch/v1", "Job", "absent")) is None
    )
    roles = _choice_roles(rbac.WEBHOOK, {"backend": backend})
    for r in api.log:
        call, ns, name = rbac.request_target(r.method, r.path, r.query)
        assert rbac.permits(roles, call, ns, name), f"the webhook may not {call} {ns}/{name}"
    verbs = {rbac.request_target(r.method, r.path, r.query)[0][0] for r in api.log}
    assert verbs >= {"list", "watch", "get", "create", "patch", "update"}
    # and the check refuses what the webhook is not given
    eviction = RequestRecord("POST", "/api/v1/namespaces/ml/pods/a/eviction", {}, "", "", "")
    with pytest.raises(AssertionError, match="webhook may not"):
        _check_wire(api, [eviction], rbac.WEBHOOK)
    # another install's PodGroups, or a Secret of another name, are not the webhook's
    other = "scheduling.x-k8s.io" if backend == "volcano" else "scheduling.volcano.sh"
    assert not rbac.permits(roles, ("create", other, "podgroups", ""), "ml")
    assert not rbac.permits(roles, ("get", "", "secrets", ""), NS, "someone-elses")
    assert not rbac.permits(roles, ("get", "", "secrets", ""), "ml", rbac.WEBHOOK_TLS_SECRET)


def test_the_ledger_is_the_one_the_descheduler_writes() -> None:
    from descheduler.planning.state import MOVE_LEDGER

    assert rbac.DESCHEDULER_LEDGER == MOVE_LEDGER
