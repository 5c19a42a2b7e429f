"""Records of the objects beside nodes and pods: PodDisruptionBudgets, Namespaces,
PriorityClasses, PodGroups (Volcano's and scheduler-plugins') and Volcano Queues.

Nodes and pods have the engine's own records (:class:`~gangplace.engine.NodeRecord`,
:class:`~gangplace.engine.PodRecord`). These are the rest: small frozen records with the
fields the webhook, the descheduler and the Kubernetes layer read, parsed from the JSON
the API server returns (or a ``kubectl get -o json`` dump). This is the one parser: the
descheduler's state builder, the informers and the evictor all read them here.

Pure: no I/O. Errors are :class:`RecordError`, naming the object and the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gangplace.engine.membership import ANNOTATION_GANG_TIMEOUT, VOLCANO_SLA_WAITING_TIME
from gangplace.engine.queues import Queue
from gangplace.engine.requests import ResourceError, parse_resource_list
from gangplace.engine.selectors import LabelSelector, SelectorError
from gangplace.engine.timeparse import TimeFormatError, parse_duration, parse_time

__all__ = [
    "COSCHED_GROUP",
    "VOLCANO_GROUP",
    "NamespaceRecord",
    "PdbRecord",
    "PodGroupRecord",
    "PriorityClassRecord",
    "QueueRecord",
    "RecordError",
    "namespace_from_json",
    "object_meta",
    "pdb_from_json",
    "podgroup_from_json",
    "priority_class_from_json",
    "queue_from_json",
    "scaled_int_or_percent",
    "timestamp",
]

VOLCANO_GROUP = "scheduling.volcano.sh"
COSCHED_GROUP = "scheduling.x-k8s.io"
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class RecordError(ValueError):
    """An object whose fields cannot be read; the message names the object and field."""


def object_meta(obj: Mapping[str, Any], kind: str) -> tuple[str, str, Mapping[str, Any]]:
    """(namespace, name, metadata); the namespace is '' for a cluster-scoped object."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise RecordError(f"{kind} without metadata.name")
    return str(meta.get("namespace") or ""), name, meta


def timestamp(raw: Any, what: str) -> datetime | None:
    """An RFC 3339 timestamp as an aware UTC datetime; None when empty."""
    if not raw:
        return None
    try:
        return parse_time(str(raw))
    except TimeFormatError as e:
        raise RecordError(f"{what}: {e}") from None


