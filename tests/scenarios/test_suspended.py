"""A Job created suspended (as Kueue and pipelines create them), on the calibrated
in-memory cluster with corral's real webhook in the API server's admission chain: it
has no PodGroup, so the gang scheduler -- which keeps a PodGroup without pods Inqueue
with a Warning Event every session, as volcano-gang-lifecycle.json recorded -- writes
nothing about it. Resumed, it gets its PodGroup and binds whole; suspended again by a
person, its PodGroup goes."""

from __future__ import annotations

from tests.kubeapi import ApiServer
from tests.scenarios.corral_webhook import CorralWebhook
from tests.scenarios.story import NS, Cluster, Json, bound, job, setup, submit


def opt_in(api: ApiServer) -> None:
    ns_type = api.store.resource("namespaces")
    labels = api.store.get(ns_type, "", NS)["metadata"].get("labels") or {}
    api.store.patch(
        ns_type,
        "",
        NS,
        "application/merge-patch+json",
        {"metadata": {"labels": {**labels, "corral.dev/gang-scheduling": "enabled"}}},
    )


def podgroups(c: Cluster) -> dict[str, Json]:
    rt = c.api.store.resource("podgroups", "scheduling.volcano.sh")
    return {pg["metadata"]["name"]: pg for pg in c.api.store.items(rt, NS)}


def unschedulable(c: Cluster, podgroup: str) -> list[Json]:
    return [
        e
        for e in c.api.store.items(c.api.store.resource("events"), NS)
        if e["involvedObject"].get("kind") == "PodGroup"
        and e["involvedObject"]["name"] == podgroup
        and e["type"] == "Warning"
        and e["reason"] == "Unschedulable"
    ]


async def sessions(c: Cluster, hook: CorralWebhook, n: int = 3) -> None:
    """``n`` rounds of the webhook's PodGroups, the controllers and a second of clock."""
    for _ in range(n):
        await hook.drain()
        await c.settle()
        c.clock.advance(1.0)


async def test_a_suspended_job_has_no_podgroup_until_resumed(api: ApiServer) -> None:
    setup(api)
    opt_in(api)
    async with CorralWebhook(api) as hook:
        c = Cluster(api, scheduler="gang")
        try:
            await submit(c.rest, job("train", 4, workers=2, suspend=True))
            # The control: a PodGroup without pods, as the webhook used to make for it.
            await submit(c.rest, job("held", 1, suspend=True, gang=True), with_podgroup=True)
            await sessions(c, hook)
            assert "job-train" not in podgroups(c)
            assert c.pods("train") == []
            assert unschedulable(c, "job-train") == []
            # The gang scheduler does to an empty PodGroup what Volcano did.
            assert podgroups(c)["job-held"]["status"]["phase"] == "Inqueue"
            assert unschedulable(c, "job-held") != []
            # Its templates were made the gang's all the same.
            tmpl = c.job("train")["spec"]["template"]
            assert tmpl["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "job-train"

            # Resumed: the UPDATE makes its PodGroup, and the gang binds whole.
            await c.rest.patch("batch/v1", "jobs", NS, "train", {"spec": {"suspend": False}})
            await sessions(c, hook)
            pg = podgroups(c)["job-train"]
            assert pg["spec"]["minMember"] == 2
            assert pg["metadata"]["ownerReferences"][0]["uid"] == c.job("train")["metadata"]["uid"]
            pods = c.pods("train")
            assert len(pods) == 2 and len(bound(pods)) == 2
            assert pg["status"]["phase"] == "Running"
            assert unschedulable(c, "job-train") == []

            # Suspended again by a person: its pods go, and so does its PodGroup.
            await c.rest.patch("batch/v1", "jobs", NS, "train", {"spec": {"suspend": True}})
            await sessions(c, hook)
            assert "job-train" not in podgroups(c)
            assert c.pods("train") == []
            assert unschedulable(c, "job-train") == []
            assert "job-held" in podgroups(c)  # not this Job's: untouched
        finally:
            await c.close()


async def test_resumed_behind_the_webhooks_back_its_pods_bring_the_podgroup(
    api: ApiServer,
) -> None:
    """The UPDATE that resumed the Job never reached the webhook (failurePolicy
    Ignore, a timeout): its pods, admitted, make the reconciler read the Job and make
    its PodGroup, and the gang binds whole."""
    setup(api)
    opt_in(api)
    async with CorralWebhook(api) as hook:
        c = Cluster(api, scheduler="gang")
        try:
            await submit(c.rest, job("train", 4, workers=2, suspend=True))
            await sessions(c, hook)
            assert "job-train" not in podgroups(c)
            jobs = api.store.resource("jobs", "batch")
            # Straight into the store: no admission at all.
            api.store.patch(
                jobs, NS, "train", "application/merge-patch+json", {"spec": {"suspend": False}}
            )
            await sessions(c, hook)
            pg = podgroups(c)["job-train"]
            assert pg["spec"]["minMember"] == 2
            assert pg["metadata"]["ownerReferences"][0]["uid"] == c.job("train")["metadata"]["uid"]
            assert len(bound(c.pods("train"))) == 2
        finally:
            await c.close()
