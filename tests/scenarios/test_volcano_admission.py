"""No pod corral admits is refused by Volcano's admission for want of its PodGroup.

Volcano's ``/pods/validate`` (on by default through Volcano 1.11;
tests/kubeapi/volcano_admission.py) refuses a pod whose PodGroup is not there yet,
and corral makes PodGroups off the request path. Here corral's real webhook serves
over HTTPS in the in-memory API server's admission chain, Volcano's admission after
it, for the stacks users run: a bare-pod gang, a Job, a resumed Job and a Job whose
resume never reached the webhook (its pods bring the PodGroup). Every gang binds whole
and not one pod is refused. Volcano 1.12 and 1.15 (their pod admission gone from the
chart) are the control.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.kubeapi import ApiServer
from tests.kubeapi.versions import Versions
from tests.kubeapi.volcano_admission import VolcanoPodValidation
from tests.played import VOLCANO_STORY
from tests.scenarios.corral_webhook import CorralWebhook
from tests.scenarios.story import NS, Cluster, Json, bound, job, setup, submit

pytestmark = pytest.mark.scenario

# The stacks of the support matrix's Volcano story (tests/played.py): each a pair
# Volcano's own table lists, the kind guide's among them.
STACKS = list(VOLCANO_STORY)


@pytest.fixture(params=STACKS, ids=str)
async def stack(request: pytest.FixtureRequest) -> AsyncIterator[ApiServer]:
    versions: Versions = request.param
    async with ApiServer(bookmark_interval=0.2, versions=versions) as api:
        setup(api)  # Volcano makes its default Queue and opens it
        ns_type = api.store.resource("namespaces")
        api.store.patch(
            ns_type,
            "",
            NS,
            "application/merge-patch+json",
            {"metadata": {"labels": {"corral.dev/gang-scheduling": "enabled"}}},
        )
        yield api


def volcano(api: ApiServer) -> VolcanoPodValidation | None:
    return api.volcano_admission


def denied(api: ApiServer) -> list[tuple[str, str, str]]:
    v = volcano(api)
    return [] if v is None else v.denied


def bare_pod(name: str, gang: str, size: int, gpus: int = 2) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": {"corral.dev/gang": gang, "corral.dev/min-available": str(size)},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                        "limits": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
    }


async def sessions(c: Cluster, hook: CorralWebhook, n: int = 3) -> None:
    """The controllers first, as on a cluster: a Job controller makes a new Job's
    pods within milliseconds, racing the webhook's PodGroup; then ``n`` rounds of the
    webhook's PodGroups, the controllers and a second of clock."""
    await c.settle()
    for _ in range(n):
        await hook.drain()
        await c.settle()
        c.clock.advance(1.0)


def podgroup(api: ApiServer, name: str) -> Json | None:
    rt = api.store.resource("podgroups", "scheduling.volcano.sh")
    return api.store.find(rt, NS, name)


def test_volcanos_admission_runs_where_its_chart_has_it() -> None:
    on = [str(v.volcano) for v in STACKS if v.validates_volcano_pods]
    assert on == ["1.7", "1.9", "1.11"]


async def test_a_bare_pod_gang_is_never_refused(stack: ApiServer) -> None:
    api = stack
    async with CorralWebhook(api) as hook:
        c = Cluster(api, scheduler="gang")
        try:
            for i in range(3):
                await c.rest.create("v1", "pods", NS, bare_pod(f"trio-{i}", "trio", 3))
            await sessions(c, hook)
            assert denied(api) == []
            pods = c.pods()
            assert [p["metadata"]["name"] for p in bound(pods)] == ["trio-0", "trio-1", "trio-2"]
            pg = podgroup(api, "trio")
            assert pg is not None and pg["spec"]["minMember"] == 3
            # Made before its first pod, it is owned by its pods once they exist.
            owners = sorted(r["name"] for r in pg["metadata"].get("ownerReferences") or ())
            assert owners == ["trio-0", "trio-1", "trio-2"]
            assert pg["status"]["phase"] == "Running"
        finally:
            await c.close()


async def test_a_job_and_a_resumed_job_are_never_refused(stack: ApiServer) -> None:
    api = stack
    async with CorralWebhook(api) as hook:
        c = Cluster(api, scheduler="gang")
        try:
            await submit(c.rest, job("train", 2, workers=3))
            await submit(c.rest, job("later", 2, workers=2, suspend=True))
            await sessions(c, hook)
            assert podgroup(api, "job-later") is None
            await c.rest.patch("batch/v1", "jobs", NS, "later", {"spec": {"suspend": False}})
            await sessions(c, hook)
            assert denied(api) == []
            assert len(bound(c.pods("train"))) == 3
            assert len(bound(c.pods("later"))) == 2
            for name, uid_of in (("job-train", "train"), ("job-later", "later")):
                pg = podgroup(api, name)
                assert pg is not None
                assert (
                    pg["metadata"]["ownerReferences"][0]["uid"]
                    == (c.job(uid_of)["metadata"]["uid"])
                )
            failed_creates = [
                e
                for e in api.store.items(api.store.resource("events"), NS)
                if e["reason"] == "FailedCreate"
            ]
            assert failed_creates == []
        finally:
            await c.close()


async def test_a_resume_behind_the_webhooks_back_is_never_refused(stack: ApiServer) -> None:
    """The fallback: the UPDATE that resumed the Job never reached the webhook; its
    pods make the reconciler read the Job and make the PodGroup before they are
    answered."""
    api = stack
    async with CorralWebhook(api) as hook:
        c = Cluster(api, scheduler="gang")
        try:
            await submit(c.rest, job("train", 4, workers=2, suspend=True))
            await sessions(c, hook)
            jobs = api.store.resource("jobs", "batch")
            api.store.patch(
                jobs, NS, "train", "application/merge-patch+json", {"spec": {"suspend": False}}
            )
            await sessions(c, hook)
            assert denied(api) == []
            assert len(bound(c.pods("train"))) == 2
            pg = podgroup(api, "job-train")
            assert pg is not None and pg["spec"]["minMember"] == 2
        finally:
            await c.close()


async def test_without_the_wait_volcano_refuses_the_first_pods(stack: ApiServer) -> None:
    """The control: ``podGroupWait: 0s`` (corral as it was) and Volcano's admission on
    refuses a bare-pod gang's pods; 1.12 refuses nothing."""
    from webhook.config import WebhookConfig

    api = stack
    async with CorralWebhook(api, WebhookConfig(pod_group_wait="0s")):
        c = Cluster(api, scheduler="gang")
        try:
            refused = 0
            for i in range(2):
                try:
                    await c.rest.create("v1", "pods", NS, bare_pod(f"pair-{i}", "pair", 2))
                except Exception as e:
                    assert 'admission webhook "validatepod.volcano.sh" denied the request' in str(e)
                    assert f"failed to get PodGroup for pod <{NS}/pair-{i}>" in str(e)
                    assert 'podgroups.scheduling.volcano.sh "pair" not found' in str(e)
                    refused += 1
            assert refused == (2 if api.store.versions.validates_volcano_pods else 0)
        finally:
            await c.close()
