"""The workloads end to end: the in-memory API server with the handout's CRDs installed
(../shared/crds), the webhook served over TLS with its PodGroup reconciler, and every
object created or updated as the API server would do it -- an AdmissionReview to the
webhook, its patch applied, then stored. Operators and controllers are played by the
tests, creating objects as the fixtures in tests/webhook/fixtures/workloads show them."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import functools
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import pytest
import yaml
from gangplace.kube import KubeClient
from gangplace.thirdparty import crds_dir

from tests.controllers import ControllerSet, GarbageCollector, Rest
from tests.kubeapi import ApiServer, ResourceType
from tests.kubeapi import objects as o
from webhook.admission.review import decode_patch
from webhook.config import WebhookConfig
from webhook.podgroups.calls import PodGroupApi
from webhook.podgroups.reconciler import PodGroupReconciler, RetryPolicy
from webhook.server import graceful_stop, init_app, start
from webhook.tls.certificates import new_bundle
from webhook.tls.contexts import client_context, load_pair, server_context

# Stories over the API server and the webhook served over TLS: not in `make test-fast`.
pytestmark = pytest.mark.scenario

# Other projects' CRDs ($CORRAL_DATA or ../shared): the kinds of the tests marked crds.
CRDS = crds_dir(Path(__file__).resolve().parents[2])
FIXTURES = Path(__file__).parent / "fixtures" / "workloads"
BUNDLE = new_bundle("corral-webhook", "corral-system", dt.datetime.now(dt.UTC), ips=["127.0.0.1"])
NS = "ml"
GROUP = "scheduling.k8s.io/group-name"
Json = dict[str, Any]


def fixture_object(name: str) -> Json:
    """The object of a fixture, as its creator sent it (no uid, no resourceVersion)."""
    obj: Json = json.loads((FIXTURES / name).read_text())["request"]["object"]
    for k in ("uid", "resourceVersion", "generation", "creationTimestamp"):
        obj["metadata"].pop(k, None)
    obj.pop("status", None)
    return obj


async def eventually(check: Callable[[], Any], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


class Cluster:
    """The API server's side of admission, over real HTTPS to the webhook."""

    def __init__(self, api: ApiServer, session: aiohttp.ClientSession, url: str) -> None:
        self.api, self.session, self.url = api, session, url
        self.store = api.store

    def rt(self, obj: Json) -> ResourceType:
        group, _, version = obj["apiVersion"].rpartition("/")
        for rt in self.store.types.values():
            if (rt.group, rt.version, rt.kind) == (group, version, obj["kind"]):
                return rt
        raise KeyError(obj["apiVersion"], obj["kind"])

    async def _admit(self, obj: Json, old: Json | None) -> Json:
        rt = self.rt(obj)
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        gvr = {"group": rt.group, "version": rt.version, "resource": rt.plural}
        op = "UPDATE" if old is not None else "CREATE"
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": gvk,
                "resource": gvr,
                "requestKind": gvk,
                "requestResource": gvr,
                "name": obj["metadata"].get("name", ""),
                "namespace": NS,
                "operation": op,
                "userInfo": {"username": "admin", "groups": ["system:masters"]},
                "object": obj,
                "oldObject": old,
                "dryRun": False,
                "options": {
                    "apiVersion": "meta.k8s.io/v1",
                    "kind": "CreateOptions" if old is None else "UpdateOptions",
                },
            },
        }
        async with self.session.post(f"{self.url}/mutate", json=review) as r:
            assert r.status == 200
            response: Json = (await r.json())["response"]
        assert response["allowed"], response
        ops = decode_patch(response)
        patched: Json = jsonpatch.apply_patch(obj, ops) if ops else copy.deepcopy(obj)
        return patched

    async def create(self, obj: Json) -> Json:
        patched = await self._admit(obj, None)
        stored: Json = self.store.create(self.rt(obj), NS, patched)
        return stored

    async def update(self, obj: Json, change: Callable[[Json], None]) -> Json:
        old = self.store.get(self.rt(obj), NS, obj["metadata"]["name"])
        new = copy.deepcopy(old)
        change(new)
        patched = await self._admit(new, old)
        stored: Json = self.store.replace(self.rt(obj), NS, obj["metadata"]["name"], patched)
        return stored

    def podgroups(self) -> dict[str, Json]:
        rt = self.store.resource("podgroups", "scheduling.volcano.sh")
        return {pg["metadata"]["name"]: pg for pg in self.store.items(rt, NS)}