def _str_map(raw: Any, what: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise RecordError(f"{what}: expected a map of strings")
    return {str(k): str(v) for k, v in raw.items()}


def _annotations(meta: Mapping[str, Any], what: str) -> dict[str, str]:
    out = _str_map(meta.get("annotations"), f"{what}: annotations")
    out.pop(_LAST_APPLIED, None)
    return out


def _int(raw: Any, what: str, default: int = 0) -> int:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise RecordError(f"{what}: expected an integer, got {raw!r}")
    try:
        return int(raw)
    except ValueError:
        raise RecordError(f"{what}: expected an integer, got {raw!r}") from None


def _resources(raw: Any, what: str) -> dict[str, int]:
    try:
        return parse_resource_list(raw)
    except ResourceError as e:
        raise RecordError(f"{what}: {e}") from None


def scaled_int_or_percent(value: int | str, total: int, *, round_up: bool) -> int:
    """An IntOrString such as a PDB's ``minAvailable`` (``3`` or ``"50%"``) against a
    total, rounded as the disruption controller does."""
    if isinstance(value, int):
        return value
    text = value.strip()
    if text.endswith("%"):
        try:
            pct = int(text[:-1])
        except ValueError:
            raise RecordError(f"{value!r}: expected an integer or a percentage") from None
        exact = pct * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    try:
        return int(text)
    except ValueError:
        raise RecordError(f"{value!r}: expected an integer or a percentage") from None


def _int_or_percent(raw: Any, what: str) -> int | str | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise RecordError(f"{what}: expected an integer or a percentage, got {raw!r}")
    if isinstance(raw, str):
        try:
            scaled_int_or_percent(raw, 100, round_up=True)
        except RecordError as e:
            raise RecordError(f"{what}: {e}") from None
    return raw


# --- PodDisruptionBudget ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PdbRecord:
    """A policy/v1 PodDisruptionBudget: its selector and its status as last computed.
    ``has_status``: the object carries a status at all (a budget the disruption
    controller has not processed yet has none)."""

    namespace: str
    name: str
    selector: LabelSelector
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0
    generation: int = 0
    observed_generation: int = 0
    unhealthy_pod_eviction_policy: str = "IfHealthyBudget"
    has_status: bool = True

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def current(self) -> bool:
        """The status reflects the latest spec (the API server refuses evictions until
        the disruption controller has processed a changed budget)."""
        return self.has_status and self.observed_generation >= self.generation


def pdb_from_json(obj: Mapping[str, Any]) -> PdbRecord:
    ns, name, meta = object_meta(obj, "PodDisruptionBudget")
    ns = ns or "default"
    what = f"PodDisruptionBudget {ns}/{name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    try:
        selector = LabelSelector.from_json(spec.get("selector"), f"{what}: spec.selector")
    except SelectorError as e:
        raise RecordError(str(e)) from None
    return PdbRecord(
        namespace=ns,
        name=name,
        selector=selector,
        min_available=_int_or_percent(spec.get("minAvailable"), f"{what}: spec.minAvailable"),
        max_unavailable=_int_or_percent(spec.get("maxUnavailable"), f"{what}: spec.maxUnavailable"),
        disruptions_allowed=_int(status.get("disruptionsAllowed"), f"{what}: status"),
        current_healthy=_int(status.get("currentHealthy"), f"{what}: status"),
        desired_healthy=_int(status.get("desiredHealthy"), f"{what}: status"),
        expected_pods=_int(status.get("expectedPods"), f"{what}: status"),
        generation=_int(meta.get("generation"), f"{what}: metadata.generation"),
        observed_generation=_int(status.get("observedGeneration"), f"{what}: status"),
        unhealthy_pod_eviction_policy=str(
            spec.get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        ),
        has_status=bool(status),
    )


# --- Namespace, PriorityClass -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NamespaceRecord:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    phase: str = "Active"

    @property
    def key(self) -> str:
        return self.name


def namespace_from_json(obj: Mapping[str, Any]) -> NamespaceRecord:
    _, name, meta = object_meta(obj, "Namespace")
    return NamespaceRecord(
        name=name,
        labels=_str_map(meta.get("labels"), f"namespace {name}: labels"),
        annotations=_annotations(meta, f"namespace {name}"),
        phase=str((obj.get("status") or {}).get("phase") or "Active"),
    )


@dataclass(frozen=True, slots=True)
class PriorityClassRecord:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"

    @property
    def key(self) -> str:
        return self.name


def priority_class_from_json(obj: Mapping[str, Any]) -> PriorityClassRecord:
    _, name, _ = object_meta(obj, "PriorityClass")
    return PriorityClassRecord(
        name=name,
        value=_int(obj.get("value"), f"PriorityClass {name}: value"),
        global_default=bool(obj.get("globalDefault")),
        preemption_policy=str(obj.get("preemptionPolicy") or "PreemptLowerPriority"),
    )


# --- PodGroup ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodGroupRecord:
    """A gang object of either backend: Volcano (``scheduling.volcano.sh``) or
    scheduler-plugins (``scheduling.x-k8s.io``). ``queue`` is Volcano's (empty otherwise),
    ``schedule_timeout_seconds`` scheduler-plugins' (0: unset); ``min_resources`` in
    engine units. ``timeout`` is the gang timeout the object names, in seconds, if any
    (``corral.dev/gang-timeout``, Volcano's ``volcano.sh/sla-waiting-time``, else
    ``scheduleTimeoutSeconds``); ``last_transition`` the latest of its conditions."""

    namespace: str
    name: str
    group: str
    min_member: int
    queue: str = ""
    priority_class: str = ""
    min_resources: Mapping[str, int] = field(default_factory=dict)
    schedule_timeout_seconds: int = 0
    phase: str = ""
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    uid: str = ""
    created: datetime | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    last_transition: datetime | None = None
    # The controller ownerReference (the workload the webhook made the gang for).
    owner_kind: str = ""
    owner_name: str = ""
    owner_group: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def api_group(self) -> str:
        return self.group

    @property
    def waiting(self) -> bool:
        """Phases in which the gang has not started: Volcano's Pending and Inqueue,
        scheduler-plugins' Pending, PreScheduling and Scheduling."""
        return self.phase in ("Pending", "Inqueue", "PreScheduling", "Scheduling", "")


def podgroup_from_json(obj: Mapping[str, Any], group: str | None = None) -> PodGroupRecord:
    """``group`` is the API group the object was read from (list items need not carry
    their apiVersion); by default the object's apiVersion says, else Volcano's."""
    ns, name, meta = object_meta(obj, "PodGroup")
    ns = ns or "default"
    what = f"PodGroup {ns}/{name}"
    group = group or str(obj.get("apiVersion") or "").split("/")[0] or VOLCANO_GROUP
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    min_member = _int(spec.get("minMember"), f"{what}: spec.minMember", 1)
    if min_member < 0:
        raise RecordError(f"{what}: spec.minMember must be >= 0, got {min_member}")
    annotations = _annotations(meta, what)
    raw_sts = spec.get("scheduleTimeoutSeconds")
    schedule_timeout = _int(raw_sts, f"{what}: spec.scheduleTimeoutSeconds")
    timeout: float | None = None
    for key in (ANNOTATION_GANG_TIMEOUT, VOLCANO_SLA_WAITING_TIME):
        if annotations.get(key):
            try:
                timeout = parse_duration(annotations[key], numbers=False)
            except TimeFormatError as e:
                raise RecordError(f"{what}: annotation {key}: {e}") from None
            break
    if timeout is None and raw_sts is not None:
        timeout = float(schedule_timeout)
    refs = meta.get("ownerReferences") or ()
    ref = next(
        (r for r in refs if isinstance(r, dict) and r.get("controller")),
        refs[0] if isinstance(refs, list) and refs and isinstance(refs[0], dict) else None,
    )
    owner = (
        (
            str(ref.get("kind") or ""),
            str(ref.get("name") or ""),
            str(ref.get("apiVersion") or "").rpartition("/")[0],
        )
        if ref
        else ("", "", "")
    )
    last: datetime | None = None
    for c in status.get("conditions") or ():
        t = timestamp(c.get("lastTransitionTime"), f"{what}: condition {c.get('type')}")
        if t is not None and (last is None or t > last):
            last = t
    return PodGroupRecord(
        namespace=ns,
        name=name,
        group=group,
        min_member=min_member,
        queue=str(spec.get("queue") or ""),
        priority_class=str(spec.get("priorityClassName") or ""),
        min_resources=_resources(spec.get("minResources"), f"{what}: spec.minResources"),
        schedule_timeout_seconds=schedule_timeout,
        phase=str(status.get("phase") or ""),
        running=_int(status.get("running"), f"{what}: status.running"),
        succeeded=_int(status.get("succeeded"), f"{what}: status.succeeded"),
        failed=_int(status.get("failed"), f"{what}: status.failed"),
        uid=str(meta.get("uid") or ""),
        created=timestamp(meta.get("creationTimestamp"), f"{what}: creationTimestamp"),
        labels=_str_map(meta.get("labels"), f"{what}: labels"),
        annotations=annotations,
        timeout=timeout,
        last_transition=last,
        owner_kind=owner[0],
        owner_name=owner[1],
        owner_group=owner[2],
    )


# --- Queue ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueRecord:
    """A Volcano Queue (cluster-scoped); ``capability`` and ``guarantee`` in engine units.
    A weight below 1 is read as 1."""

    name: str
    weight: int = 1
    capability: Mapping[str, int] = field(default_factory=dict)
    guarantee: Mapping[str, int] = field(default_factory=dict)
    reclaimable: bool = True
    state: str = "Open"
    parent: str = ""

    @property
    def key(self) -> str:
        return self.name

    def to_engine(self) -> Queue:
        return Queue(self.name, self.weight, dict(self.capability), self.reclaimable)


def queue_from_json(obj: Mapping[str, Any]) -> QueueRecord:
    _, name, _ = object_meta(obj, "Queue")
    what = f"Queue {name}"
    spec = obj.get("spec") or {}
    weight = _int(spec.get("weight") or None, f"{what}: spec.weight", 1)
    reclaimable = spec.get("reclaimable")
    if reclaimable is not None and not isinstance(reclaimable, bool):
        raise RecordError(f"{what}: spec.reclaimable must be true or false")
    return QueueRecord(
        name=name,
        weight=max(weight, 1),
        capability=_resources(spec.get("capability"), f"{what}: capability"),
        guarantee=_resources((spec.get("guarantee") or {}).get("resource"), f"{what}: guarantee"),
        reclaimable=True if reclaimable is None else reclaimable,
        state=str((obj.get("status") or {}).get("state") or "Open"),
        parent=str(spec.get("parent") or ""),
    )
