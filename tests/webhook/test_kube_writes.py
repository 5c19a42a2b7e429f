"""The webhook's writes over real HTTP against the in-memory API server: PodGroups made
by the reconciler for both backends (bodies, owners, 409s, retries, dry runs, bare-pod
gangs), and the self-signed certificate kept in a Secret and published in the webhook
configuration."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import uuid
from typing import Any

import jsonpatch
import pytest
from cryptography import x509
from gangplace.kube import KubeClient
from gangplace.kube.resources import (
    COSCHED_PODGROUPS,
    MUTATING_WEBHOOKS,
    VOLCANO_PODGROUPS,
    WORKLOADS,
    Resource,
)

from tests.builders.reviews import review
from tests.kubeapi import ApiServer, ResourceType
from tests.kubeapi import objects as o
from webhook.admission.entry import admit
from webhook.admission.review import AdmitResult
from webhook.config import WebhookConfig, parse_config
from webhook.podgroup_intent import OwnerHint, OwnerRef
from webhook.podgroups.calls import PodGroupApi, owner_resource
from webhook.podgroups.reconciler import PodGroupReconciler, RetryPolicy
from webhook.tls.certificates import TlsBundle
from webhook.tls.contexts import server_context
from webhook.tls.rotation import SelfSignedManager
from webhook.tls.store import CertPublishError, SecretCertStore

FAST = RetryPolicy(attempts=5, base_delay=0.01, max_delay=0.05, owner_wait=2.0, hint_wait=0.05)
NS = "ml"


class Recorder:
    def __init__(self) -> None:
        self.outcomes: list[str] = []

    def __call__(self, _intent: Any, outcome: str) -> None:
        self.outcomes.append(outcome)


def reconciler(kube: KubeClient, policy: RetryPolicy = FAST) -> tuple[PodGroupReconciler, Recorder]:
    api = PodGroupApi(kube)
    rec = Recorder()
    return (
        PodGroupReconciler(
            api.create, api.resolve_owner, existing=api.existing, policy=policy, on_outcome=rec
        ),
        rec,
    )


async def settle(rec: PodGroupReconciler, *results: AdmitResult) -> None:
    """Hand the admissions' intents and hints to a running reconciler and wait."""
    for r in results:
        for i in r.intents:
            rec.submit(i, dry_run=r.dry_run)
        for h in r.hints:
            rec.hint(h)
    await asyncio.wait_for(rec.drain(), 10)


def job(
    name: str = "train",
    *,
    parallelism: int = 4,
    gpus: int = 2,
    annotations: dict[str, str] | None = None,
    priority_class: str | None = "high",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "trainer",
                "resources": {
                    "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": str(gpus)}
                },
            }
        ],
        "restartPolicy": "Never",
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "annotations": dict(annotations or {})},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {"spec": spec},
        },
    }