@functools.cache
def _crds() -> tuple[Json, ...]:
    """The published CRDs, parsed once per run (some are hundreds of kilobytes of YAML:
    parsed for every test they took most of this module's time)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    paths = sorted(CRDS.glob("*.yaml")) if CRDS is not None else []
    return tuple(yaml.load(p.read_text(), Loader=loader) for p in paths)


@pytest.fixture
async def cluster(api: ApiServer, kube: KubeClient) -> AsyncIterator[Cluster]:
    for crd in _crds():
        api.store.register_crd(copy.deepcopy(crd))
    api.store.register(ResourceType("batch", "v1", "cronjobs", "CronJob", True))
    api.store.load([o.namespace(NS)])
    pg = PodGroupApi(kube)
    reconciler = PodGroupReconciler(
        pg.create,
        pg.resolve_owner,
        existing=pg.existing,
        update=pg.update,
        policy=RetryPolicy(base_delay=0.02, max_delay=0.1, owner_wait=2, hint_wait=0.05),
    )
    app = init_app(WebhookConfig(), reconciler=reconciler)
    ctx = server_context()
    load_pair(ctx, BUNDLE.cert, BUNDLE.key)
    runner, port = await start(app, "127.0.0.1", 0, ctx, shutdown_timeout=2)
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=client_context(BUNDLE.ca_cert))
    )
    c = Cluster(api, session, f"https://127.0.0.1:{port}")
    c.reconciler = reconciler  # type: ignore[attr-defined]
    try:
        yield c
    finally:
        await session.close()
        await graceful_stop(runner)


async def settled(c: Cluster) -> None:
    await asyncio.wait_for(c.reconciler.drain(), 10)  # type: ignore[attr-defined]


def owner_uids(pg: Json) -> list[str]:
    return [r["uid"] for r in pg["metadata"].get("ownerReferences") or []]


# --- Spark ------------------------------------------------------------------------------


def driver_pod(app: Json) -> Json:
    """The driver the operator's spark-submit makes: spec.driver's labels and
    annotations copied, owned by the SparkApplication."""
    pod = fixture_object("pod-create-spark-driver.json")
    pod["metadata"]["annotations"] = dict(app["spec"]["driver"].get("annotations") or {})
    pod["metadata"]["ownerReferences"][0]["uid"] = app["metadata"]["uid"]
    return pod


def executor_pod(app: Json, driver: Json, i: int) -> Json:
    """An executor the driver makes: spec.executor's annotations, owned by the driver."""
    pod = fixture_object("pod-create-spark-executor.json")
    pod["metadata"]["name"] = f"spark-pi-9a8b7c6d5e4f3a2b-exec-{i}"
    pod["metadata"]["labels"]["spark-exec-id"] = str(i)
    pod["metadata"]["annotations"] = dict(app["spec"]["executor"].get("annotations") or {})
    ref = pod["metadata"]["ownerReferences"][0]
    ref["name"], ref["uid"] = driver["metadata"]["name"], driver["metadata"]["uid"]
    return pod


@pytest.mark.crds  # its kind is served from another project's CRD
async def test_spark_driver_and_executors_end_in_one_podgroup(cluster: Cluster) -> None:
    app = await cluster.create(fixture_object("sparkapp-create-pi.json"))
    driver = await cluster.create(driver_pod(app))
    executors = [await cluster.create(executor_pod(app, driver, i)) for i in (1, 2)]
    await settled(cluster)
    pgs = cluster.podgroups()
    assert list(pgs) == ["sparkapplication-spark-pi"]
    pg = pgs["sparkapplication-spark-pi"]
    assert pg["spec"]["minMember"] == 1
    assert pg["spec"]["minResources"]["nvidia.com/gpu"] == "2"
    assert owner_uids(pg) == [app["metadata"]["uid"]]
    for pod in (driver, *executors):
        assert pod["metadata"]["annotations"][GROUP] == "sparkapplication-spark-pi"
        assert pod["spec"]["schedulerName"] == "volcano"


