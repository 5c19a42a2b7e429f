"""A model of Kueue's job reconciler for batch/v1 Jobs, read from kubernetes-sigs/kueue
at v0.8.0 (``pkg/controller/jobframework/reconciler.go`` ``ReconcileGenericJob``; the
steps named below are its comments), with a ClusterQueue that always has room.

- A Job with the label ``kueue.x-k8s.io/queue-name`` is Kueue's. Kueue makes a
  ``kueue.x-k8s.io/v1beta1`` Workload ``job-<name>`` for it, owned by the Job (its
  controller ownerReference), and admits it at once (conditions ``QuotaReserved`` and
  ``Admitted`` True): here quota is never short.
- "7. handle job is suspended": a job found suspended while its Workload is admitted is
  started again at once ("Job admitted, unsuspending", an Event ``Started``): whoever
  else suspended it, the suspension does not hold.

Not modelled: quota that is short (so "8. handle job is unsuspended", which suspends a
job whose Workload is not admitted, never applies), preemption, eviction and requeueing,
admission checks, pod sets.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from tests.controllers.common import controller_uid, owner_ref
from tests.controllers.events import EventRecorder, iso
from tests.controllers.rest import Json, Rest, RestError
from tests.controllers.runner import wall_clock

__all__ = ["KUEUE", "QUEUE_LABEL", "KueueJobs"]

KUEUE = "kueue.x-k8s.io/v1beta1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


class KueueJobs:
    name = "kueue"

    def __init__(self, rest: Rest, *, clock: Callable[[], datetime] = wall_clock) -> None:
        self.rest = rest
        self.clock = clock
        self.events = EventRecorder(rest, "kueue-admission", clock)

    async def close(self) -> None:
        await self.rest.close()

    async def step(self) -> bool:
        workloads = await self.rest.list(KUEUE, "workloads")
        by_owner = {controller_uid(w): w for w in workloads}
        changed = False
        for job in await self.rest.list("batch/v1", "jobs"):
            meta = job["metadata"]
            if QUEUE_LABEL not in (meta.get("labels") or {}) or meta.get("deletionTimestamp"):
                continue
            wl = by_owner.get(meta["uid"])
            if wl is None:
                await self._admitted_workload(job)
                changed = True
                continue
            if (job.get("spec") or {}).get("suspend"):
                await self._patch_job(job, {"spec": {"suspend": False}})
                await self.events.record(job, "Normal", "Started", "Admitted by clusterQueue")
                changed = True
        return changed

    async def _admitted_workload(self, job: Json) -> None:
        meta = job["metadata"]
        now = iso(self.clock())
        body: Json = {
            "apiVersion": KUEUE,
            "kind": "Workload",
            "metadata": {
                "name": f"job-{meta['name']}",
                "namespace": meta["namespace"],
                "ownerReferences": [owner_ref({**job, "apiVersion": "batch/v1", "kind": "Job"})],
            },
            "spec": {"queueName": meta["labels"][QUEUE_LABEL]},
        }
        made = await self.rest.create(KUEUE, "workloads", meta["namespace"], body)
        conds = [
            {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": now}
            for t in ("QuotaReserved", "Admitted")
        ]
        await self.rest.patch(
            KUEUE,
            "workloads",
            meta["namespace"],
            made["metadata"]["name"],
            {"status": {"conditions": conds}},
            subresource="status",
        )

    async def _patch_job(self, job: Json, body: Json) -> None:
        meta = job["metadata"]
        try:
            await self.rest.patch("batch/v1", "jobs", meta["namespace"], meta["name"], body)
        except RestError as e:
            if e.status not in (404, 409):
                raise