def job_review(obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
    return review(obj, group="batch", kind="Job", namespace=NS, dry_run=dry_run)


def register_workloads(api: ApiServer) -> None:
    """The workload kinds' CRDs, as a cluster that runs their operators has them."""
    for r in WORKLOADS:
        if (r.group, r.version, r.plural) not in api.store.types:
            api.store.register(
                ResourceType(r.group, r.version, r.plural, r.kind, r.namespaced, builtin=False)
            )


def persist(api: ApiServer, obj: dict[str, Any], result: AdmitResult | None = None) -> str:
    """Store an admitted object as the API server would after admission; its uid."""
    register_workloads(api)
    obj = copy.deepcopy(obj)
    if result is not None:
        obj = jsonpatch.apply_patch(obj, result.patch)
    obj["metadata"]["uid"] = uid = str(uuid.uuid4())
    api.store.load([obj])
    return uid


def podgroups(api: ApiServer, res: Resource = VOLCANO_PODGROUPS) -> dict[str, dict[str, Any]]:
    rt = api.store.resource(res.plural, res.group)
    return {pg["metadata"]["name"]: pg for pg in api.store.items(rt, NS)}


@pytest.mark.parametrize("backend", ["volcano", "coscheduling"])
async def test_podgroup_bodies(api: ApiServer, kube: KubeClient, backend: str) -> None:
    config = parse_config(
        {"backend": backend, "namespaceQueues": {NS: "ai"}}
        if backend == "volcano"
        else {"backend": backend}
    )
    obj = job(annotations={"corral.dev/min-available": "3", "corral.dev/gang-timeout": "10m"})
    result = admit(job_review(obj), None, config)
    assert len(result.intents) == 1
    uid = persist(api, obj, result)
    rec, seen = reconciler(kube)
    await rec.start()
    try:
        await settle(rec, result)
    finally:
        await rec.stop()
    assert seen.outcomes == ["created"]
    res = VOLCANO_PODGROUPS if backend == "volcano" else COSCHED_PODGROUPS
    pg = podgroups(api, res)["job-train"]
    assert pg["apiVersion"] == res.api_version and pg["kind"] == "PodGroup"
    assert pg["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": uid}
    ]
    assert pg["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "corral"
    spec = pg["spec"]
    assert spec["minMember"] == 3
    # what the three members need, together
    assert spec["minResources"]["nvidia.com/gpu"] == "6"
    assert spec["minResources"]["cpu"] == "12"
    if backend == "volcano":
        assert spec["queue"] == "ai" and spec["priorityClassName"] == "high"
        assert pg["metadata"]["annotations"] == {"volcano.sh/sla-waiting-time": "10m"}
    else:
        assert spec["scheduleTimeoutSeconds"] == 600
        assert "queue" not in spec and "priorityClassName" not in spec
    # no pod named the Job in time: it was read once it existed
    assert api.requests("GET", "/jobs/train")


async def test_the_owner_uid_comes_from_pods_and_child_workloads_without_reads(
    api: ApiServer, kube: KubeClient
) -> None:
    config = WebhookConfig()
    rec, seen = reconciler(kube, RetryPolicy(base_delay=0.01, owner_wait=5, hint_wait=5))
    await rec.start()
    try:
        # a Job, then one of its pods (made from the patched template, named by the Job)
        obj = job()
        job_res = admit(job_review(obj), None, config)
        uid = persist(api, obj, job_res)
        patched = jsonpatch.apply_patch(obj, job_res.patch)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                **patched["spec"]["template"].get("metadata", {}),
                "generateName": "train-",
                "namespace": NS,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": "train",
                        "uid": uid,
                        "controller": True,
                    }
                ],
            },
            "spec": patched["spec"]["template"]["spec"],
        }
        pod_res = admit(review(pod, namespace=NS), None, config)
        assert pod_res.hints and not pod_res.intents
        # a JobSet, then the Job its controller makes from it
        js = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "js", "namespace": NS},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "workers",
                        "replicas": 2,
                        "template": {
                            "spec": {"parallelism": 2, "template": job()["spec"]["template"]}
                        },
                    }
                ]
            },
        }
        js_res = admit(
            review(js, group="jobset.x-k8s.io", version="v1alpha2", kind="JobSet", namespace=NS),
            None,
            config,
        )
        js_uid = persist(api, js, js_res)
        child_spec = jsonpatch.apply_patch(js, js_res.patch)["spec"]["replicatedJobs"][0]
        child = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "js-workers-0",
                "namespace": NS,
                "ownerReferences": [
                    {
                        "apiVersion": "jobset.x-k8s.io/v1alpha2",
                        "kind": "JobSet",
                        "name": "js",
                        "uid": js_uid,
                        "controller": True,
                    }
                ],
            },
            "spec": child_spec["template"]["spec"],
        }
        child_res = admit(job_review(child), None, config)
        assert child_res.hints and not child_res.intents
        for i in (*job_res.intents, *js_res.intents):
            rec.submit(i, dry_run=False)
        await asyncio.sleep(0.05)
        for h in (*pod_res.hints, *child_res.hints):
            rec.hint(h)
        await asyncio.wait_for(rec.drain(), 5)
    finally:
        await rec.stop()
    assert seen.outcomes == ["created", "created"]
    pgs = podgroups(api)
    assert pgs["job-train"]["metadata"]["ownerReferences"][0]["uid"] == uid
    assert pgs["jobset-js"]["metadata"]["ownerReferences"][0] == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "name": "js",
        "uid": js_uid,
    }
    assert pgs["jobset-js"]["spec"]["minMember"] == 4
    # learnt from admissions: the workloads were never read
    assert not api.requests("GET", "/jobs/") and not api.requests("GET", "/jobsets/")