async def test_plain_spark_submit_pods_end_in_one_podgroup(cluster: Cluster) -> None:
    driver = await cluster.create(fixture_object("pod-create-sparksubmit-driver.json"))
    ex = fixture_object("pod-create-sparksubmit-executor.json")
    ex["metadata"]["ownerReferences"][0]["uid"] = driver["metadata"]["uid"]
    executor = await cluster.create(ex)
    await settled(cluster)
    pgs = cluster.podgroups()
    gang = "spark-2b7e4f1a9c3d4e5f8a6b0c1d2e3f4a5b"
    assert list(pgs) == [gang]
    assert pgs[gang]["spec"]["minMember"] == 1
    assert owner_uids(pgs[gang]) == [driver["metadata"]["uid"]]
    assert executor["metadata"]["annotations"][GROUP] == gang


# --- CronJob ----------------------------------------------------------------------------


async def test_two_cronjob_runs_are_two_gangs_and_the_first_goes_with_its_job(
    cluster: Cluster,
) -> None:
    cron = cluster.store.create(
        cluster.store.resource("cronjobs", "batch"),
        NS,
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "nightly-eval", "namespace": NS},
            "spec": {"schedule": "0 2 * * *", "jobTemplate": {"spec": {}}},
        },
    )
    runs = []
    for minutes in ("29412600", "29414040"):
        job = fixture_object("job-create-cronjob-run.json")
        job["metadata"]["name"] = f"nightly-eval-{minutes}"
        job["metadata"]["ownerReferences"][0]["uid"] = cron["metadata"]["uid"]
        runs.append(await cluster.create(job))
    await settled(cluster)
    pgs = cluster.podgroups()
    assert sorted(pgs) == ["job-nightly-eval-29412600", "job-nightly-eval-29414040"]
    for run in runs:
        pg = pgs[f"job-{run['metadata']['name']}"]
        assert owner_uids(pg) == [run["metadata"]["uid"]]  # the run's Job, not the CronJob
        assert run["spec"]["podFailurePolicy"]["rules"][0]["action"] == "Ignore"
    # The first run's Job is deleted (history limit): the garbage collector takes its gang
    # with it, and leaves the second run's (owned by a Job still there).
    cluster.store.delete(cluster.store.resource("jobs", "batch"), NS, runs[0]["metadata"]["name"])
    async with ControllerSet([GarbageCollector(Rest(cluster.api.url))]) as gc:
        assert await gc.settle() == 1  # one pass deleted, the next found nothing to do
    assert sorted(cluster.podgroups()) == ["job-nightly-eval-29414040"]


# --- scaling ------------------------------------------------------------------------------


def sweep_job() -> Json:
    job = fixture_object("job-update-parallelism.json")
    job["spec"]["parallelism"] = 2
    job["spec"].pop("podFailurePolicy")
    job["spec"].pop("selector")
    job["metadata"] = {"name": "sweep", "namespace": NS}
    job["spec"]["template"]["metadata"] = {}
    job["spec"]["template"]["spec"]["schedulerName"] = "default-scheduler"
    return job


async def test_scaling_a_job_updates_its_podgroups_minmember(cluster: Cluster) -> None:
    job = await cluster.create(sweep_job())
    await settled(cluster)
    assert cluster.podgroups()["job-sweep"]["spec"]["minMember"] == 2

    def scale(n: int) -> Callable[[Json], None]:
        def change(o: Json) -> None:
            o["spec"]["parallelism"] = n

        return change

    await cluster.update(job, scale(4))
    await settled(cluster)
    pg = cluster.podgroups()["job-sweep"]
    assert pg["spec"]["minMember"] == 4
    assert pg["spec"]["minResources"]["nvidia.com/gpu"] == "4"
    await cluster.update(job, scale(1))
    await settled(cluster)
    pg = cluster.podgroups()["job-sweep"]
    assert pg["spec"]["minMember"] == 1
    assert pg["spec"]["minResources"]["nvidia.com/gpu"] == "1"
    assert owner_uids(pg) == [job["metadata"]["uid"]]
    # The template was not touched by the updates, and the rule was added once.
    stored = cluster.store.get(cluster.store.resource("jobs", "batch"), NS, "sweep")
    assert stored["spec"]["template"] == job["spec"]["template"]
    assert len(stored["spec"]["podFailurePolicy"]["rules"]) == 1


