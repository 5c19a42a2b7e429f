"""The cluster of the scenario tests: three Ready nodes of 8 GPUs (as in the recordings),
Jobs and the PodGroups corral's webhook writes for them, the controller models that play
the control plane (:class:`Cluster`: Job controller, garbage collector, kubelet, a
scheduler), a fragmented history laid out by hand (:func:`place`, :data:`LAYOUT_767`) and
one ``corral-descheduler run --once`` against it (:func:`run_descheduler`).

    setup(api)
    c = Cluster(api, scheduler="gang")
    await place(c, LAYOUT_767)          # 7, 6 and 7 GPUs used by Jobs of backoffLimit 0
    await submit(c.rest, job("llm", 4, gang=True), with_podgroup=True)
    await c.settle()                    # every model stepped until none writes
    doc = await run_descheduler(c.api)
    await c.settle()
"""

from __future__ import annotations

import asyncio
import copy
import io
import json
from typing import Any

from descheduler import DeschedulerConfig
from descheduler.running import process
from descheduler.running.process import RunOptions
from tests.controllers import ControllerSet, ManualClock, Rest, control_plane
from tests.controllers.gang_scheduler import GROUP_NAME, PODGROUP_API
from tests.kubeapi import ApiServer
from tests.kubeapi.kubelet import Kubelet
from tests.kubeapi.recording import node

Json = dict[str, Any]

NS = "ml"
NODES = ("n1", "n2", "n3")
QUEUE_NAME = "scheduling.volcano.sh/queue-name"


def setup(api: ApiServer, *extra: Json) -> None:
    api.store.load(
        [
            *(node(n) for n in NODES),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
            *extra,
        ]
    )


def job(
    name: str,
    gpus: int,
    *,
    workers: int = 1,
    backoff_limit: int = 0,
    suspend: bool = False,
    priority: int | None = None,
    gang: bool = False,
) -> Json:
    """A Job of ``workers`` pods of ``gpus`` GPUs each. ``gang``: as corral's webhook
    admits it for Volcano (schedulerName volcano, the pods tied to PodGroup
    ``job-<name>``)."""
    spec: Json = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "busybox:1.36",
                "command": ["sleep", "3600"],
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                    "limits": {"nvidia.com/gpu": str(gpus)},
                },
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    template: Json = {"metadata": {"labels": {"app": name}}, "spec": spec}
    if gang:
        spec["schedulerName"] = "volcano"
        template["metadata"]["annotations"] = {
            GROUP_NAME: f"job-{name}",
            QUEUE_NAME: "default",
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "parallelism": workers,
            "completions": workers,
            "backoffLimit": backoff_limit,
            "suspend": suspend,
            "template": template,
        },
    }


def podgroup_for(job_obj: Json) -> Json:
    """The PodGroup corral's webhook makes for a Job: ``job-<name>``, owned by it,
    minMember the parallelism, minResources what minMember pods request."""
    spec = job_obj["spec"]
    n = int(spec.get("parallelism", 1))
    req = spec["template"]["spec"]["containers"][0]["resources"]["requests"]
    min_res = {"cpu": str(int(req["cpu"]) * n), "memory": f"{int(req['memory'][:-2]) * n}Gi"}
    min_res["nvidia.com/gpu"] = str(int(req["nvidia.com/gpu"]) * n)
    meta = job_obj["metadata"]
    return {
        "apiVersion": PODGROUP_API,
        "kind": "PodGroup",
        "metadata": {
            "name": f"job-{meta['name']}",
            "namespace": meta["namespace"],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"minMember": n, "queue": "default", "minResources": min_res},
    }


async def submit(rest: Rest, job_obj: Json, *, with_podgroup: bool = False) -> Json:
    """Create the Job (and, as the webhook would, its PodGroup)."""
    made = await rest.create("batch/v1", "jobs", NS, copy.deepcopy(job_obj))
    if with_podgroup:
        await rest.create(PODGROUP_API, "podgroups", NS, podgroup_for(made))
    return made


DESCHED_NS = "corral-system"