async def test_existing_podgroups(api: ApiServer, kube: KubeClient) -> None:
    config = WebhookConfig()
    obj = job()
    result = admit(job_review(obj), None, config)
    uid = persist(api, obj, result)
    pgs = api.store.resource("podgroups", "scheduling.volcano.sh")

    def pg(name: str, owner: tuple[str, str, str] | None) -> dict[str, Any]:
        body = o.volcano_podgroup(name, NS, min_member=9)
        if owner:
            kind, oname, ouid = owner
            body["metadata"]["ownerReferences"] = [
                {"apiVersion": "batch/v1", "kind": kind, "name": oname, "uid": ouid}
            ]
        return body

    async def run() -> list[str]:
        rec, seen = reconciler(kube)
        await rec.start()
        try:
            await settle(rec, result)
        finally:
            await rec.stop()
        return seen.outcomes

    # ours already (made before a restart): nothing to do
    api.store.create(pgs, NS, pg("job-train", ("Job", "train", uid)))
    assert await run() == ["exists"]
    # someone else's (a gang name two workloads share): left alone
    api.store.delete(pgs, NS, "job-train")
    api.store.create(pgs, NS, pg("job-train", ("Job", "other", "x")))
    assert await run() == ["foreign"]
    assert podgroups(api)["job-train"]["spec"]["minMember"] == 9
    assert not api.requests("PATCH")
    # a stale one of an earlier Job of the same name: created once the collector removed it
    api.store.delete(pgs, NS, "job-train")
    api.store.create(pgs, NS, pg("job-train", ("Job", "train", "earlier")))
    loop = asyncio.get_running_loop()
    loop.call_later(0.1, lambda: api.store.delete(pgs, NS, "job-train"))
    assert await run() == ["created"]
    fresh = podgroups(api)["job-train"]
    assert fresh["metadata"]["ownerReferences"][0]["uid"] == uid and fresh["spec"]["minMember"] == 4
    # ... or reported when it stays
    api.store.delete(pgs, NS, "job-train")
    api.store.create(pgs, NS, pg("job-train", ("Job", "train", "earlier")))
    assert await run() == ["stale"]


async def test_transient_errors_are_retried_over_http(api: ApiServer, kube: KubeClient) -> None:
    obj = job()
    result = admit(job_review(obj), None, WebhookConfig())
    persist(api, obj, result)
    api.faults.fail(500, times=2, method="POST", path="/podgroups$")
    api.faults.fail(503, times=1, method="GET", path="/jobs/train$")
    rec, seen = reconciler(kube)
    await rec.start()
    try:
        await settle(rec, result)
    finally:
        await rec.stop()
    assert seen.outcomes == ["created"]
    assert len(api.requests("POST", "/podgroups")) == 3
    assert "job-train" in podgroups(api)


async def test_dry_run_creates_nothing(api: ApiServer, kube: KubeClient) -> None:
    obj = job()
    result = admit(job_review(obj, dry_run=True), None, WebhookConfig())
    assert result.dry_run and result.patch and result.intents == ()
    persist(api, obj, result)
    rec, seen = reconciler(kube)
    await rec.start()
    try:
        # even an intent handed over by mistake is dropped for a dry run
        intents = admit(job_review(obj), None, WebhookConfig()).intents
        assert rec.submit(intents[0], dry_run=True) is False
        await settle(rec, result)
    finally:
        await rec.stop()
    assert seen.outcomes == [] and not api.requests("POST") and podgroups(api) == {}


def bare_pod(name: str) -> dict[str, Any]:
    pod = o.pod(name, NS, gpus=1)
    pod["metadata"]["annotations"] = {
        "corral.dev/gang": "llm",
        "corral.dev/min-available": "3",
    }
    return pod


async def test_a_bare_pod_gang_is_owned_by_all_its_pods(api: ApiServer, kube: KubeClient) -> None:
    config = WebhookConfig()
    results, uids = [], []
    for i in range(3):
        pod = bare_pod(f"llm-{i}")
        res = admit(review(pod, namespace=NS), None, config)
        assert len(res.intents) == 1
        results.append(res)
        uids.append(persist(api, pod, res))
    rec, seen = reconciler(kube)
    await rec.start()
    try:
        await settle(rec, *results)  # all at once, as a burst of admissions comes
    finally:
        await rec.stop()
    assert sorted(seen.outcomes) == ["created", "joined", "joined"]
    pg = podgroups(api)["llm"]
    owners = pg["metadata"]["ownerReferences"]
    assert sorted(r["uid"] for r in owners) == sorted(uids)
    assert {r["kind"] for r in owners} == {"Pod"} and pg["spec"]["minMember"] == 3
    # a pod made again under the name of one that went joins too (the collector drops
    # the reference to the one that went)
    pods = api.store.resource("pods")
    api.store.delete(pods, NS, "llm-0")
    res = admit(review(bare_pod("llm-0"), namespace=NS), None, config)
    again = persist(api, bare_pod("llm-0"), res)
    rec, seen = reconciler(kube)
    await rec.start()
    try:
        await settle(rec, res)
    finally:
        await rec.stop()
    assert seen.outcomes == ["joined"]
    assert again in {r["uid"] for r in podgroups(api)["llm"]["metadata"]["ownerReferences"]}