async def test_a_podgroup_that_is_not_the_workloads_is_not_scaled(cluster: Cluster) -> None:
    job = await cluster.create(sweep_job())
    await settled(cluster)
    rt = cluster.store.resource("podgroups", "scheduling.volcano.sh")
    cluster.store.patch(
        rt,
        NS,
        "job-sweep",
        "application/merge-patch+json",
        {
            "metadata": {
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": "other"}
                ]
            }
        },
    )

    def change(o: Json) -> None:
        o["spec"]["parallelism"] = 4

    await cluster.update(job, change)
    await settled(cluster)
    assert cluster.podgroups()["job-sweep"]["spec"]["minMember"] == 2


# --- existing gangs and steps ---------------------------------------------------------------


@pytest.mark.crds  # its kind is served from another project's CRD
async def test_a_volcano_jobs_pods_keep_volcanos_queue(cluster: Cluster) -> None:
    vcjob = cluster.store.create(
        cluster.store.resource("jobs", "batch.volcano.sh"),
        NS,
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "mpi-bench", "namespace": NS},
            "spec": {
                "queue": "research",
                "minAvailable": 2,
                "schedulerName": "volcano",
                "tasks": [],
            },
        },
    )
    uid = vcjob["metadata"]["uid"]
    pg_name = f"mpi-bench-{uid}"
    rt = cluster.store.resource("podgroups", "scheduling.volcano.sh")
    cluster.store.create(  # as Volcano's job controller makes it
        rt,
        NS,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": pg_name,
                "namespace": NS,
                "ownerReferences": [
                    {
                        "apiVersion": "batch.volcano.sh/v1alpha1",
                        "kind": "Job",
                        "name": "mpi-bench",
                        "uid": uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {"minMember": 2, "queue": "research"},
        },
    )
    pod = fixture_object("pod-create-volcano-job-worker.json")
    pod["metadata"]["annotations"][GROUP] = pg_name
    pod["metadata"]["ownerReferences"][0]["uid"] = uid
    sent = copy.deepcopy(pod)
    stored = await cluster.create(pod)
    await settled(cluster)
    for fld in ("annotations", "labels"):
        assert stored["metadata"][fld] == sent["metadata"][fld]
    assert stored["spec"]["schedulerName"] == "volcano"
    assert list(cluster.podgroups()) == [pg_name]
    assert cluster.podgroups()[pg_name]["spec"]["queue"] == "research"


@pytest.mark.crds  # its kind is served from another project's CRD
async def test_an_argo_step_pod_is_left_alone(cluster: Cluster) -> None:
    wf = cluster.store.create(
        cluster.store.resource("workflows", "argoproj.io"),
        NS,
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "metadata": {"name": "train-pipeline-x7k2q", "namespace": NS},
            "spec": {"entrypoint": "main", "templates": []},
        },
    )
    pod = fixture_object("pod-create-argo-step.json")
    pod["metadata"]["ownerReferences"][0]["uid"] = wf["metadata"]["uid"]
    sent = copy.deepcopy(pod)
    stored = await cluster.create(pod)
    await settled(cluster)
    assert stored["metadata"]["annotations"] == sent["metadata"]["annotations"]
    assert stored["spec"]["schedulerName"] == "default-scheduler"
    assert cluster.podgroups() == {}


# --- LeaderWorkerSet ---------------------------------------------------------------------


@pytest.mark.crds  # its kind is served from another project's CRD
async def test_a_leaderworkersets_groups_get_a_podgroup_each(cluster: Cluster) -> None:
    lws = await cluster.create(fixture_object("lws-create-vllm.json"))
    leader = fixture_object("pod-create-lws-leader.json")
    leader["metadata"]["annotations"] = {
        **lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["annotations"],
        "leaderworkerset.sigs.k8s.io/size": "2",
    }
    stored = await cluster.create(leader)
    await settled(cluster)
    pgs = cluster.podgroups()
    assert sorted(pgs) == ["vllm-0", "vllm-1", "vllm-2"]
    for pg in pgs.values():
        assert pg["spec"]["minMember"] == 2
        assert owner_uids(pg) == [lws["metadata"]["uid"]]
    assert stored["metadata"]["annotations"][GROUP] == "vllm-1"