async def run_descheduler(
    api: ApiServer,
    config: DeschedulerConfig | None = None,
    *,
    models: ControllerSet | None = None,
    period: float = 0.02,
) -> dict[str, Any]:
    """``corral-descheduler run --once`` against the fake, as test_run_live.py does. With
    ``models``, they are stepped (one pass every ``period`` seconds) while the run goes,
    as a cluster's controllers run beside it: a suspend is checked by its pods going."""
    if models is not None:
        task = asyncio.create_task(run_descheduler(api, config))
        while not task.done():
            await models.step()
            await asyncio.sleep(period)
        return await task
    out = io.StringIO()
    opts = RunOptions(
        once=True, output="json", lease_namespace=DESCHED_NS, backoff_initial=0.01, sync_timeout=5.0
    )
    code = await process.run_descheduler(
        opts,
        config or DeschedulerConfig(),
        client=api.client("descheduler"),
        out=out,
        install_signals=False,
    )
    doc: dict[str, Any] = json.loads(out.getvalue()) if out.getvalue() else {}
    assert code == 0, doc
    return doc


async def place(c: Cluster, layout: dict[str, list[tuple[str, int]]], **job_kw: Any) -> None:
    """Jobs (gangs of one, with their PodGroups) bound by hand where ``layout`` says,
    the fragmented history of a busy cluster."""
    for where, jobs in layout.items():
        for name, gpus in jobs:
            await submit(c.rest, job(name, gpus, gang=True, **job_kw), with_podgroup=True)
            await c.models.settle(only=["job-controller"])
            (pod,) = c.pods(name)
            await c.rest.bind(NS, pod["metadata"]["name"], where)
    await c.settle()


LAYOUT_767 = {
    "n1": [("big-1", 4), ("a1", 1), ("a2", 1), ("a3", 1)],
    "n2": [("big-2", 4), ("b1", 1), ("b2", 1)],
    "n3": [("big-3", 4), ("c1", 1), ("c2", 1), ("c3", 1)],
}


class Cluster:
    """The models of one scenario, all stepped in order by :meth:`settle`."""

    def __init__(self, api: ApiServer, *, scheduler: str = "gang", backoff: float = 0.0) -> None:
        """``scheduler``: "gang" (Volcano's rules), "pod" (default-scheduler) or "both";
        ``backoff``: the Job controller's pod-failure backoff, in seconds of ``clock``."""
        self.api = api
        self.rest = Rest(api.url)
        self.clock = ManualClock()
        self.kubelet = Kubelet()
        self.models = ControllerSet(
            control_plane(
                api.url,
                api.store,
                scheduler=scheduler,
                clock=self.clock,
                backoff=backoff,
                kubelet=self.kubelet,
            )
        )

    async def settle(self) -> int:
        return await self.models.settle()

    async def close(self) -> None:
        await self.models.stop()
        await self.rest.close()

    # --- what a user would look at --------------------------------------------------

    def pods(self, job_name: str | None = None) -> list[Json]:
        out = [
            p
            for p in self.api.store.items(self.api.store.resource("pods"), NS)
            if job_name is None or (p["metadata"].get("labels") or {}).get("job-name") == job_name
        ]
        return sorted(out, key=lambda p: p["metadata"]["name"])

    def job(self, name: str) -> Json:
        return self.api.store.get(self.api.store.resource("jobs", "batch"), NS, name)

    def podgroup(self, name: str) -> Json:
        rt = self.api.store.resource("podgroups", "scheduling.volcano.sh")
        return self.api.store.get(rt, NS, name)

    def gpus_used(self) -> dict[str, int]:
        used = dict.fromkeys(NODES, 0)
        for p in self.pods():
            n = (p.get("spec") or {}).get("nodeName")
            if n and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                req = p["spec"]["containers"][0]["resources"]["requests"]
                used[n] += int(req.get("nvidia.com/gpu", 0))
        return used


def bound(pods: list[Json]) -> list[Json]:
    return [p for p in pods if (p.get("spec") or {}).get("nodeName")]


def running(pods: list[Json]) -> list[Json]:
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]


def conditions(obj: Json) -> dict[str, Json]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}
