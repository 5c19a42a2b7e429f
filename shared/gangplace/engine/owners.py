"""Records of the workloads that own pods, with what deciding how to move a gang needs:
the owner chain, the suspend switch and whether it is on, and -- for a batch/v1 Job --
how many more pod failures it tolerates and whether an eviction counts as one.

Pure: no I/O. Errors are :class:`~gangplace.engine.objects.RecordError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gangplace.engine.kinds import KINDS, Kinds, WorkloadKind, kind_of, split_api_version
from gangplace.engine.objects import RecordError, object_meta
from gangplace.engine.quirks.job_disruption import ignores_disruption

__all__ = [
    "ANNOTATION_SUSPENDED_BY",
    "ANNOTATION_SUSPEND_IGNORED",
    "KUEUE_QUEUE_LABEL",
    "WorkloadRecord",
    "crd_switch",
    "kueue_owned_uids",
    "read_kind",
    "suspend_refusal",
    "with_cluster_facts",
    "workload_from_json",
    "workload_key",
]

# Written by corral's descheduler on a workload it suspended (JSON: plan, time, the gang
# it made room for, the PodGroup it removed): it resumes only workloads that carry it.
ANNOTATION_SUSPENDED_BY = "corral.dev/suspended-by"

# Written by corral's descheduler on a workload whose controller ignored a suspend
# (JSON: plan, time, why): corral rolled it back and never suspends it again; a person
# removes the key once the controller is fixed (see docs/safe-moves.md).
ANNOTATION_SUSPEND_IGNORED = "corral.dev/suspend-ignored"
# A workload with this label is Kueue's (Kueue v0.6+ reconciles it, jobframework).
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


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
    owner_group: str = ""
    suspend_path: tuple[str, ...] = ()
    suspended: bool = False
    backoff_limit: int | None = None
    failed: int = 0
    ignores_disruption: bool = False
    finished: bool = False
    resource_version: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    # Why a suspend would not take effect or not hold ('' when it would): see
    # :func:`suspend_refusal`. Kueue's own jobs are never moved at all.
    suspend_refusal: str = ""
    kueue_managed: str = ""  # why Kueue owns it ('' when it does not)

    @property
    def key(self) -> str:
        return workload_key(self.namespace, self.kind, self.name)

    @property
    def can_suspend(self) -> bool:
        """It has a switch, and a suspend takes effect (see :func:`suspend_refusal`)."""
        return bool(self.suspend_path) and not self.suspend_refusal

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


def _controller(meta: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(kind, name, uid, API group) of the controller owner reference."""
    refs = meta.get("ownerReferences") or ()
    if not isinstance(refs, list):
        return "", "", "", ""
    ref = next((r for r in refs if isinstance(r, dict) and r.get("controller")), None)
    if ref is None:
        return "", "", "", ""
    group = split_api_version(str(ref.get("apiVersion") or ""))[0]
    return (
        str(ref.get("kind") or ""),
        str(ref.get("name") or ""),
        str(ref.get("uid") or ""),
        group,
    )


def read_kind(obj: Mapping[str, Any], kinds: Kinds = KINDS) -> WorkloadKind | None:
    """The registered kind of ``obj`` that the descheduler reads as a record (by its
    apiVersion's group and its kind), else None: a Volcano ``batch.volcano.sh`` Job is
    not a batch/v1 Job."""
    record = kind_of(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""), kinds)
    return record if record is not None and record.read else None


def _get(obj: Mapping[str, Any], path: Sequence[str]) -> Any:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(p)
    return cur


def workload_from_json(obj: Mapping[str, Any], kinds: Kinds = KINDS) -> WorkloadRecord:
    """A workload of a kind the registry marks ``read`` (:func:`read_kind`) as the API
    returns it."""
    kind = str(obj.get("kind") or "")
    record = read_kind(obj, kinds)
    if record is None:
        api = obj.get("apiVersion") or "no apiVersion"
        raise RecordError(f"{kind or 'object'} ({api}): not a workload kind corral reads")
    ns, name, meta = object_meta(obj, kind)
    ns = ns or "default"
    what = f"{kind} {ns}/{name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if not isinstance(spec, Mapping) or not isinstance(status, Mapping):
        raise RecordError(f"{what}: spec and status must be objects")
    path = record.suspend_path
    suspended = bool(_get(obj, path)) if path else False
    backoff: int | None = None
    failed = 0
    pfp = False
    finished = False
    if record.evicted == "job-failures":
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
    okind, oname, ouid, ogroup = _controller(meta)
    labels = meta.get("labels") or {}
    queue = labels.get(KUEUE_QUEUE_LABEL) if isinstance(labels, Mapping) else None
    kueue = f"label {KUEUE_QUEUE_LABEL}={queue}" if queue else ""
    return WorkloadRecord(
        kind=kind,
        group=record.group,
        namespace=ns,
        name=name,
        uid=str(meta.get("uid") or ""),
        owner_kind=okind,
        owner_name=oname,
        owner_uid=ouid,
        owner_group=ogroup,
        suspend_path=path,
        suspended=suspended,
        backoff_limit=backoff,
        failed=failed,
        ignores_disruption=pfp,
        finished=finished,
        resource_version=str(meta.get("resourceVersion") or ""),
        annotations={str(k): str(v) for k, v in ann.items()},
        suspend_refusal=_own_refusal(obj, what, record, {str(k): str(v) for k, v in ann.items()}),
        kueue_managed=kueue,
    )


