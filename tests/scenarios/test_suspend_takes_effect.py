"""Suspend only where it takes effect, and undo it where it did not: corral's
descheduler over the in-memory API server with the models of the workload controllers
(training operator, JobSet, KubeRay, Kueue) running beside it.

The cluster: three 8-GPU nodes; fillers of priority 1,000,000 (never moved for a lower
gang) leave n1 4 GPUs, n2 and n3 2 each; a victim of priority 0 holds n1's 4 GPUs as
two 2-GPU pods; a 4-GPU gang of priority 1000 waits. Moving the victim to n2 + n3 makes
room on n1. The served CRDs are minimal ones that declare the switch or not
(:mod:`tests.builders.workload_crds`); the in-memory server does not prune here, and
needs not: where the switch is not served, corral never writes it."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from descheduler import parse_config
from tests.builders.workload_crds import workload_crd
from tests.controllers import Rest
from tests.controllers.gang_scheduler import GROUP_NAME, PODGROUP_API
from tests.controllers.jobset import JOBSET, JobSetController
from tests.controllers.kuberay import RAY, KubeRay
from tests.controllers.kueue import QUEUE_LABEL, KueueJobs
from tests.controllers.training_operator import KUBEFLOW, TrainingOperator
from tests.kubeapi import ApiServer
from tests.kubeapi.resources import ResourceType
from tests.scenarios.story import (
    DESCHED_NS,
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

pytestmark = pytest.mark.scenario

FILLERS = {"n1": [("fill-1", 4)], "n2": [("fill-2", 6)], "n3": [("fill-3", 6)]}
SUSPEND_IGNORED = "corral.dev/suspend-ignored"
SUSPENDED_BY = "corral.dev/suspended-by"


def config(**moves: Any) -> Any:
    # generous: a run ends as soon as the pods went and the gang bound
    return parse_config({"moves": {"resume_wait": 30, "suspend_grace": 15, **moves}})


def serve(api: ApiServer, *crds: Json) -> None:
    """The apiextensions API serving ``crds``, their kinds served, and Kueue's
    Workloads."""
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
    api.store.register(
        ResourceType("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", True, builtin=False)
    )
    for crd in crds:
        api.store.register_crd(crd)
    api.store.load(copy.deepcopy(list(crds)))


@pytest.fixture
async def cluster(api: ApiServer) -> AsyncIterator[Cluster]:
    setup(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DESCHED_NS}})
    c = Cluster(api, scheduler="gang")
    yield c
    await c.close()


def template(name: str, gpus: int, *, gang: str | None = None) -> Json:
    meta: Json = {"labels": {"app": name}}
    spec: Json = {
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
    }
    if gang:  # as corral's webhook admits it for Volcano
        meta["annotations"] = {GROUP_NAME: gang}
        spec["schedulerName"] = "volcano"
    return {"metadata": meta, "spec": spec}


def podgroup(name: str, owner: Json, members: int) -> Json:
    meta = owner["metadata"]
    return {
        "apiVersion": PODGROUP_API,
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": NS,
            "ownerReferences": [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"minMember": members, "queue": "default"},
    }


def pods_of(c: Cluster, prefix: str) -> list[Json]:
    return [p for p in c.pods() if p["metadata"]["name"].startswith(prefix)]


async def bind_to(c: Cluster, prefix: str, node: str) -> None:
    for p in pods_of(c, prefix):
        if not p["spec"].get("nodeName"):
            await c.rest.bind(NS, p["metadata"]["name"], node)


async def waiting_gang(c: Cluster) -> None:
    await submit(c.rest, job("llm", 4, gang=True, priority=1000), with_podgroup=True)
    await c.settle()
    assert bound(c.pods("llm")) == []
    assert c.gpus_used() == {"n1": 8, "n2": 6, "n3": 6}


def patches(api: ApiServer, plural: str, name: str, since: int = 0) -> list[Any]:
    """PATCHes of the object itself (not its status) from the ``since``-th request on."""
    return [
        r for r in api.log[since:] if r.method == "PATCH" and r.path.endswith(f"/{plural}/{name}")
    ]


def get(c: Cluster, api_version: str, plural: str, name: str) -> Json:
    group, _, version = api_version.rpartition("/")
    return c.api.store.get(c.api.store.resource(plural, group, version), NS, name)


def not_moved(doc: Json) -> dict[str, str]:
    return {x["unit"]: x["reason"] for x in doc["not_moved"]}


def pytorchjob(name: str) -> Json:
    tmpl = template(name, 2)
    return {
        "apiVersion": KUBEFLOW,
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "runPolicy": {},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": tmpl},
                "Worker": {"replicas": 1, "template": copy.deepcopy(tmpl)},
            },
        },
    }


async def pytorch_victim(c: Cluster, version: str, *, switch: bool = True) -> None:
    """The fillers, then a PyTorchJob of two 2-GPU pods on n1 under a training operator
    of ``version`` whose CRD serves the switch or not, then the waiting gang."""
    serve(c.api, workload_crd("PyTorchJob", switch=switch))
    c.models.add(TrainingOperator(Rest(c.api.url), version=version, clock=c.clock))
    await place(c, FILLERS, priority=1_000_000)
    await c.rest.create(KUBEFLOW, "pytorchjobs", NS, pytorchjob("pt"))
    await c.models.step(only=["training-operator"])  # its PodGroup; pods held: Pending
    assert pods_of(c, "pt-") == []
    await c.models.step(only=["volcano"])  # enqueued (Inqueue)
    await c.models.step(only=["training-operator"])
    await bind_to(c, "pt-", "n1")
    await c.settle()
    assert len(running(pods_of(c, "pt-"))) == 2
    await waiting_gang(c)


async def test_a_pytorchjob_is_suspended_its_pods_go_and_it_is_resumed_whole(
    cluster: Cluster,
) -> None:
    """Training operator v1.7+: the suspend deletes its pods and its PodGroup, the gang
    binds in the room, and the same run resumes the job: PodGroup made again, every
    replica made again and bound, Suspended=False, startTime reset."""
    c = cluster
    await pytorch_victim(c, "1.7")
    started = get(c, KUBEFLOW, "pytorchjobs", "pt")["status"]["startTime"]
    old = {p["metadata"]["uid"] for p in pods_of(c, "pt-")}
    c.clock.advance(600)

    doc = await run_descheduler(c.api, config(), models=c.models)
    assert [(m["unit"], m["method"], m["workloads"]) for m in doc["moves"]] == [
        (f"{NS}/pt", "suspend", [f"PyTorchJob {NS}/pt"])
    ]
    assert [o["status"] for o in doc["run"]["outcomes"]] == ["suspended"]
    assert [(r["workload"], r["action"]) for r in doc["run"]["resumed"]] == [
        (f"PyTorchJob {NS}/pt", "resume")
    ]
    await c.settle()

    assert len(running(c.pods("llm"))) == 1
    assert {p["spec"]["nodeName"] for p in c.pods("llm")} == {"n1"}
    pt = get(c, KUBEFLOW, "pytorchjobs", "pt")
    assert pt["spec"]["runPolicy"]["suspend"] is False
    assert SUSPENDED_BY not in (pt["metadata"].get("annotations") or {})
    cond = conditions(pt)
    assert cond["Suspended"]["status"] == "False"
    assert cond["Suspended"]["reason"] == "PyTorchJobResumed"
    assert pt["status"]["startTime"] > started  # the clock of activeDeadlineSeconds restarts
    pods = running(pods_of(c, "pt-"))
    assert len(pods) == 2 and not {p["metadata"]["uid"] for p in pods} & old
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["n2", "n3"]
    assert get(c, PODGROUP_API, "podgroups", "pt")["status"]["phase"] == "Running"
    reasons = {e["reason"] for e in c.api.store.items(c.api.store.resource("events"), NS)}
    assert {"PyTorchJobSuspended", "PyTorchJobResumed"} <= reasons
    assert c.gpus_used() == {"n1": 8, "n2": 8, "n3": 8}


async def test_a_jobset_is_suspended_its_pods_go_and_it_is_resumed_whole(
    cluster: Cluster,
) -> None:
    """JobSet v0.5+: the suspend reaches its child Jobs, whose pods the Job controller
    deletes; resumed, the child Jobs lose their startTime and start again, whole."""
    c = cluster
    serve(c.api, workload_crd("JobSet"))
    c.models.controllers.insert(0, JobSetController(Rest(c.api.url), clock=c.clock))
    await place(c, FILLERS, priority=1_000_000)
    rjob = {
        "name": "w",
        "replicas": 2,
        "template": {
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "backoffLimit": 0,
                "template": template("js", 2, gang="jobset-js"),
            }
        },
    }
    js = await c.rest.create(
        JOBSET,
        "jobsets",
        NS,
        {
            "apiVersion": JOBSET,
            "kind": "JobSet",
            "metadata": {"name": "js", "namespace": NS},
            "spec": {"replicatedJobs": [rjob]},
        },
    )
    await c.rest.create(PODGROUP_API, "podgroups", NS, podgroup("jobset-js", js, 2))
    await c.models.settle(only=["jobset-controller", "job-controller"])
    await bind_to(c, "js-w-", "n1")
    await c.settle()
    assert len(running(pods_of(c, "js-w-"))) == 2
    await waiting_gang(c)
    old = {p["metadata"]["uid"] for p in pods_of(c, "js-w-")}

    doc = await run_descheduler(c.api, config(), models=c.models)
    assert [(m["unit"], m["method"], m["workloads"]) for m in doc["moves"]] == [
        (f"{NS}/jobset-js", "suspend", [f"JobSet {NS}/js"])
    ]
    assert [o["status"] for o in doc["run"]["outcomes"]] == ["suspended"]
    assert [r["action"] for r in doc["run"]["resumed"]] == ["resume"]
    await c.settle()

    assert len(running(c.pods("llm"))) == 1
    js = get(c, JOBSET, "jobsets", "js")
    assert js["spec"]["suspend"] is False and conditions(js)["Suspended"]["reason"] == "ResumeJobs"
    for i in range(2):
        child = c.job(f"js-w-{i}")
        assert child["spec"]["suspend"] is False
        assert "Failed" not in conditions(child)
        assert conditions(child)["Suspended"]["reason"] == "JobResumed"
    pods = running(pods_of(c, "js-w-"))
    assert len(pods) == 2 and not {p["metadata"]["uid"] for p in pods} & old
    assert get(c, PODGROUP_API, "podgroups", "jobset-js")["status"]["phase"] == "Running"
    assert c.gpus_used() == {"n1": 8, "n2": 8, "n3": 8}


async def test_a_pytorchjob_whose_crd_has_no_switch_is_never_suspended(cluster: Cluster) -> None:
    """A training operator before v1.7: its CRD has no runPolicy.suspend (a patch would be
    pruned, answered 200, and nothing would happen). corral never writes it, and says
    why the gang stays."""
    c = cluster
    await pytorch_victim(c, "1.6", switch=False)
    doc = await run_descheduler(c.api, config(), models=c.models)
    assert doc["moves"] == [] and doc["waiting_gangs_after"] == [f"{NS}/job-llm"]
    why = not_moved(doc)[f"{NS}/pt"]
    assert why == (
        f"an evicted pod of PyTorchJob {NS}/pt is not made again without loss; not suspended: "
        "the served PyTorchJob CRD has no spec.runPolicy.suspend (its controller predates "
        "the switch): a suspend would be pruned and ignored"
    )
    assert patches(c.api, "pytorchjobs", "pt") == []
    assert len(running(pods_of(c, "pt-"))) == 2


async def test_a_controller_that_ignores_the_switch_is_rolled_back(cluster: Cluster) -> None:
    """The CRD serves the switch but the operator is v1.6 (CRDs upgraded, the operator
    not): the suspend is written, its pods do not go within moves.suspend_grace, and
    the run undoes it -- switch off, PodGroup back, corral's mark gone -- marks the job
    so that no later run tries again, and says so."""
    c = cluster
    await pytorch_victim(c, "1.6", switch=True)
    uids = {p["metadata"]["uid"] for p in pods_of(c, "pt-")}
    doc = await run_descheduler(c.api, config(suspend_grace=1), models=c.models)
    assert [(m["unit"], m["method"]) for m in doc["moves"]] == [(f"{NS}/pt", "suspend")]
    (out,) = doc["run"]["outcomes"]
    assert out["status"] == "rolled-back"
    assert out["message"] == (
        f"suspend rolled back: pods {NS}/pt-master-0, {NS}/pt-worker-0 still run 1s after the "
        "suspend (moves.suspend_grace): the controller ignores the switch"
    )
    assert doc["run"]["exit_code"] == 0 and doc["run"]["resumed"] == []
    await c.settle()

    pt = get(c, KUBEFLOW, "pytorchjobs", "pt")
    assert pt["spec"]["runPolicy"]["suspend"] is False  # nothing left suspended
    ann = pt["metadata"].get("annotations") or {}
    assert SUSPENDED_BY not in ann
    assert "the controller ignores the switch" in json.loads(ann[SUSPEND_IGNORED])["why"]
    assert get(c, PODGROUP_API, "podgroups", "pt")["status"]["phase"] == "Running"
    assert {p["metadata"]["uid"] for p in running(pods_of(c, "pt-"))} == uids
    events = list(c.api.store.items(c.api.store.resource("events"), NS))
    assert {(e["involvedObject"]["kind"], e["reason"], e["type"]) for e in events} >= {
        ("PyTorchJob", "SuspendRolledBack", "Warning"),
        ("PyTorchJob", "GangSuspendRolledBack", "Warning"),
    }

    # The next run does not try again, and says why.
    writes = len(patches(c.api, "pytorchjobs", "pt"))
    doc = await run_descheduler(c.api, config(suspend_grace=1), models=c.models)
    assert doc["moves"] == []
    assert (
        "not suspended: its controller ignored a suspend before (corral.dev/suspend-ignored"
        in (not_moved(doc)[f"{NS}/pt"])
    )
    assert len(patches(c.api, "pytorchjobs", "pt")) == writes


async def test_rayjobs_that_kuberay_cannot_suspend_are_never_suspended(cluster: Cluster) -> None:
    """KubeRay v1.1+: a RayJob on an existing RayCluster (clusterSelector), and one
    without shutdownAfterJobFinishes. Neither is suspended (KubeRay would refuse the
    spec and stop reconciling it); both say why."""
    c = cluster
    serve(c.api, workload_crd("RayJob"), workload_crd("RayCluster", switch=False))
    c.models.controllers.insert(0, KubeRay(Rest(c.api.url), clock=c.clock))
    await place(c, FILLERS, priority=1_000_000)
    group = {
        "groupName": "gpu",
        "replicas": 1,
        "template": template("ray", 2, gang="ray-shared"),
    }
    cluster_spec = {
        "headGroupSpec": {"template": template("ray", 2, gang="ray-shared")},
        "workerGroupSpecs": [group],
    }
    shared = await c.rest.create(
        RAY,
        "rayclusters",
        NS,
        {
            "apiVersion": RAY,
            "kind": "RayCluster",
            "metadata": {"name": "shared", "namespace": NS},
            "spec": cluster_spec,
        },
    )
    await c.rest.create(PODGROUP_API, "podgroups", NS, podgroup("ray-shared", shared, 2))
    await c.rest.create(
        RAY,
        "rayjobs",
        NS,
        {
            "apiVersion": RAY,
            "kind": "RayJob",
            "metadata": {"name": "on-shared", "namespace": NS},
            "spec": {
                "shutdownAfterJobFinishes": True,
                "clusterSelector": {"ray.io/cluster": "shared"},
                "entrypoint": "python train.py",
            },
        },
    )
    await c.models.settle(only=["kuberay-operator"])
    await bind_to(c, "shared-", "n1")
    await c.settle()
    assert len(running(pods_of(c, "shared-"))) == 2
    assert get(c, RAY, "rayjobs", "on-shared")["status"]["jobDeploymentStatus"] == "Running"
    await waiting_gang(c)

    doc = await run_descheduler(c.api, config(), models=c.models)
    assert doc["moves"] == []
    assert not_moved(doc)[f"{NS}/ray-shared"] == (
        f"an evicted pod of RayCluster {NS}/shared is not made again without loss; not "
        f"suspended: RayCluster {NS}/shared has no suspend switch"
    )
    assert patches(c.api, "rayjobs", "on-shared") == []
    assert patches(c.api, "rayclusters", "shared") == []

    # The same cluster made by a RayJob without shutdownAfterJobFinishes: its own.
    await c.rest.delete(RAY, "rayjobs", NS, "on-shared")
    own = await c.rest.create(
        RAY,
        "rayjobs",
        NS,
        {
            "apiVersion": RAY,
            "kind": "RayJob",
            "metadata": {"name": "keeps", "namespace": NS},
            "spec": {"shutdownAfterJobFinishes": False, "rayClusterSpec": cluster_spec},
        },
    )
    ref = {
        "apiVersion": RAY,
        "kind": "RayJob",
        "name": "keeps",
        "uid": own["metadata"]["uid"],
        "controller": True,
    }
    await c.rest.patch(RAY, "rayclusters", NS, "shared", {"metadata": {"ownerReferences": [ref]}})
    await c.settle()
    doc = await run_descheduler(c.api, config(), models=c.models)
    assert doc["moves"] == []
    assert not_moved(doc)[f"{NS}/ray-shared"].endswith(
        f"not suspended: RayJob {NS}/keeps has shutdownAfterJobFinishes unset: KubeRay "
        "refuses to suspend it"
    )
    assert patches(c.api, "rayjobs", "keeps") == []
    assert len(running(pods_of(c, "shared-"))) == 2


async def test_a_job_kueue_manages_is_left_to_kueue(cluster: Cluster) -> None:
    """A Job with Kueue's queue-name label, admitted by Kueue: corral neither suspends
    nor evicts it (Kueue would start it again at once, and the freed room would be
    taken back), and says so. The control: a person's suspend does not hold either."""
    c = cluster
    serve(c.api)
    c.models.controllers.insert(0, KueueJobs(Rest(c.api.url), clock=c.clock))
    await place(c, FILLERS, priority=1_000_000)
    train = job("train", 2, workers=2, gang=True)
    train["metadata"]["labels"] = {QUEUE_LABEL: "team-a"}
    await submit(c.rest, train, with_podgroup=True)
    await c.models.settle(only=["kueue", "job-controller"])
    await bind_to(c, "train-", "n1")
    await c.settle()
    assert len(running(c.pods("train"))) == 2
    (wl,) = c.api.store.items(c.api.store.resource("workloads", "kueue.x-k8s.io"), NS)
    assert conditions(wl)["Admitted"]["status"] == "True"
    await waiting_gang(c)

    doc = await run_descheduler(c.api, config(), models=c.models)
    assert doc["moves"] == [] and doc["waiting_gangs_after"] == [f"{NS}/job-llm"]
    assert not_moved(doc)[f"{NS}/job-train"] == (
        f"Job {NS}/train is managed by Kueue (label {QUEUE_LABEL}=team-a): Kueue starts an "
        "admitted job it finds suspended again, so only Kueue's own preemption moves it"
    )
    assert patches(c.api, "jobs", "train") == []
    assert not c.api.requests("POST", "/eviction")

    # Why: Kueue starts an admitted job it finds suspended again.
    await c.rest.patch("batch/v1", "jobs", NS, "train", {"spec": {"suspend": True}})
    await c.settle()
    assert c.job("train")["spec"]["suspend"] is False
    assert ("Job", "Started") in {
        (e["involvedObject"]["kind"], e["reason"])
        for e in c.api.store.items(c.api.store.resource("events"), NS)
    }
    assert len(running(c.pods("train"))) == 2

    # Without the label, but a Kueue Workload for it: Kueue's all the same.
    jobs = c.api.store.resource("jobs", "batch")
    c.api.store.patch(
        jobs, NS, "train", "application/merge-patch+json", {"metadata": {"labels": None}}
    )
    assert c.api.store.items(c.api.store.resource("workloads", "kueue.x-k8s.io"), NS)
    since = len(c.api.log)
    doc = await run_descheduler(c.api, config(), models=c.models)
    assert not_moved(doc)[f"{NS}/job-train"].startswith(
        f"Job {NS}/train is managed by Kueue (a Kueue Workload stands for it)"
    )
    assert patches(c.api, "jobs", "train", since) == []
    assert c.job("train")["spec"]["suspend"] is False
