"""A model of the batch/v1 Job controller of Kubernetes v1.28, as the recordings show it.

- Pods are created from the template (``generateName: <job>-``, the template's labels
  plus ``batch.kubernetes.io/job-name``, ``batch.kubernetes.io/controller-uid``,
  ``job-name``, ``controller-uid``), with a controller ownerReference and the
  ``batch.kubernetes.io/job-tracking`` finalizer, up to ``parallelism`` (and no more than
  the completions still missing).
- A finished pod is counted once, then its finalizer is removed. Without a
  podFailurePolicy a terminating pod that has not Succeeded counts as failed at once,
  before it reaches phase Failed (job-evicted-backofflimit-0). With a podFailurePolicy
  a terminating pod is neither counted nor replaced until it is Failed; then the rules
  decide (Ignore: not counted; FailJob: the Job fails; Count) (job-evicted-podfailurepolicy).
- ``failed > backoffLimit`` fails the Job (BackoffLimitExceeded) and removes its pods.
  A replacement for a failed pod waits the pod-failure backoff (10 s, doubling).
- ``spec.suspend`` strips the finalizers and deletes the active pods (no failure
  counted), condition Suspended=True JobSuspended, startTime kept; resuming sets
  Suspended=False JobResumed and a new startTime (job-suspend-resume).
- Completions reached: condition Complete and completionTime; activeDeadlineSeconds
  passed: Failed DeadlineExceeded.

- A Job whose ``spec.managedBy`` names another controller is left alone entirely (the
  API server keeps the field only where the JobManagedBy gate is on: beta 1.32+,
  ``pkg/controller/job/job_controller.go`` ``isJobManagedByOtherController``).

- With the native gang API on at 1.36+ (``WorkloadWithJob``, alpha 1.36, KEP-5547 as
  first released: only "inferred gang" Jobs), an Indexed Job with ``parallelism ==
  completions`` whose template names no ``schedulingGroup`` gets, before its pods, a
  Workload ``<job>-<hash>`` (``controllerRef`` the Job, one template ``job`` with
  ``gang.minCount`` = parallelism) and a PodGroup ``<workload>-job-<hash>``, both owned by
  the Job, and each pod ``spec.schedulingGroup.podGroupName`` naming it
  (``keps/sig-apps/5547-integrate-workload-with-job``: "Object Creation Order", "Naming
  Conventions"; the hash here is the first five hex digits of the Job's uid, and the
  template name ``job`` is this model's). ``spec.scheduling`` (1.37) is not modelled.

Not modelled: Indexed completion mode, pod replacement policy, ttlSecondsAfterFinished.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from tests.controllers.common import (
    condition,
    controller_uid,
    drop_finalizer,
    is_ready,
    owner_ref,
    set_condition,
    status_patch,
)
from tests.controllers.events import EventRecorder, iso
from tests.controllers.rest import Json, Rest, RestError
from tests.controllers.runner import wall_clock
from tests.kubeapi.native_gangs import gate_on, native_version
from tests.kubeapi.resources import NATIVE_GROUP
from tests.kubeapi.versions import Release, Versions

__all__ = ["JOB_TRACKING", "JobController"]

JOB_TRACKING = "batch.kubernetes.io/job-tracking"
# spec.managedBy of the Jobs this controller manages (also when the field is unset)
JOB_CONTROLLER = "kubernetes.io/job-controller"
BATCH = "batch/v1"


def _parse(ts: str | None) -> datetime | None:
    if not ts:
        return None
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def _finished(job: Json) -> str:
    for t in ("Complete", "Failed"):
        c = condition(job, t)
        if c and c.get("status") == "True":
            return t
    return ""


def _exit_codes(pod: Json) -> list[tuple[str, int]]:
    out = []
    for cs in (pod.get("status") or {}).get("containerStatuses") or ():
        term = (cs.get("state") or {}).get("terminated")
        if term is not None:
            out.append((str(cs.get("name", "")), int(term.get("exitCode", 0))))
    return out


def match_pod_failure_policy(policy: Json, pod: Json) -> tuple[str, int] | None:
    """The action and index of the first rule matching a Failed pod, or None."""
    for i, rule in enumerate(policy.get("rules") or ()):
        on_codes = rule.get("onExitCodes")
        if on_codes:
            name = on_codes.get("containerName")
            values = set(on_codes.get("values") or ())
            op = on_codes.get("operator", "In")
            for cname, code in _exit_codes(pod):
                if name and cname != name:
                    continue
                if code == 0:
                    continue
                if (op == "In" and code in values) or (op == "NotIn" and code not in values):
                    return str(rule.get("action")), i
        for want in rule.get("onPodConditions") or ():
            c = condition(pod, str(want.get("type")))
            if c and c.get("status") == want.get("status", "True"):
                return str(rule.get("action")), i
    return None


class JobController:
    """See the module docstring. ``backoff`` is the first pod-failure delay in seconds
    (10 in Kubernetes; a test may set 0 or move ``clock``)."""

    name = "job-controller"

    def __init__(
        self,
        rest: Rest,
        *,
        clock: Callable[[], datetime] = wall_clock,
        backoff: float = 10.0,
        max_backoff: float = 360.0,
        versions: Versions | None = None,
    ) -> None:
        self.rest = rest
        self.versions = versions or Versions()
        self.clock = clock
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.events = EventRecorder(
            rest, "job-controller", clock, reporting_component="job-controller"
        )
        # uid of a pod counted already (its finalizer may not be off yet)
        self._counted: set[str] = set()
        # job uid -> (failures in a row, time of the last one)
        self._failures: dict[str, tuple[int, datetime]] = {}

    async def close(self) -> None:
        await self.rest.close()

    async def step(self) -> bool:
        jobs = await self.rest.list(BATCH, "jobs")
        pods = await self.rest.list("v1", "pods")
        by_owner: dict[str, list[Json]] = {}
        for p in pods:
            uid = controller_uid(p)
            if uid:
                by_owner.setdefault(uid, []).append(p)
        changed = False
        live: set[str] = set()
        for job in sorted(
            jobs, key=lambda j: (j["metadata"].get("namespace", ""), j["metadata"]["name"])
        ):
            if job["metadata"].get("deletionTimestamp"):
                continue
            live.add(job["metadata"]["uid"])
            if (job.get("spec") or {}).get("managedBy", JOB_CONTROLLER) != JOB_CONTROLLER:
                continue  # another controller's Job: its pods and status are not ours
            changed |= await self._sync(job, by_owner.get(job["metadata"]["uid"], []))
        # Pods whose Job is gone (or going) lose the finalizer, so that they can go too.
        for p in pods:
            if JOB_TRACKING in (p["metadata"].get("finalizers") or ()) and (
                controller_uid(p) not in live
            ):
                changed |= await drop_finalizer(self.rest, "v1", "pods", p, JOB_TRACKING)
        return changed

    # --- one Job ------------------------------------------------------------------------

    async def _sync(self, job: Json, pods: list[Json]) -> bool:
        spec = job.get("spec") or {}
        old_status: Json = copy.deepcopy(job.get("status") or {})
        status: Json = copy.deepcopy(old_status)
        status.setdefault("uncountedTerminatedPods", {})
        now = self.clock()
        uid = job["metadata"]["uid"]
        policy = spec.get("podFailurePolicy")
        changed = False

        active: list[Json] = []
        waiting_termination = 0
        finish_off: list[Json] = []  # counted pods whose finalizer is to go
        failed_new = succeeded_new = failures_now = 0
        fail_job: tuple[str, str] | None = None
        for p in sorted(pods, key=lambda p: p["metadata"]["name"]):
            meta = p["metadata"]
            tracked = JOB_TRACKING in (meta.get("finalizers") or ())
            phase = (p.get("status") or {}).get("phase")
            fresh = tracked and meta["uid"] not in self._counted
            if phase == "Succeeded":
                if fresh:
                    succeeded_new += 1
                if tracked:
                    finish_off.append(p)
            elif phase == "Failed":
                if fresh:
                    action = "Count"
                    if policy:
                        hit = match_pod_failure_policy(policy, p)
                        if hit is not None:
                            action = hit[0]
                            if action == "FailJob" and fail_job is None:
                                fail_job = (
                                    "PodFailurePolicy",
                                    self._fail_job_message(p, hit[1]),
                                )
                    failures_now += 1
                    if action != "Ignore":
                        failed_new += 1
                if tracked:
                    finish_off.append(p)
            elif meta.get("deletionTimestamp"):
                if policy:
                    # waits for the kubelet to make it Failed: neither counted nor replaced
                    waiting_termination += 1
                else:
                    if fresh:
                        failed_new += 1
                        failures_now += 1
                    if tracked:
                        finish_off.append(p)
            else:
                active.append(p)

        # count first, then let the pods go
        if failed_new:
            status["failed"] = status.get("failed", 0) + failed_new
        if succeeded_new:
            status["succeeded"] = status.get("succeeded", 0) + succeeded_new
        if failures_now:
            n, _ = self._failures.get(uid, (0, now))
            self._failures[uid] = (n + failures_now, now)

        finished = _finished(job)
        conditions: list[Json] = list(status.get("conditions") or ())
        events: list[tuple[str, str, str]] = []
        if not finished:
            fail = self._failure(job, status, now, fail_job)
            if fail is not None:
                reason, message = fail
                conditions = set_condition(
                    conditions, self._cond("Failed", "True", reason, message, now)
                )
                events.append(("Warning", reason, message))
                finished = "Failed"
            elif self._complete(spec, status, active):
                conditions = set_condition(
                    conditions,
                    {
                        "type": "Complete",
                        "status": "True",
                        "lastProbeTime": iso(now),
                        "lastTransitionTime": iso(now),
                    },
                )
                status["completionTime"] = iso(now)
                events.append(("Normal", "Completed", "Job completed"))
                finished = "Complete"

        suspended = bool(spec.get("suspend"))
        to_delete: list[Json] = []
        to_create = 0
        if finished or suspended:
            to_delete = active
            active = []
        if not finished:
            sus = condition(job, "Suspended")
            if suspended:
                if not sus or sus.get("status") != "True":
                    conditions = set_condition(
                        conditions,
                        self._cond("Suspended", "True", "JobSuspended", "Job suspended", now),
                    )
                    events.append(("Normal", "Suspended", "Job suspended"))
            else:
                if sus and sus.get("status") == "True":
                    conditions = set_condition(
                        conditions,
                        self._cond("Suspended", "False", "JobResumed", "Job resumed", now),
                    )
                    events.append(("Normal", "Resumed", "Job resumed"))
                    status["startTime"] = iso(now)
                status.setdefault("startTime", iso(now))
                wanted = int(spec.get("parallelism", 1))
                if spec.get("completions") is not None:
                    wanted = min(wanted, int(spec["completions"]) - status.get("succeeded", 0))
                elif status.get("succeeded", 0):
                    wanted = 0
                if len(active) > wanted:
                    to_delete = active[wanted:]
                    active = active[:wanted]
                to_create = max(0, wanted - len(active) - waiting_termination)
                if to_create and not self._backoff_passed(uid, now):
                    to_create = 0
        if conditions:
            status["conditions"] = conditions
        status["ready"] = sum(1 for p in active if is_ready(p))
        status["active"] = len(active) + to_create
        if not status["active"]:
            del status["active"]

        # the Job's status, then the pods
        patch = status_patch(old_status, status)
        if patch:
            try:
                job = await self.rest.patch(
                    BATCH,
                    "jobs",
                    job["metadata"]["namespace"],
                    job["metadata"]["name"],
                    {"status": patch},
                    subresource="status",
                )
            except RestError as e:
                if e.status in (404, 409):
                    return True
                raise
            changed = True
        for p in finish_off:
            self._counted.add(p["metadata"]["uid"])
            changed |= await drop_finalizer(self.rest, "v1", "pods", p, JOB_TRACKING)
        for type_, reason, message in events:
            await self.events.record(job, type_, reason, message)
        for p in to_delete:
            await drop_finalizer(self.rest, "v1", "pods", p, JOB_TRACKING)
            self._counted.add(p["metadata"]["uid"])
            gone = await self.rest.delete(
                "v1", "pods", p["metadata"]["namespace"], p["metadata"]["name"]
            )
            if gone is not None:
                await self.events.record(
                    job, "Normal", "SuccessfulDelete", f"Deleted pod: {p['metadata']['name']}"
                )
            changed = True
        group = await self._native_gang(job) if to_create > 0 else None
        for _ in range(to_create):
            body = self.pod_for(job)
            if group is not None:
                body["spec"]["schedulingGroup"] = {"podGroupName": group}
            try:
                pod = await self.rest.create("v1", "pods", job["metadata"]["namespace"], body)
            except RestError as e:
                if e.status >= 500:
                    raise
                # pkg/controller/controller_utils.go (v1.28) createPods: a Warning
                # FailedCreate "Error creating: ..." and the sync ends with the error;
                # the Job is synced again later (a rate-limited requeue: here the next
                # step, which does not count as a write so that settle() does not spin).
                body = e.body if isinstance(e.body, dict) else {}
                message = str(body.get("message") or e)
                await self.events.record(
                    job, "Warning", "FailedCreate", f"Error creating: {message}"
                )
                return changed
            await self.events.record(
                job, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}"
            )
            changed = True
        return changed

    # --- the native gang (KEP-5547) -----------------------------------------------------

    def _inferred_gang(self, job: Json) -> bool:
        spec = job.get("spec") or {}
        template = (spec.get("template") or {}).get("spec") or {}
        return (
            self.versions.kube >= Release(1, 36)
            and gate_on("WorkloadWithJob", self.versions)
            and native_version(self.versions) is not None
            and spec.get("completionMode") == "Indexed"
            and spec.get("parallelism") is not None
            and spec.get("parallelism") == spec.get("completions")
            and "schedulingGroup" not in template
        )

    async def _native_gang(self, job: Json) -> str | None:
        """The PodGroup the Job's pods name, made (with its Workload) when missing; None
        for a Job that is not an inferred gang."""
        if not self._inferred_gang(job):
            return None
        meta = job["metadata"]
        api = f"{NATIVE_GROUP}/{native_version(self.versions)}"
        suffix = str(meta["uid"]).replace("-", "")[:5]
        workload = f"{meta['name']}-{suffix}"
        group = f"{workload}-job-{suffix}"
        owner = [owner_ref({**job, "apiVersion": BATCH, "kind": "Job"})]
        policy = {"gang": {"minCount": int(job["spec"]["parallelism"])}}
        objects = [
            (
                "workloads",
                {
                    "metadata": {"name": workload, "ownerReferences": owner},
                    "spec": {
                        "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": meta["name"]},
                        "podGroupTemplates": [{"name": "job", "schedulingPolicy": policy}],
                    },
                },
            ),
            (
                "podgroups",
                {
                    "metadata": {"name": group, "ownerReferences": owner},
                    "spec": self._pod_group_spec(workload, policy),
                },
            ),
        ]
        for plural, body in objects:
            try:
                await self.rest.create(api, plural, meta["namespace"], body)
            except RestError as e:
                if e.status != 409:
                    raise
        return group

    def _pod_group_spec(self, workload: str, policy: Json) -> Json:
        if native_version(self.versions) == "v1alpha2":
            ref = {"workload": {"workloadName": workload, "podGroupTemplateName": "job"}}
            return {"podGroupTemplateRef": ref, "schedulingPolicy": policy}
        return {
            "workloadRef": {"workloadName": workload, "templateName": "job"},
            "schedulingPolicy": policy,
        }

    # --- rules ---------------------------------------------------------------------------

    @staticmethod
    def _cond(type_: str, status: str, reason: str, message: str, now: datetime) -> Json:
        return {
            "type": type_,
            "status": status,
            "lastProbeTime": iso(now),
            "lastTransitionTime": iso(now),
            "reason": reason,
            "message": message,
        }

    @staticmethod
    def _fail_job_message(pod: Json, index: int) -> str:
        codes = _exit_codes(pod)
        name = pod["metadata"]["name"]
        ns = pod["metadata"].get("namespace", "")
        if codes:
            cname, code = codes[0]
            return (
                f"Container {cname} for pod {ns}/{name} failed with exit code {code} "
                f"matching FailJob rule at index {index}"
            )
        return f"Pod {ns}/{name} has condition matching FailJob rule at index {index}"

    def _failure(
        self, job: Json, status: Json, now: datetime, fail_job: tuple[str, str] | None
    ) -> tuple[str, str] | None:
        spec = job.get("spec") or {}
        if fail_job is not None:
            return fail_job
        if status.get("failed", 0) > int(spec.get("backoffLimit", 6)):
            return "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        deadline = spec.get("activeDeadlineSeconds")
        start = _parse(status.get("startTime"))
        if (
            deadline is not None
            and start is not None
            and not spec.get("suspend")
            and now - start >= timedelta(seconds=int(deadline))
        ):
            return "DeadlineExceeded", "Job was active longer than specified deadline"
        return None

    @staticmethod
    def _complete(spec: Json, status: Json, active: list[Json]) -> bool:
        done = status.get("succeeded", 0)
        if spec.get("completions") is not None:
            return done >= int(spec["completions"])
        return done > 0 and not active

    def _backoff_passed(self, uid: str, now: datetime) -> bool:
        n, last = self._failures.get(uid, (0, now))
        if n == 0 or self.backoff <= 0:
            return True
        delay = min(self.max_backoff, self.backoff * 2 ** (n - 1))
        return now >= last + timedelta(seconds=delay)

    @staticmethod
    def pod_for(job: Json) -> Json:
        """The pod the Job controller creates from ``job``'s template."""
        meta = job["metadata"]
        tmpl = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        tmeta: dict[str, Any] = tmpl.get("metadata") or {}
        labels = dict(tmeta.get("labels") or {})
        for k, v in (
            ("batch.kubernetes.io/controller-uid", meta["uid"]),
            ("batch.kubernetes.io/job-name", meta["name"]),
            ("controller-uid", meta["uid"]),
            ("job-name", meta["name"]),
        ):
            labels.setdefault(k, v)
        pod_meta: Json = {
            "generateName": f"{meta['name']}-",
            "namespace": meta.get("namespace", ""),
            "labels": labels,
            "finalizers": [JOB_TRACKING],
            "ownerReferences": [owner_ref({**job, "apiVersion": BATCH, "kind": "Job"})],
        }
        if tmeta.get("annotations"):
            pod_meta["annotations"] = dict(tmeta["annotations"])
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": pod_meta,
            "spec": tmpl.get("spec") or {},
        }