async def test_a_workload_gang_is_not_joined_by_bare_pods(api: ApiServer, kube: KubeClient) -> None:
    obj = job()
    job_res = admit(job_review(obj), None, WebhookConfig())
    persist(api, obj, job_res)
    pod = bare_pod("stray")
    pod["metadata"]["annotations"]["corral.dev/gang"] = "job-train"
    pod["metadata"]["annotations"].pop("corral.dev/min-available")
    pod_res = admit(review(pod, namespace=NS), None, WebhookConfig())
    persist(api, pod, pod_res)
    rec, seen = reconciler(kube)
    await rec.start()
    try:
        await settle(rec, job_res)
        await settle(rec, pod_res)
    finally:
        await rec.stop()
    assert seen.outcomes == ["created", "foreign"]
    owners = podgroups(api)["job-train"]["metadata"]["ownerReferences"]
    assert [r["kind"] for r in owners] == ["Job"]


async def test_an_owner_named_late_revives_its_parked_intent(
    api: ApiServer, kube: KubeClient
) -> None:
    obj = job()
    result = admit(job_review(obj), None, WebhookConfig())
    rec, seen = reconciler(
        kube, RetryPolicy(base_delay=0.01, max_delay=0.02, owner_wait=0.15, hint_wait=0.02)
    )
    await rec.start()
    try:
        await settle(rec, result)  # the Job is not there (suspended, or not yet stored)
        assert seen.outcomes == ["no-owner"] and rec.parked == 1
        uid = persist(api, obj, result)
        intent = result.intents[0]
        rec.hint(OwnerHint(intent.api_version, NS, "job-train", OwnerRef("apps/v1", "X", "y", "z")))
        assert rec.parked == 1  # not its owner
        rec.hint(
            OwnerHint(
                intent.api_version, NS, "job-train", OwnerRef("batch/v1", "Job", "train", uid)
            )
        )
        await asyncio.wait_for(rec.drain(), 5)
    finally:
        await rec.stop()
    assert seen.outcomes == ["no-owner", "created"] and rec.parked == 0
    assert podgroups(api)["job-train"]["metadata"]["ownerReferences"][0]["uid"] == uid


def test_owner_resources() -> None:
    mpi = owner_resource(OwnerRef("kubeflow.org/v1", "MPIJob", "m"))
    assert mpi is not None and mpi.path(NS, "m") == "/apis/kubeflow.org/v1/namespaces/ml/mpijobs/m"
    pod = owner_resource(OwnerRef("v1", "Pod", "p"))
    assert pod is not None and pod.path(NS, "p") == "/api/v1/namespaces/ml/pods/p"
    lws = owner_resource(OwnerRef("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "l"))
    assert lws is not None and lws.plural == "leaderworkersets"
    # kinds added in the config are not read (RBAC comes from a fixed list)
    assert owner_resource(OwnerRef("example.com/v1", "Widget", "w")) is None
    assert owner_resource(OwnerRef("Job", "Job", "j")) is None


# --- the self-signed certificate in a Secret ------------------------------------------------

SERVICE, OWN_NS = "corral-webhook", "corral-system"
NOW = dt.datetime.now(dt.UTC)


def webhook_config() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "corral-webhook"},
        "webhooks": [
            {
                "name": "pods.corral.dev",
                "clientConfig": {"service": {"name": SERVICE, "namespace": OWN_NS}},
            },
            {
                "name": "other.example.com",
                "clientConfig": {
                    "service": {"name": "other", "namespace": "x"},
                    "caBundle": base64.b64encode(b"theirs").decode(),
                },
            },
            {
                "name": "jobs.corral.dev",
                "clientConfig": {"service": {"name": SERVICE, "namespace": OWN_NS}},
            },
        ],
    }


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> dt.datetime:
        return self.now


def replica(kube: KubeClient, clock: Clock) -> SelfSignedManager:
    store = SecretCertStore(
        kube,
        OWN_NS,
        secret="corral-webhook-tls",
        webhook_config="corral-webhook",
        service=SERVICE,
        clock=clock,
    )
    return SelfSignedManager(server_context(), store, SERVICE, OWN_NS, clock=clock)


