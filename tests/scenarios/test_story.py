"""The whole story on the in-memory cluster with its controller models: what a pod-by-pod
scheduler does to a gang, what a gang scheduler does instead, and what corral's
descheduler does to the Jobs it moves. Every model is stepped until it rests, so each
run is the same."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from descheduler import parse_config
from tests.kubeapi import ApiServer
from tests.scenarios.corral_webhook import CorralWebhook
from tests.scenarios.story import (
    DESCHED_NS,
    LAYOUT_767,
    NS,
    Cluster,
    Json,
    bound,
    conditions,
    job,
    place,
    run_descheduler,
    running,
    setup,
    submit,
)

# A whole story over the in-memory API server: left out of `make test-fast`.
pytestmark = pytest.mark.scenario


@pytest.fixture
async def pod_cluster(api: ApiServer) -> AsyncIterator[Cluster]:
    setup(api)
    c = Cluster(api, scheduler="pod")
    yield c
    await c.close()


@pytest.fixture
async def gang_cluster(api: ApiServer) -> AsyncIterator[Cluster]:
    setup(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DESCHED_NS}})
    c = Cluster(api, scheduler="gang")
    yield c
    await c.close()


async def test_a_pod_by_pod_scheduler_binds_three_of_four_workers(pod_cluster: Cluster) -> None:
    """The partial gang corral exists to prevent: 4 workers of 8 GPUs on three 8-GPU
    nodes; three run, holding every GPU, and the fourth can never start."""
    c = pod_cluster
    await submit(c.rest, job("train", 8, workers=4))
    await c.settle()
    pods = c.pods("train")
    assert len(pods) == 4
    assert len(running(pods)) == 3
    assert sorted(p["spec"]["nodeName"] for p in bound(pods)) == ["n1", "n2", "n3"]
    (waiting,) = [p for p in pods if not p["spec"].get("nodeName")]
    cond = conditions(waiting)["PodScheduled"]
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"].startswith("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
    assert c.gpus_used() == {"n1": 8, "n2": 8, "n3": 8}
    status = c.job("train")["status"]
    assert (status["active"], status["ready"]) == (4, 3)
    events = list(c.api.store.items(c.api.store.resource("events"), NS))
    assert any(
        e["reason"] == "FailedScheduling"
        and e["involvedObject"]["name"] == waiting["metadata"]["name"]
        for e in events
    )


async def test_a_gang_that_cannot_fit_binds_no_pod(gang_cluster: Cluster) -> None:
    """The same Job as a gang (as corral's webhook admits it): no worker binds, the
    PodGroup stays Pending with Volcano's words, and the GPUs stay free."""
    c = gang_cluster
    await submit(c.rest, job("train", 8, workers=4, gang=True), with_podgroup=True)
    await c.settle()
    pods = c.pods("train")
    assert len(pods) == 4 and bound(pods) == []
    pg = c.podgroup("job-train")
    assert pg["status"]["phase"] == "Pending"
    unsched = conditions(pg)["Unschedulable"]
    assert unsched["reason"] == "NotEnoughResources"
    assert unsched["message"] == (
        "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
        "Pending: 4 Unschedulable"
    )
    for p in pods:
        assert conditions(p)["PodScheduled"]["reason"] == "Unschedulable"
    assert c.gpus_used() == {"n1": 0, "n2": 0, "n3": 0}


async def test_a_gang_of_four_by_two_gpus_binds_whole_in_one_session(gang_cluster: Cluster) -> None:
    c = gang_cluster
    await submit(c.rest, job("pairs", 2, workers=4, gang=True), with_podgroup=True)
    await c.models.settle(only=["job-controller"])
    assert bound(c.pods("pairs")) == []
    await c.models.step(only=["volcano"])  # one scheduling session binds all four
    assert len(bound(c.pods("pairs"))) == 4
    await c.settle()
    assert len(running(c.pods("pairs"))) == 4
    pg = c.podgroup("job-pairs")
    assert pg["status"]["phase"] == "Running" and pg["status"]["running"] == 4
    assert conditions(pg)["Scheduled"]["status"] == "True"
    assert c.job("pairs")["status"]["ready"] == 4


# --- corral's descheduler on a fragmented cluster ---------------------------------------


async def _767_case(c: Cluster, *, with_suspended: bool) -> None:
    await place(c, LAYOUT_767)
    assert c.gpus_used() == {"n1": 7, "n2": 6, "n3": 7}
    if with_suspended:
        await submit(c.rest, job("held", 1, gang=True, suspend=True), with_podgroup=True)
    await submit(c.rest, job("llm", 4, gang=True), with_podgroup=True)
    await c.settle()
    assert bound(c.pods("llm")) == [] and c.pods("held") == []

    names = {
        j: {p["metadata"]["name"] for p in c.pods(j)}
        for j in ("a1", "a2", "a3", "b1", "b2", "c1", "c2", "c3", "big-1", "big-2", "big-3")
    }
    # Every Job here has priority 0, the waiting gang too: the defaults move equals
    # as a consolidation (each placed again at once). The models run beside the
    # descheduler (its suspends are checked by their pods going), which does not wait
    # for the gang (moves.resume_wait 0): it resumes what it suspended if the gang is
    # bound by its one look after the moves, else the next run (the CronJob's next
    # one) does.
    config = parse_config({"moves": {"resume_wait": 0}})
    doc = await run_descheduler(c.api, config, models=c.models)
    suspended = [o for o in doc["run"]["outcomes"] if o["status"] == "suspended"]
    assert suspended and len(suspended) == len(doc["run"]["outcomes"])
    assert {o["method"] for o in suspended} == {"suspend"}
    held_by_corral = [
        w.rsplit("/", 1)[1]
        for o in suspended
        for m in doc["moves"]
        if m["unit"] == o["unit"]
        for w in m["workloads"]
    ]
    await c.settle()
    assert len(running(c.pods("llm"))) == 1  # bound in the room made
    for name in held_by_corral:
        # while suspended its PodGroup was gone (the gang scheduler saw no pod-less gang
        # to put Inqueue and warn about every session), and made again on resume. (The
        # models run beside the run here, so a session may fall between the PodGroup made
        # again and its pods: a Warning then, as Volcano would write.)
        assert c.api.requests("DELETE", f"/podgroups/job-{name}")
        assert c.api.requests("POST", "/podgroups")
    if with_suspended:
        # a Job a person suspended is not waiting: not served, not counted, not moved
        gangs = {x["unit"]: x["reason"] for x in doc["suspended_gangs"]}
        assert gangs == {
            f"{NS}/job-held": f"Job {NS}/held is suspended (not by corral): it is not waiting"
        }
    later = await run_descheduler(c.api, config)
    assert later["moves"] == []
    # The Job controller removed their pods (the suspend checked), the gang bound in the
    # room, and what corral suspended was resumed, by this run or the first.
    resumed = doc["run"]["resumed"] + later["run"]["resumed"]
    assert sorted(r["workload"] for r in resumed) == sorted(f"Job {NS}/{n}" for n in held_by_corral)
    assert {r["action"] for r in resumed} == {"resume"}
    assert all("which it made room for, is bound" in r["reason"] for r in resumed)
    await c.settle()
    for name in held_by_corral:  # back as a normal gang: its PodGroup made again
        j = c.job(name)
        assert j["spec"]["suspend"] is False
        assert "corral.dev/suspended-by" not in (j["metadata"].get("annotations") or {})
        assert c.podgroup(f"job-{name}")["status"]["phase"] == "Running"
    if with_suspended:  # never resumed by corral: it was not corral's to resume
        held = c.job("held")
        assert held["spec"]["suspend"] is True and c.pods("held") == []
        assert "corral.dev/suspended-by" not in (held["metadata"].get("annotations") or {})

    # moved: evicted, or suspended and resumed -- either way its pod is a new one
    moved = sorted(
        j for j, pods in names.items() if {p["metadata"]["name"] for p in c.pods(j)} != pods
    )
    assert moved, f"the descheduler moved nothing: {doc.get('unserved')}"
    failed = {
        j["metadata"]["name"]: conditions(j)["Failed"]["reason"]
        for j in c.api.store.items(c.api.store.resource("jobs", "batch"), NS)
        if "Failed" in conditions(j)
    }
    assert not failed, f"Jobs failed after the move: {failed}"
    for name in moved:
        assert len(running(c.pods(name))) == 1, f"moved Job {name} is not running again"
    assert len(running(c.pods("llm"))) == 1
    assert c.podgroup("job-llm")["status"]["phase"] == "Running"
    assert c.gpus_used() == {"n1": 8, "n2": 8, "n3": 8}


def podgroup_or_none(c: Cluster, name: str) -> Json | None:
    return c.api.store.find(c.api.store.resource("podgroups", "scheduling.volcano.sh"), NS, name)


async def test_the_767_case_ends_with_the_gang_bound_and_every_moved_job_running(
    gang_cluster: Cluster,
) -> None:
    """Three 8-GPU nodes with 7, 6 and 7 GPUs used by 1-GPU Jobs of backoffLimit 0 (and
    4-GPU ones), one more Job created suspended, a 4-GPU gang waiting: one descheduler
    run makes room, the gang binds, and every Job it moved runs again."""
    await _767_case(gang_cluster, with_suspended=True)


async def test_the_767_case_without_a_suspended_job(gang_cluster: Cluster) -> None:
    """The same without the suspended Job: the planner moves the two 1-GPU Jobs of n2,
    and they must run again elsewhere."""
    await _767_case(gang_cluster, with_suspended=False)


async def test_a_high_priority_gang_is_never_moved_for_a_low_priority_one(
    gang_cluster: Cluster,
) -> None:
    """n1..n3 each hold a 4-GPU Job and a 2-GPU one, all of priority 1,000,000; a 4-GPU
    gang of priority 1,000 waits. Moving one 2-GPU Job would make room for it (6 GPUs
    are free, 2 a node), but a gang is moved only for one of higher priority."""
    c = gang_cluster
    layout = {n: [(f"fill-{n}", 4), (f"vip-{n}", 2)] for n in ("n1", "n2", "n3")}
    await place(c, layout, priority=1_000_000, backoff_limit=6)
    assert c.gpus_used() == {"n1": 6, "n2": 6, "n3": 6}
    await submit(c.rest, job("low", 4, gang=True, priority=1_000), with_podgroup=True)
    await c.settle()
    before = {p["metadata"]["name"] for p in c.pods()}

    doc = await run_descheduler(c.api)
    await c.settle()

    assert doc.get("evictions", []) == [], (
        "a priority-1,000,000 gang was evicted for a priority-1,000 one"
    )
    assert {p["metadata"]["name"] for p in c.pods()} == before


async def test_through_corrals_webhook_the_gang_scheduler_binds_no_pod(api: ApiServer) -> None:
    """The Job of the partial-gang story, in a namespace opted in to corral: the API
    server sends its CREATE, and the Job controller's pod CREATEs, to corral's webhook
    (registered by the base manifest), which makes the pods Volcano's and ties them to a
    PodGroup of minMember 4 that it creates. The gang scheduler binds none of the four,
    and no GPU is held."""
    setup(api)
    ns_type = api.store.resource("namespaces")
    ml = api.store.get(ns_type, "", NS)
    api.store.patch(
        ns_type,
        "",
        NS,
        "application/merge-patch+json",
        {
            "metadata": {
                "labels": {
                    **(ml["metadata"].get("labels") or {}),
                    "corral.dev/gang-scheduling": "enabled",
                }
            }
        },
    )
    async with CorralWebhook(api) as hook:
        c = Cluster(api, scheduler="both")
        try:
            await submit(c.rest, job("train", 8, workers=4))
            await c.models.settle(only=["job-controller"])
            await hook.drain()
            await c.settle()
            pods = c.pods("train")
            assert len(pods) == 4 and bound(pods) == []
            for p in pods:
                assert p["spec"]["schedulerName"] == "volcano"
                assert p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "job-train"
                assert conditions(p)["PodScheduled"]["reason"] == "Unschedulable"
            pg = c.podgroup("job-train")
            assert pg["spec"]["minMember"] == 4
            assert pg["metadata"]["ownerReferences"][0]["name"] == "train"
            assert pg["status"]["phase"] in ("Pending", "Inqueue")
            assert "Unschedulable" in conditions(pg)
            assert c.gpus_used() == {"n1": 0, "n2": 0, "n3": 0}
            reviewed = {(r["request"]["kind"]["kind"]) for r in api.admission.reviews}
            assert reviewed == {"Job", "Pod"}
        finally:
            await c.close()


async def test_a_budget_that_allows_no_disruption_leaves_its_gang_whole(
    gang_cluster: Cluster,
) -> None:
    """7/6/7 again, but the only gang whose move makes room is a 2-worker Job under a
    PodDisruptionBudget of minAvailable 2: it stays whole and in place, and the plan
    says why. Without the budget, the same run moves it (suspended and resumed)."""
    c = gang_cluster
    await place(c, {"n1": [("big-1", 4), ("x1", 3)], "n3": [("big-3", 4), ("x3", 3)]})
    await place(c, {"n2": [("big-2", 4)]})
    await submit(c.rest, job("pair", 1, workers=2, gang=True), with_podgroup=True)
    await c.models.settle(only=["job-controller"])
    for p in c.pods("pair"):
        await c.rest.bind(NS, p["metadata"]["name"], "n2")
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "pair", "namespace": NS},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "pair"}}},
    }
    await c.rest.create("policy/v1", "poddisruptionbudgets", NS, pdb)
    await submit(c.rest, job("llm", 4, gang=True), with_podgroup=True)
    await c.settle()
    assert c.gpus_used() == {"n1": 7, "n2": 6, "n3": 7} and bound(c.pods("llm")) == []
    pair = {p["metadata"]["name"] for p in c.pods("pair")}
    config = parse_config({"moves": {"resume_wait": 0}})

    doc = await run_descheduler(c.api, config)
    await c.settle()

    assert doc["moves"] == [] and doc["waiting_gangs_after"] == [f"{NS}/job-llm"]
    assert [u["gang"] for u in doc["unserved"]] == [f"{NS}/job-llm"]
    kept = {x["unit"]: x["reason"] for x in doc["not_moved"]}
    assert kept[f"{NS}/job-pair"] == (
        "disruption budget ml/pair allows 0 more disruption(s); the move needs 2"
    )
    assert {p["metadata"]["name"] for p in running(c.pods("pair"))} == pair
    assert c.job("pair")["spec"]["suspend"] is False

    # The control: without the budget the same run moves the pair.
    await c.rest.delete("policy/v1", "poddisruptionbudgets", NS, "pair")
    doc = await run_descheduler(c.api, config, models=c.models)
    assert [(m["unit"], m["method"]) for m in doc["moves"]] == [(f"{NS}/job-pair", "suspend")]