def _own_refusal(
    obj: Mapping[str, Any], what: str, record: WorkloadKind, ann: Mapping[str, str]
) -> str:
    """What the object alone says against suspending it: corral saw its controller
    ignore a suspend before, or its kind's own rule (the registry's hook, such as
    KubeRay's conditions on a RayJob)."""
    if ANNOTATION_SUSPEND_IGNORED in ann:
        return (
            f"its controller ignored a suspend before ({ANNOTATION_SUSPEND_IGNORED}: "
            f"{ann[ANNOTATION_SUSPEND_IGNORED]}); remove the annotation once it is fixed"
        )
    return record.hooks.suspend_refusal(obj, what)


def _schema_has(schema: Any, path: Sequence[str]) -> bool:
    """Whether an OpenAPI v3 schema declares ``path`` (a field the API server keeps:
    an undeclared one is pruned, or kept only by x-kubernetes-preserve-unknown-fields,
    which says nothing of whether the controller reads it)."""
    cur = schema
    for part in path:
        props = cur.get("properties") if isinstance(cur, Mapping) else None
        if not isinstance(props, Mapping) or part not in props:
            return False
        cur = props[part]
    return isinstance(cur, Mapping) and cur.get("type") in (None, "boolean")


def crd_switch(crd: Mapping[str, Any], kinds: Kinds = KINDS) -> tuple[str, bool] | None:
    """(kind, whether its storage version's served schema declares the suspend switch)
    for a CustomResourceDefinition of a registered kind whose suspend takes effect only
    when its served schema declares the switch, else None. The
    switch is pruned on write where the schema lacks it (training-operator before v1.7:
    the patch answers 200 and nothing happens)."""
    spec = crd.get("spec") or {}
    if not isinstance(spec, Mapping):
        return None
    names = spec.get("names") or {}
    kind = str(names.get("kind") or "") if isinstance(names, Mapping) else ""
    record = kinds.get((str(spec.get("group") or ""), kind))
    if record is None or not record.suspend_path:
        return None
    versions = [v for v in spec.get("versions") or () if isinstance(v, Mapping)]
    stored = [v for v in versions if v.get("storage") and v.get("served", True)]
    if not stored:
        return kind, False
    schema = (stored[0].get("schema") or {}).get("openAPIV3Schema")
    return kind, _schema_has(schema, record.suspend_path)


def kueue_owned_uids(obj: Mapping[str, Any]) -> frozenset[str]:
    """The uids of the jobs a Kueue Workload (``kueue.x-k8s.io``) stands for: its
    ownerReferences (jobframework makes it owned by the job)."""
    if obj.get("kind") != "Workload" or not str(obj.get("apiVersion") or "").startswith(
        "kueue.x-k8s.io/"
    ):
        return frozenset()
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return frozenset(str(r.get("uid")) for r in refs if isinstance(r, Mapping) and r.get("uid"))


def suspend_refusal(
    w: WorkloadRecord,
    switches: Mapping[str, bool] | None,
    kueue_owned: frozenset[str],
    kinds: Kinds = KINDS,
) -> tuple[str, str]:
    """(why a suspend of ``w`` would not take effect, why Kueue owns it): the one rule
    for "does a suspend take effect". ``switches``: by kind, whether the cluster's served
    CRD declares the switch (None: the CRDs were not read; a kind missing from it could
    not be checked); ``kueue_owned``: uids of jobs a Kueue Workload stands for. The
    batch/v1 Job is built in: its switch always exists (Kubernetes 1.24+), which its
    registry entry says (``suspend_takes_effect``)."""
    kueue = w.kueue_managed or (
        "a Kueue Workload stands for it" if w.uid and w.uid in kueue_owned else ""
    )
    if not w.suspend_path:
        return f"{w.describe()} has no suspend switch", kueue
    if kueue:
        return (
            f"{w.describe()} is managed by Kueue ({kueue}): Kueue starts an admitted job it "
            "finds suspended again, so only Kueue's own preemption moves it",
            kueue,
        )
    if w.suspend_refusal:
        return w.suspend_refusal, ""
    record = kinds.get((w.group, w.kind))
    if record is None or record.suspend_takes_effect == "servedSchema":
        path = ".".join(w.suspend_path)
        got = None if switches is None else switches.get(w.kind)
        if got is None:
            return (
                f"whether the served {w.kind} CRD has {path} could not be checked (CRD not "
                "read): a switch it lacks is pruned and ignored",
                "",
            )
        if not got:
            return (
                f"the served {w.kind} CRD has no {path} (its controller predates the switch): "
                "a suspend would be pruned and ignored",
                "",
            )
    return "", ""


def with_cluster_facts(
    w: WorkloadRecord,
    switches: Mapping[str, bool] | None,
    kueue_owned: frozenset[str],
    kinds: Kinds = KINDS,
) -> WorkloadRecord:
    """``w`` with :func:`suspend_refusal` applied (the cluster's CRDs and Kueue)."""
    why, kueue = suspend_refusal(w, switches, kueue_owned, kinds)
    if not w.suspend_path:
        why = ""  # can_suspend is False already; the move method says "no switch"
    return replace(w, suspend_refusal=why, kueue_managed=kueue)