def published(api: ApiServer) -> list[list[x509.Certificate]]:
    mwc = api.store.get(
        api.store.resource("mutatingwebhookconfigurations", MUTATING_WEBHOOKS.group),
        "",
        "corral-webhook",
    )
    out = []
    for wh in mwc["webhooks"]:
        raw = base64.b64decode(wh["clientConfig"].get("caBundle", ""))
        out.append(x509.load_pem_x509_certificates(raw) if raw.startswith(b"-----") else [])
    return out


def stored(api: ApiServer) -> dict[str, Any]:
    return api.store.get(api.store.resource("secrets"), OWN_NS, "corral-webhook-tls")


def ca_of(b: TlsBundle | None) -> x509.Certificate:
    assert b is not None
    return x509.load_pem_x509_certificate(b.ca_cert)


async def test_self_signed_secret_is_made_once_and_shared(api: ApiServer) -> None:
    api.store.load([o.namespace(OWN_NS), webhook_config()])
    clock = Clock()
    one = replica(api.client("one"), clock)
    two = replica(api.client("two"), clock)
    # two replicas start at once: one Secret, one bundle for both
    await asyncio.gather(one.ensure(), two.ensure())
    assert one.bundle == two.bundle and one.bundle is not None
    creates = api.requests("POST", "/secrets")
    assert 1 <= len(creates) <= 2 and stored(api)["type"] == "kubernetes.io/tls"
    # the CA is in the caBundle of both corral webhooks, and only of them
    pub = published(api)
    assert pub[0] == pub[2] == [ca_of(one.bundle)] and pub[1] == []
    # a third replica started later reuses it and creates nothing
    three = replica(api.client("three"), clock)
    await three.ensure()
    assert three.bundle == one.bundle
    assert len(api.requests("POST", "/secrets")) == len(creates)
    assert not api.requests("PUT", "/secrets")


async def test_self_signed_renewal_through_the_secret(api: ApiServer) -> None:
    api.store.load([o.namespace(OWN_NS), webhook_config()])
    clock = Clock()
    one = replica(api.client("one"), clock)
    two = replica(api.client("two"), clock)
    await one.ensure()
    await two.ensure()
    first = one.bundle
    # near the serving certificate's end: one replica renews it, the other picks it up
    clock.now = NOW + dt.timedelta(days=340)
    assert await one.ensure() is True
    assert len(api.requests("PUT", "/secrets")) == 1
    assert await two.ensure() is False and two.bundle == one.bundle != first
    assert ca_of(one.bundle) == ca_of(first)  # the same CA: nothing to publish anew
    # near the CA's end: a new CA; the old one stays trusted while replicas switch
    clock.now = NOW + dt.timedelta(days=3640)
    assert await two.ensure() is True
    assert ca_of(two.bundle) != ca_of(first)
    assert published(api)[0] == [ca_of(two.bundle), ca_of(first)]
    await one.ensure()
    assert one.bundle == two.bundle
    # ... until it has expired
    clock.now = NOW + dt.timedelta(days=3660)
    one.published_at = None  # due again
    await one.ensure()
    assert published(api)[0] == [ca_of(one.bundle)]


async def test_self_signed_waits_for_its_webhook_configuration(api: ApiServer) -> None:
    api.store.load([o.namespace(OWN_NS)])
    clock = Clock()
    one = replica(api.client("one"), clock)
    with pytest.raises(CertPublishError, match="corral-webhook does not exist"):
        await one.ensure()
    assert one.bundle is not None and one.published_at is None  # served all the same
    api.store.load([webhook_config()])
    await one.ensure()
    assert one.published_at is not None and published(api)[0] == [ca_of(one.bundle)]
    # a configuration that calls another Service is a clear error
    mwc_rt = api.store.resource("mutatingwebhookconfigurations", MUTATING_WEBHOOKS.group)
    api.store.delete(mwc_rt, "", "corral-webhook")
    other = webhook_config()
    other["webhooks"] = other["webhooks"][1:2]
    api.store.load([other])
    one.published_at = None
    with pytest.raises(CertPublishError, match="no webhook that calls Service"):
        await one.ensure()


async def test_a_damaged_secret_is_replaced(api: ApiServer) -> None:
    api.store.load([o.namespace(OWN_NS), webhook_config()])
    secrets = api.store.resource("secrets")
    api.store.create(
        secrets,
        OWN_NS,
        {"metadata": {"name": "corral-webhook-tls"}, "data": {"tls.crt": "bm9wZQ=="}},
    )
    one = replica(api.client("one"), Clock())
    assert await one.ensure() is True
    assert len(api.requests("PUT", "/secrets")) == 1
    assert base64.b64decode(stored(api)["data"]["ca.crt"]) == one.bundle.ca_cert  # type: ignore[union-attr]
