"""A model of the JobSet controller, read from kubernetes-sigs/jobset at v0.5.0
(``pkg/controllers/jobset_controller.go``: ``reconcile``, ``constructJob``,
``suspendJobs``, ``resumeJobsIfNecessary``, ``resumeJob``; ``pkg/constants``); v0.6-v0.9
do the same for what is modelled here.

- Child Jobs ``<jobset>-<replicatedJob>-<index>`` for each replicated job's
  ``replicas``, from its template, labelled (Job and pod template)
  ``jobset.sigs.k8s.io/{jobset-name,replicatedjob-name,job-index}``, owned by the JobSet,
  with ``spec.suspend`` set to the JobSet's. The Job controller model runs their pods.
- ``spec.suspend`` on: every active child Job not suspended yet gets ``suspend: true``
  (an Update; the Job controller then deletes its pods), condition ``Suspended=True``
  reason ``SuspendedJobs`` "jobset is suspended".
- Off again: each suspended child Job first has ``status.startTime`` cleared (a Job's
  template may change only while it has none), its template's nodeSelector set to the
  replicated job's, then ``suspend: false``; condition ``Suspended=False`` reason
  ``ResumeJobs``.

Not modelled: success and failure policies, restarts, the in-order startup policy,
exclusive placement, the headless service.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime

from tests.controllers.common import (
    condition,
    controller_uid,
    owner_ref,
    set_condition,
    status_patch,
)
from tests.controllers.events import EventRecorder, iso
from tests.controllers.rest import Json, Rest, RestError
from tests.controllers.runner import wall_clock

__all__ = ["JOBSET", "JobSetController"]

JOBSET = "jobset.x-k8s.io/v1alpha2"
_KEY = "jobset.sigs.k8s.io/"


class JobSetController:
    name = "jobset-controller"

    def __init__(self, rest: Rest, *, clock: Callable[[], datetime] = wall_clock) -> None:
        self.rest = rest
        self.clock = clock
        self.events = EventRecorder(rest, "jobset", clock)

    async def close(self) -> None:
        await self.rest.close()

    async def step(self) -> bool:
        sets = await self.rest.list(JOBSET, "jobsets")
        jobs = await self.rest.list("batch/v1", "jobs")
        changed = False
        for js in sorted(sets, key=lambda j: (j["metadata"]["namespace"], j["metadata"]["name"])):
            if js["metadata"].get("deletionTimestamp"):
                continue
            mine = [j for j in jobs if controller_uid(j) == js["metadata"]["uid"]]
            changed |= await self._sync(js, mine)
        return changed

    async def _sync(self, js: Json, jobs: list[Json]) -> bool:
        meta = js["metadata"]
        ns = meta["namespace"]
        suspend = bool((js.get("spec") or {}).get("suspend"))
        changed = False
        have = {j["metadata"]["name"]: j for j in jobs}
        selectors: dict[str, Json] = {}
        for rjob in (js.get("spec") or {}).get("replicatedJobs") or ():
            tmpl = rjob.get("template") or {}
            selectors[rjob["name"]] = (
                ((tmpl.get("spec") or {}).get("template") or {}).get("spec") or {}
            ).get("nodeSelector") or {}
            for i in range(int(rjob.get("replicas", 1))):
                name = f"{meta['name']}-{rjob['name']}-{i}"
                if name not in have:
                    await self.rest.create("batch/v1", "jobs", ns, self._job(js, rjob, i, suspend))
                    changed = True
        now = self.clock()
        old: Json = copy.deepcopy(js.get("status") or {})
        conds: list[Json] = list(old.get("conditions") or ())
        sus = condition(js, "Suspended")
        active = [j for j in jobs if not _finished(j)]
        if suspend:
            for j in active:
                if not (j.get("spec") or {}).get("suspend"):
                    await self._update_job(j, {"spec": {"suspend": True}})
                    changed = True
            if sus is None or sus.get("status") != "True":
                conds = set_condition(
                    conds,
                    _cond("True", "SuspendedJobs", "jobset is suspended", now),
                )
                await self.events.record(js, "Normal", "SuspendedJobs", "jobset is suspended")
        else:
            for j in active:
                if not (j.get("spec") or {}).get("suspend"):
                    continue
                jmeta = j["metadata"]
                if (j.get("status") or {}).get("startTime"):
                    await self.rest.patch(
                        "batch/v1",
                        "jobs",
                        ns,
                        jmeta["name"],
                        {"status": {"startTime": None}},
                        subresource="status",
                    )
                rjob = (jmeta.get("labels") or {}).get(f"{_KEY}replicatedjob-name", "")
                body: Json = {
                    "spec": {
                        "suspend": False,
                        "template": {"spec": {"nodeSelector": selectors.get(rjob) or None}},
                    }
                }
                await self._update_job(j, body)
                changed = True
            if sus is not None and sus.get("status") == "True":
                conds = set_condition(conds, _cond("False", "ResumeJobs", "jobset is resumed", now))
                await self.events.record(js, "Normal", "ResumeJobs", "jobset is resumed")
        patch = status_patch(old, {**old, "conditions": conds} if conds else old)
        if patch:
            await self.rest.patch(
                JOBSET, "jobsets", ns, meta["name"], {"status": patch}, subresource="status"
            )
            changed = True
        return changed

    async def _update_job(self, job: Json, body: Json) -> None:
        meta = job["metadata"]
        try:
            await self.rest.patch("batch/v1", "jobs", meta["namespace"], meta["name"], body)
        except RestError as e:
            if e.status not in (404, 409):
                raise

    @staticmethod
    def _job(js: Json, rjob: Json, index: int, suspend: bool) -> Json:
        meta = js["metadata"]
        tmpl: Json = copy.deepcopy(rjob.get("template") or {})
        labels = {
            f"{_KEY}jobset-name": meta["name"],
            f"{_KEY}replicatedjob-name": rjob["name"],
            f"{_KEY}job-index": str(index),
        }
        spec: Json = tmpl.get("spec") or {}
        pod_tmpl: Json = spec.setdefault("template", {})
        pod_meta: Json = pod_tmpl.setdefault("metadata", {})
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
        spec["suspend"] = suspend
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"{meta['name']}-{rjob['name']}-{index}",
                "namespace": meta["namespace"],
                "labels": {**((tmpl.get("metadata") or {}).get("labels") or {}), **labels},
                "ownerReferences": [owner_ref({**js, "apiVersion": JOBSET, "kind": "JobSet"})],
            },
            "spec": spec,
        }


def _finished(job: Json) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


def _cond(status: str, reason: str, message: str, now: datetime) -> Json:
    return {
        "type": "Suspended",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": iso(now),
    }
