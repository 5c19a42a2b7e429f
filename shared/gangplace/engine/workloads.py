"""Records of the workloads that own pods, with what deciding how to move a gang needs:
the owner chain, the suspend switch and whether it is on, and -- for a batch/v1 Job --
how many more pod failures it tolerates and whether an eviction counts as one.

Pure: no I/O. Errors are :class:`~gangplace.engine.objects.RecordError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .objects import RecordError, object_meta

__all__ = [
    "ANNOTATION_SUSPENDED_BY",
    "DISRUPTION_TARGET",
    "RECREATING_OWNERS",
    "SUSPEND_PATHS",
    "WORKLOAD_KINDS",
    "WorkloadRecord",
    "ignores_disruption",
    "workload_from_json",
    "workload_key",
]

# Written by corral's descheduler on a workload it suspended (JSON: plan, time, the gang
# it made room for, the PodGroup it removed): it resumes only workloads that carry it.
ANNOTATION_SUSPENDED_BY = "corral.dev/suspended-by"

# Where each kind with a suspend switch keeps it. Suspending removes the pods without
# counting failures (the Job controller, JobSet, the Kubeflow training operator and
# KubeRay all support it); Kueue preempts this way.
SUSPEND_PATHS: Mapping[str, tuple[str, ...]] = {
    "Job": ("spec", "suspend"),
    "JobSet": ("spec", "suspend"),
    "RayJob": ("spec", "suspend"),
    **{k: ("spec", "runPolicy", "suspend") for k in ("PyTorchJob", "TFJob", "MPIJob")},
}
# Kinds read as records: those with a switch, and RayCluster (between a RayJob and its
# pods). The API group each is listed under.
WORKLOAD_KINDS: Mapping[str, str] = {
    "Job": "batch",
    "JobSet": "jobset.x-k8s.io",
    "RayJob": "ray.io",
    "RayCluster": "ray.io",
    **{k: "kubeflow.org" for k in ("PyTorchJob", "TFJob", "MPIJob")},
}
# Direct pod owners that make an evicted pod again without loss.
RECREATING_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})

DISRUPTION_TARGET = "DisruptionTarget"


@dataclass(frozen=True, slots=True)
class WorkloadRecord:
    """One workload object. ``suspend_path`` is empty for a kind without a switch;
    ``backoff_limit`` and ``failed`` are a Job's (None/0 otherwise);
    ``ignores_disruption``: its podFailurePolicy does not count a pod disrupted by an
    eviction (see :func:`ignores_disruption`)."""

    kind: str
    group: str
    namespace: str
    name: str
    uid: str = ""
    owner_kind: str = ""
    owner_name: str = ""
    owner_uid: str = ""
    suspend_path: tuple[str, ...] = ()
    suspended: bool = False
    backoff_limit: int | None = None
    failed: int = 0
    ignores_disruption: bool = False
    finished: bool = False
    resource_version: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return workload_key(self.namespace, self.kind, self.name)

    @property
    def can_suspend(self) -> bool:
        return bool(self.suspend_path)

    def describe(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def failures_left(self) -> int | None:
        """Pod failures the Job still tolerates (it fails past ``backoffLimit``)."""
        if self.backoff_limit is None:
            return None
        return max(self.backoff_limit - self.failed, 0)


def workload_key(namespace: str, kind: str, name: str) -> str:
    return f"{namespace}/{kind}/{name}"


def _controller(meta: Mapping[str, Any]) -> tuple[str, str, str]:
    refs = meta.get("ownerReferences") or ()
    if not isinstance(refs, list):
        return "", "", ""
    ref = next((r for r in refs if isinstance(r, dict) and r.get("controller")), None)
    if ref is None:
        return "", "", ""
    return str(ref.get("kind") or ""), str(ref.get("name") or ""), str(ref.get("uid") or "")


def ignores_disruption(rules: Sequence[Any] | None) -> bool:
    """Whether a Job's podFailurePolicy ignores a pod disrupted by an eviction: a rule
    ``{action: Ignore, onPodConditions: [{type: DisruptionTarget}]}`` that no earlier
    rule can pre-empt. Rules apply first match first, and an exit-code rule may match
    the evicted container's exit (143 after SIGTERM), so any onExitCodes rule before
    it, or an earlier rule of another action on DisruptionTarget, makes it False."""
    for rule in rules or ():
        if not isinstance(rule, dict):
            return False
        conds = rule.get("onPodConditions")
        if rule.get("onExitCodes") is not None or not isinstance(conds, list):
            return False
        hits = any(
            isinstance(c, dict)
            and c.get("type") == DISRUPTION_TARGET
            and str(c.get("status") or "True") == "True"
            for c in conds
        )
        if hits:
            return rule.get("action") == "Ignore"
    return False


def _get(obj: Mapping[str, Any], path: Sequence[str]) -> Any:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(p)
    return cur


def workload_from_json(obj: Mapping[str, Any]) -> WorkloadRecord:
    """A workload of one of :data:`WORKLOAD_KINDS` as the API returns it."""
    kind = str(obj.get("kind") or "")
    if kind not in WORKLOAD_KINDS:
        raise RecordError(f"{kind or 'object'}: not a workload kind corral reads")
    ns, name, meta = object_meta(obj, kind)
    ns = ns or "default"
    what = f"{kind} {ns}/{name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if not isinstance(spec, Mapping) or not isinstance(status, Mapping):
        raise RecordError(f"{what}: spec and status must be objects")
    path = SUSPEND_PATHS.get(kind, ())
    suspended = bool(_get(obj, path)) if path else False
    backoff: int | None = None
    failed = 0
    pfp = False
    finished = False
    if kind == "Job":
        raw = spec.get("backoffLimit", 6)
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            raise RecordError(f"{what}: spec.backoffLimit: expected a count, got {raw!r}")
        backoff = raw
        f = status.get("failed", 0) or 0
        if isinstance(f, bool) or not isinstance(f, int) or f < 0:
            raise RecordError(f"{what}: status.failed: expected a count, got {f!r}")
        failed = f
        policy = spec.get("podFailurePolicy") or {}
        rules = policy.get("rules") if isinstance(policy, Mapping) else None
        pfp = ignores_disruption(rules if isinstance(rules, list) else None)
        finished = any(
            isinstance(c, dict)
            and c.get("type") in ("Complete", "Failed")
            and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
    ann = meta.get("annotations") or {}
    if not isinstance(ann, Mapping):
        raise RecordError(f"{what}: annotations: expected a map of strings")
    okind, oname, ouid = _controller(meta)
    return WorkloadRecord(
        kind=kind,
        group=WORKLOAD_KINDS[kind],
        namespace=ns,
        name=name,
        uid=str(meta.get("uid") or ""),
        owner_kind=okind,
        owner_name=oname,
        owner_uid=ouid,
        suspend_path=path,
        suspended=suspended,
        backoff_limit=backoff,
        failed=failed,
        ignores_disruption=pfp,
        finished=finished,
        resource_version=str(meta.get("resourceVersion") or ""),
        annotations={str(k): str(v) for k, v in ann.items()},
    )
