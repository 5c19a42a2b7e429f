"""The controller models beyond what the recordings show: the Job controller's
completions, exit-code rules, deadline and replacement backoff; the garbage collector
with two owners; the gang scheduler's order and its phases when a gang loses pods; the
runner's tasks. Each against the in-memory API server over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.controllers import (
    until,
)
from tests.controllers.pod_scheduler import kube_unschedulable_message
from tests.kubeapi import ApiServer
from tests.kubeapi.kubelet.kubelet import finish_pod
from tests.scenarios.story import (
    NS,
    Cluster,
    conditions,
    job,
    node,
    podgroup_for,
    running,
    setup,
    submit,
)

Json = dict[str, Any]


@pytest.fixture
async def world(api: ApiServer) -> AsyncIterator[Cluster]:
    setup(api)
    w = Cluster(api, scheduler="both")
    yield w
    await w.close()


async def test_a_job_runs_its_completions_and_completes(world: Cluster) -> None:
    w = world
    body = job("steps", 1, workers=2)
    body["spec"]["completions"] = 3
    await submit(w.rest, body)
    await w.models.settle()
    assert len(running(w.pods("steps"))) == 2  # parallelism 2 of 3 completions
    for p in w.pods("steps"):
        finish_pod(w.api.store, NS, p["metadata"]["name"])
    await w.models.settle()
    status = w.job("steps")["status"]
    assert status["succeeded"] == 2 and status["active"] == 1  # only one more is needed
    (last,) = [p for p in w.pods("steps") if p["status"]["phase"] == "Running"]
    finish_pod(w.api.store, NS, last["metadata"]["name"])
    await w.models.settle()
    status = w.job("steps")["status"]
    assert status["succeeded"] == 3 and "active" not in status
    assert conditions(w.job("steps"))["Complete"]["status"] == "True"
    assert "completionTime" in status
    # counted pods lose the job-tracking finalizer
    assert all(not p["metadata"].get("finalizers") for p in w.pods("steps"))


async def test_pod_names_labels_and_owner_are_the_job_controllers(world: Cluster) -> None:
    w = world
    made = await submit(w.rest, job("named", 1))
    await w.models.settle()
    (p,) = w.pods("named")
    meta = p["metadata"]
    assert meta["generateName"] == "named-" and meta["name"].startswith("named-")
    uid = made["metadata"]["uid"]
    for k, v in {
        "batch.kubernetes.io/job-name": "named",
        "job-name": "named",
        "batch.kubernetes.io/controller-uid": uid,
        "controller-uid": uid,
        "app": "named",
    }.items():
        assert meta["labels"][k] == v
    assert meta["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    (ref,) = meta["ownerReferences"]
    assert ref == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "named",
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


async def test_a_deleted_pod_counts_and_is_replaced_after_the_backoff(api: ApiServer) -> None:
    setup(api)
    w = Cluster(api, scheduler="both", backoff=10.0)
    try:
        await submit(w.rest, job("retry", 1, backoff_limit=2))
        await w.models.settle()
        (first,) = w.pods("retry")
        await w.rest.delete("v1", "pods", NS, first["metadata"]["name"])
        await w.models.settle()
        assert w.job("retry")["status"]["failed"] == 1
        assert w.pods("retry") == []  # the pod-failure backoff holds the replacement
        w.clock.advance(10)
        await w.models.settle()
        (second,) = running(w.pods("retry"))
        assert second["metadata"]["name"] != first["metadata"]["name"]
        assert "Failed" not in conditions(w.job("retry"))
    finally:
        await w.close()


async def test_a_fail_job_exit_code_rule_fails_the_job(world: Cluster) -> None:
    w = world
    body = job("rules", 1, backoff_limit=6)
    body["spec"]["podFailurePolicy"] = {
        "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
    }
    await submit(w.rest, body)
    await w.models.settle()
    (p,) = w.pods("rules")
    finish_pod(w.api.store, NS, p["metadata"]["name"], exit_code=42)
    await w.models.settle()
    failed = conditions(w.job("rules"))["Failed"]
    assert failed["reason"] == "PodFailurePolicy"
    assert failed["message"] == (
        f"Container main for pod {NS}/{p['metadata']['name']} failed with exit code 42 "
        "matching FailJob rule at index 0"
    )


async def test_an_active_deadline_fails_the_job_and_removes_its_pods(world: Cluster) -> None:
    w = world
    body = job("late", 1, backoff_limit=6)
    body["spec"]["activeDeadlineSeconds"] = 30
    await submit(w.rest, body)
    await w.models.settle()
    assert len(running(w.pods("late"))) == 1
    w.clock.advance(31)
    await w.models.settle()
    assert conditions(w.job("late"))["Failed"]["reason"] == "DeadlineExceeded"
    assert w.pods("late") == []
    assert "failed" not in w.job("late")["status"]  # its pod was removed, not failed


async def test_an_owner_gone_is_dropped_from_a_dependent_with_two(world: Cluster) -> None:
    w = world
    a = await submit(w.rest, job("owner-a", 1, suspend=True))
    b = await submit(w.rest, job("owner-b", 1, suspend=True))
    pg = podgroup_for(a)
    pg["metadata"]["ownerReferences"].append(
        {**podgroup_for(b)["metadata"]["ownerReferences"][0], "controller": False}
    )
    await w.rest.create(pg["apiVersion"], "podgroups", NS, pg)
    await w.rest.delete("batch/v1", "jobs", NS, "owner-a", {"propagationPolicy": "Background"})
    await w.models.settle()
    got = await w.rest.get(pg["apiVersion"], "podgroups", NS, pg["metadata"]["name"])
    assert got is not None
    assert [r["name"] for r in got["metadata"]["ownerReferences"]] == ["owner-b"]
    await w.rest.delete("batch/v1", "jobs", NS, "owner-b", {"propagationPolicy": "Background"})
    await w.models.settle()
    assert await w.rest.get(pg["apiVersion"], "podgroups", NS, pg["metadata"]["name"]) is None


async def test_the_higher_priority_gang_binds_first(world: Cluster) -> None:
    """Two 2 x 8-GPU gangs, room for one: the one of higher priority gets it, whole."""
    w = world
    for name, prio in (("low", 10), ("high", 1000)):
        body = job(name, 8, workers=2, gang=True, priority=prio)
        pg = podgroup_for(await submit(w.rest, body))
        del pg["spec"]["minResources"]  # both enqueued; only placement decides
        await w.rest.create(pg["apiVersion"], "podgroups", NS, pg)
    await w.models.settle()
    assert len(running(w.pods("high"))) == 2
    assert [p for p in w.pods("low") if p["spec"].get("nodeName")] == []


async def test_a_running_gang_that_loses_a_pod_goes_back_to_pending(world: Cluster) -> None:
    """Volcano's phases follow what is bound: Running with minMember bound, Pending (then
    Inqueue again) once a member is gone and nothing replaces it."""
    w = world
    body = job("pair", 2, workers=2, gang=True)
    pg = podgroup_for({**body, "metadata": {**body["metadata"], "uid": "none"}})
    del pg["metadata"]["ownerReferences"]
    await w.rest.create(pg["apiVersion"], "podgroups", NS, pg)
    template = body["spec"]["template"]
    for i in range(2):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"pair-{i}", **template["metadata"]},
            "spec": template["spec"],
        }
        await w.rest.create("v1", "pods", NS, pod)
    await w.models.settle()
    rt = w.api.store.resource("podgroups", "scheduling.volcano.sh")
    status = w.api.store.get(rt, NS, "job-pair")["status"]
    assert (status["phase"], status["running"]) == ("Running", 2)
    await w.rest.delete("v1", "pods", NS, "pair-0")
    await w.models.settle(only=["kubelet"])
    await w.models.step(only=["volcano"])
    status = w.api.store.get(rt, NS, "job-pair")["status"]
    assert (status["phase"], status["running"]) == ("Pending", 1)
    await w.models.step(only=["volcano"])
    assert w.api.store.get(rt, NS, "job-pair")["status"]["phase"] == "Inqueue"


async def test_models_run_as_tasks(api: ApiServer) -> None:
    setup(api)
    w = Cluster(api, scheduler="both")
    w.models.start(period=0.01)
    try:
        await submit(w.rest, job("live", 1))
        await until(lambda: len(running(w.pods("live"))) == 1)
    finally:
        await w.close()
    assert w.models.errors == []


def test_kube_scheduler_words() -> None:
    assert kube_unschedulable_message("0/3 nodes can host pod huge: 3 insufficient cpu", 3) == (
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
        "3 No preemption victims found for incoming pod.."
    )
    assert node("n9", gpus=4)["status"]["allocatable"]["nvidia.com/gpu"] == "4"


async def test_a_deleted_job_takes_its_pods_with_it(world: Cluster) -> None:
    """Background deletion: the collector deletes the pods, the Job controller lets go
    of their finalizer, the kubelet finishes them."""
    w = world
    await submit(w.rest, job("gone", 1, workers=2))
    await w.models.settle()
    assert len(running(w.pods("gone"))) == 2
    await w.rest.delete("batch/v1", "jobs", NS, "gone", {"propagationPolicy": "Background"})
    await w.models.settle()
    assert w.pods("gone") == []


async def test_a_gang_short_of_min_member_binds_nothing(world: Cluster) -> None:
    """Volcano's gang plugin (validJobFn, v1.7.0 to v1.12.0): fewer pods than minMember
    and allocate skips the gang; nothing binds until the last pod is there."""
    w = world
    body = job("trio", 1, workers=3, gang=True)
    pg = podgroup_for({**body, "metadata": {**body["metadata"], "uid": "none"}})
    del pg["metadata"]["ownerReferences"]
    await w.rest.create(pg["apiVersion"], "podgroups", NS, pg)
    template = body["spec"]["template"]

    def pod(i: int) -> Json:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"trio-{i}", **template["metadata"]},
            "spec": template["spec"],
        }

    rt = w.api.store.resource("podgroups", "scheduling.volcano.sh")
    for i in range(2):
        await w.rest.create("v1", "pods", NS, pod(i))
    await w.models.settle()
    assert [p["metadata"]["name"] for p in w.pods() if p["spec"].get("nodeName")] == []
    group = w.api.store.get(rt, NS, "job-trio")
    assert group["status"]["phase"] == "Inqueue"
    assert conditions(group)["Unschedulable"]["message"] == (
        "3/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, "
        "3 minAvailable; Pending: 2 Unschedulable"
    )
    await w.rest.create("v1", "pods", NS, pod(2))
    await w.models.settle()
    assert len(running(w.pods())) == 3
    assert w.api.store.get(rt, NS, "job-trio")["status"]["phase"] == "Running"
