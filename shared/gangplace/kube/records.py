"""Compact records of the objects beside nodes and pods that corral watches.

Nodes and pods use the engine's own records (:class:`~gangplace.engine.NodeRecord`,
:class:`~gangplace.engine.PodRecord`). The rest -- disruption budgets, namespaces,
priority classes, PodGroups and queues -- are kept here as small frozen records with only
the fields the webhook and the descheduler read, parsed once when the informer sees them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine import Queue
from ..engine.resources import ResourceError, parse_resource_list
from .resources import VOLCANO_PODGROUPS
from .selectors import LabelSelector, SelectorError

__all__ = [
    "NamespaceRecord",
    "PdbRecord",
    "PodGroupRecord",
    "PriorityClassRecord",
    "QueueRecord",
    "RecordError",
    "namespace_from_json",
    "pdb_from_json",
    "podgroup_from_json",
    "priority_class_from_json",
    "queue_from_json",
    "scaled_int_or_percent",
]


class RecordError(ValueError):
    """An object whose fields cannot be read; the message names the object and field."""


def _meta(obj: Mapping[str, Any], what: str) -> tuple[str, str, Mapping[str, Any]]:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise RecordError(f"{what} without metadata.name")
    return str(meta.get("namespace") or ""), name, meta


def _str_map(raw: Any, what: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise RecordError(f"{what}: expected a map of strings")
    return {str(k): str(v) for k, v in raw.items()}


def _int(raw: Any, what: str, default: int = 0) -> int:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise RecordError(f"{what}: expected an integer, got {raw!r}")
    try:
        return int(raw)
    except ValueError:
        raise RecordError(f"{what}: expected an integer, got {raw!r}") from None


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


@dataclass(frozen=True, slots=True)
class PdbRecord:
    """A policy/v1 PodDisruptionBudget: its selector and its status as last computed."""

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

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def status_current(self) -> bool:
        """The status reflects the latest spec (the API server refuses evictions until
        the disruption controller has processed a changed budget)."""
        return self.observed_generation >= self.generation


def pdb_from_json(obj: Mapping[str, Any]) -> PdbRecord:
    ns, name, meta = _meta(obj, "PodDisruptionBudget")
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
    )


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
    _, name, meta = _meta(obj, "Namespace")
    annotations = _str_map(meta.get("annotations"), f"namespace {name}: annotations")
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return NamespaceRecord(
        name=name,
        labels=_str_map(meta.get("labels"), f"namespace {name}: labels"),
        annotations=annotations,
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
    _, name, _ = _meta(obj, "PriorityClass")
    return PriorityClassRecord(
        name=name,
        value=_int(obj.get("value"), f"PriorityClass {name}: value"),
        global_default=bool(obj.get("globalDefault")),
        preemption_policy=str(obj.get("preemptionPolicy") or "PreemptLowerPriority"),
    )


@dataclass(frozen=True, slots=True)
class PodGroupRecord:
    """A gang object of either backend: Volcano (``scheduling.volcano.sh``) or
    scheduler-plugins (``scheduling.x-k8s.io``). ``queue`` is Volcano's (empty otherwise),
    ``schedule_timeout_seconds`` scheduler-plugins' (0: unset); resources in engine units."""

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
    created: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def podgroup_from_json(
    obj: Mapping[str, Any], group: str = VOLCANO_PODGROUPS.group
) -> PodGroupRecord:
    """``group`` is the API group the object was read from (list items need not carry
    their apiVersion)."""
    ns, name, meta = _meta(obj, "PodGroup")
    what = f"PodGroup {ns}/{name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    try:
        min_resources = parse_resource_list(spec.get("minResources"))
    except ResourceError as e:
        raise RecordError(f"{what}: spec.minResources: {e}") from None
    annotations = _str_map(meta.get("annotations"), f"{what}: annotations")
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return PodGroupRecord(
        namespace=ns,
        name=name,
        group=group,
        min_member=_int(spec.get("minMember"), f"{what}: spec.minMember", 1),
        queue=str(spec.get("queue") or ""),
        priority_class=str(spec.get("priorityClassName") or ""),
        min_resources=min_resources,
        schedule_timeout_seconds=_int(
            spec.get("scheduleTimeoutSeconds"), f"{what}: spec.scheduleTimeoutSeconds"
        ),
        phase=str(status.get("phase") or ""),
        running=_int(status.get("running"), f"{what}: status.running"),
        succeeded=_int(status.get("succeeded"), f"{what}: status.succeeded"),
        failed=_int(status.get("failed"), f"{what}: status.failed"),
        uid=str(meta.get("uid") or ""),
        created=str(meta.get("creationTimestamp") or ""),
        labels=_str_map(meta.get("labels"), f"{what}: labels"),
        annotations=annotations,
    )


@dataclass(frozen=True, slots=True)
class QueueRecord:
    """A Volcano Queue; ``capability`` and ``guarantee`` in engine units."""

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
    _, name, _ = _meta(obj, "Queue")
    what = f"Queue {name}"
    spec = obj.get("spec") or {}
    try:
        capability = parse_resource_list(spec.get("capability"))
        guarantee = parse_resource_list((spec.get("guarantee") or {}).get("resource"))
    except ResourceError as e:
        raise RecordError(f"{what}: {e}") from None
    weight = _int(spec.get("weight"), f"{what}: spec.weight", 1)
    if weight < 1:
        raise RecordError(f"{what}: spec.weight must be >= 1, got {weight}")
    reclaimable = spec.get("reclaimable")
    return QueueRecord(
        name=name,
        weight=weight,
        capability=capability,
        guarantee=guarantee,
        reclaimable=True if reclaimable is None else bool(reclaimable),
        state=str((obj.get("status") or {}).get("state") or "Open"),
        parent=str(spec.get("parent") or ""),
    )
