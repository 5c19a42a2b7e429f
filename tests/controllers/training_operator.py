"""A model of the Kubeflow training operator's PyTorchJob controller with Volcano gang
scheduling on, read from kubeflow/training-operator at v1.6.0 and v1.7.0
(``pkg/controller.v1/common/job.go`` ``ReconcileJobs``, ``CleanUpResources``,
``pod.go`` ``ReconcilePods``, ``pkg/controller.v1/common/scheduling.go`` and
``podgroup_control.go`` ``DelayPodCreationDueToPodGroup``).

- Every reconcile (not suspended, not finished) first syncs the PodGroup named after the
  job (Volcano ``scheduling.volcano.sh/v1beta1``, owned by the job, ``minMember`` the
  sum of the replicas, ``minResources`` what they request): made when missing, its spec
  overwritten when it differs. Pods are held back while that PodGroup is Pending (or
  has no phase): Volcano has not enqueued it.
- Pods ``<job>-<type>-<index>`` (type lower case) from each replica's template, with the
  labels ``training.kubeflow.org/{job-name,replica-type,replica-index,operator-name}``,
  a controller ownerReference, ``schedulerName: volcano`` and the annotation
  ``scheduling.k8s.io/group-name: <job>`` (DecoratePodTemplateSpec). No finalizer.
  Conditions ``Created`` then ``Running`` once every pod runs; ``status.startTime`` set
  when first reconciled.
- v1.7+, ``spec.runPolicy.suspend``: every pod deleted (and the services, which this
  model does not make: the in-memory server serves none), the PodGroup deleted,
  ``Running=False`` and ``Suspended=True`` (reason ``PyTorchJobSuspended``). Resuming:
  ``Suspended=False`` (``PyTorchJobResumed``), ``status.startTime`` reset to now, the
  PodGroup made again (or its spec overwritten) and every replica made again.
- v1.6 (``version="1.6"``): there is no ``runPolicy.suspend`` in its types; its CRD
  prunes the field, and where a newer CRD keeps it the controller never reads it: the
  job runs on.

The real controller records ``JobTerminated`` and ``SuccessfulDeletePodGroup`` on every
reconcile while suspended, even with the PodGroup gone (``DeletePodGroup`` answers nil on
NotFound); the model records the latter once, when it deletes one, so that it rests.
Not modelled: services, restart policies and backoff, the finished states and
``ttlSecondsAfterFinished``, elastic (``elasticPolicy``) jobs, scheduler-plugins groups.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime
from typing import Any

from tests.controllers.common import (
    condition,
    controller_uid,
    owner_ref,
    set_condition,
    status_patch,
)
from tests.controllers.events import EventRecorder, iso
from tests.controllers.gang_scheduler import GROUP_NAME, PODGROUP_API
from tests.controllers.rest import Json, Rest, RestError
from tests.controllers.runner import wall_clock

__all__ = ["KUBEFLOW", "TrainingOperator"]

KUBEFLOW = "kubeflow.org/v1"
_LABEL = "training.kubeflow.org/"


def _requests(template: Json) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in (template.get("spec") or {}).get("containers") or ():
        for r, v in ((c.get("resources") or {}).get("requests") or {}).items():
            n = int(str(v).removesuffix("Gi")) if r != "cpu" else int(v)
            out[r] = out.get(r, 0) + n
    return out


class TrainingOperator:
    """See the module docstring. ``version``: "1.7" (the switch works) or "1.6"."""

    name = "training-operator"
    kind = "PyTorchJob"
    plural = "pytorchjobs"
    replica_key = "pytorchReplicaSpecs"

    def __init__(
        self,
        rest: Rest,
        *,
        version: str = "1.7",
        clock: Callable[[], datetime] = wall_clock,
    ) -> None:
        if version not in ("1.6", "1.7"):
            raise ValueError(f"version {version!r}: expected 1.6 or 1.7")
        self.rest = rest
        self.version = version
        self.clock = clock
        self.events = EventRecorder(rest, "pytorchjob-controller", clock)

    async def close(self) -> None:
        await self.rest.close()

    @property
    def honours_suspend(self) -> bool:
        return self.version != "1.6"

    async def step(self) -> bool:
        jobs = await self.rest.list(KUBEFLOW, self.plural)
        pods = await self.rest.list("v1", "pods")
        changed = False
        for job in sorted(jobs, key=lambda j: (j["metadata"]["namespace"], j["metadata"]["name"])):
            if job["metadata"].get("deletionTimestamp"):
                continue
            uid = job["metadata"]["uid"]
            mine = [p for p in pods if controller_uid(p) == uid]
            changed |= await self._sync(job, mine)
        return changed

    def _replicas(self, job: Json) -> dict[str, Json]:
        specs: dict[str, Json] = (job.get("spec") or {}).get(self.replica_key) or {}
        return specs

    def _podgroup(self, job: Json) -> Json:
        meta = job["metadata"]
        total = 0
        res: dict[str, int] = {}
        for spec in self._replicas(job).values():
            n = int(spec.get("replicas", 1))
            total += n
            for r, v in _requests(spec.get("template") or {}).items():
                res[r] = res.get(r, 0) + v * n
        min_res = {r: (f"{v}Gi" if r == "memory" else str(v)) for r, v in res.items()}
        return {
            "apiVersion": PODGROUP_API,
            "kind": "PodGroup",
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "ownerReferences": [owner_ref({**job, "apiVersion": KUBEFLOW, "kind": self.kind})],
            },
            "spec": {"minMember": total, "queue": "", "minResources": min_res},
        }

    async def _sync(self, job: Json, pods: list[Json]) -> bool:
        meta = job["metadata"]
        ns, name = meta["namespace"], meta["name"]
        run_policy = (job.get("spec") or {}).get("runPolicy") or {}
        suspended = bool(run_policy.get("suspend")) and self.honours_suspend
        old: Json = copy.deepcopy(job.get("status") or {})
        status: Json = copy.deepcopy(old)
        now = self.clock()
        conds: list[Json] = list(status.get("conditions") or ())
        changed = False
        if not condition(job, "Created"):
            conds = set_condition(conds, self._cond("Created", "True", "Created", now))
        if suspended:
            for p in pods:
                if not p["metadata"].get("deletionTimestamp"):
                    await self.rest.delete("v1", "pods", ns, p["metadata"]["name"])
                    changed = True
            if await self.rest.delete(PODGROUP_API, "podgroups", ns, name) is not None:
                await self.events.record(
                    job, "Normal", "SuccessfulDeletePodGroup", f"Deleted PodGroup: {name}"
                )
                changed = True
            run = condition(job, "Running")
            if run is not None and run.get("status") == "True":
                conds = set_condition(conds, self._cond("Running", "False", "Suspended", now))
            sus = condition(job, "Suspended")
            if sus is None or sus.get("status") != "True":
                conds = set_condition(conds, self._cond("Suspended", "True", "Suspended", now))
                await self.events.record(
                    job, "Normal", f"{self.kind}Suspended", f"{self.kind} {name} is suspended."
                )
        else:
            sus = condition(job, "Suspended")
            if sus is not None and sus.get("status") == "True":
                conds = set_condition(conds, self._cond("Suspended", "False", "Resumed", now))
                status["startTime"] = iso(now)
                await self.events.record(
                    job, "Normal", f"{self.kind}Resumed", f"{self.kind} {name} is resumed."
                )
            status.setdefault("startTime", iso(now))
            pg, wrote = await self._sync_podgroup(job)
            changed |= wrote
            phase = ((pg or {}).get("status") or {}).get("phase") or ""
            if phase not in ("", "Pending"):
                changed |= await self._make_pods(job, pods)
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            want = sum(int(s.get("replicas", 1)) for s in self._replicas(job).values())
            all_run = len(live) == want and all(
                (p.get("status") or {}).get("phase") == "Running" for p in live
            )
            run = condition(job, "Running")
            if all_run and (run is None or run.get("status") != "True"):
                conds = set_condition(conds, self._cond("Running", "True", "Running", now))
        status["conditions"] = conds
        patch = status_patch(old, status)
        if patch:
            try:
                await self.rest.patch(
                    KUBEFLOW, self.plural, ns, name, {"status": patch}, subresource="status"
                )
            except RestError as e:
                if e.status in (404, 409):
                    return True
                raise
            changed = True
        return changed

    async def _sync_podgroup(self, job: Json) -> tuple[Json | None, bool]:
        """SyncPodGroup: the PodGroup made, or its spec overwritten (None if it could not
        be: pods are then held), and whether it was written."""
        want = self._podgroup(job)
        ns, name = want["metadata"]["namespace"], want["metadata"]["name"]
        have = await self.rest.get(PODGROUP_API, "podgroups", ns, name)
        if have is None:
            try:
                made = await self.rest.create(PODGROUP_API, "podgroups", ns, want)
            except RestError as e:
                if e.status == 409:
                    return None, True
                raise
            return made, True
        if have.get("spec") != {**(have.get("spec") or {}), **want["spec"]}:
            try:
                have = await self.rest.patch(
                    PODGROUP_API, "podgroups", ns, name, {"spec": want["spec"]}
                )
            except RestError as e:
                if e.status in (404, 409):
                    return None, True
                raise
            return have, True
        return have, False

    async def _make_pods(self, job: Json, pods: list[Json]) -> bool:
        meta = job["metadata"]
        have = {p["metadata"]["name"] for p in pods}
        changed = False
        for rtype, spec in sorted(self._replicas(job).items()):
            for i in range(int(spec.get("replicas", 1))):
                pod_name = f"{meta['name']}-{rtype.lower()}-{i}"
                if pod_name in have:
                    continue
                await self.rest.create("v1", "pods", meta["namespace"], self._pod(job, rtype, i))
                changed = True
        return changed

    def _pod(self, job: Json, rtype: str, index: int) -> Json:
        meta = job["metadata"]
        tmpl: Json = copy.deepcopy(self._replicas(job)[rtype].get("template") or {})
        tmeta: dict[str, Any] = tmpl.get("metadata") or {}
        labels = {
            **(tmeta.get("labels") or {}),
            f"{_LABEL}job-name": meta["name"],
            f"{_LABEL}replica-type": rtype.lower(),
            f"{_LABEL}replica-index": str(index),
            f"{_LABEL}operator-name": "pytorchjob-controller",
        }
        annotations = {**(tmeta.get("annotations") or {}), GROUP_NAME: meta["name"]}
        spec = tmpl.get("spec") or {}
        spec["schedulerName"] = "volcano"
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{meta['name']}-{rtype.lower()}-{index}",
                "namespace": meta["namespace"],
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [owner_ref({**job, "apiVersion": KUBEFLOW, "kind": self.kind})],
            },
            "spec": spec,
        }

    def _cond(self, type_: str, status: str, why: str, now: datetime) -> Json:
        return {
            "type": type_,
            "status": status,
            "reason": f"{self.kind}{why}",
            "message": f"{self.kind} is {why.lower()}.",
            "lastUpdateTime": iso(now),
            "lastTransitionTime": iso(now),
        }
