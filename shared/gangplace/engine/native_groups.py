"""Gangs of Kubernetes' own gang API (KEP-4671, ``scheduling.k8s.io``), as the
descheduler reads them: which group a pod refers to, and each group's minCount and
disruption mode.

Read from kubernetes ``staging/src/k8s.io/api``:

- 1.35, ``scheduling/v1alpha1/types.go`` and ``core/v1/types.go``: a ``Workload`` holds
  ``spec.podGroups[{name, policy: {basic: {}} | {gang: {minCount}}}]``; a pod names its
  group by ``spec.workloadRef{name, podGroup, podGroupReplicaKey}``, each replica key an
  independent gang of that group's policy.
- 1.36, ``scheduling/v1alpha2/types.go`` (v0.36.0): the ``Workload`` is a template; each
  gang is a runtime ``PodGroup`` (``spec.schedulingPolicy`` copied from its template)
  that pods name in ``spec.schedulingGroup.podGroupName``. With the alpha gate
  WorkloadAwarePreemption its ``spec.disruptionMode`` is a string: ``Pod`` (members may
  be disrupted one by one, the default) or ``PodGroup`` (only all together).
- 1.37, ``scheduling/v1alpha3/types.go`` (v0.37.0-beta.0) and ``v1beta1`` (the released
  1.37.0 schema, the same shape): the ``PodGroup`` names its Workload by
  ``spec.workloadRef`` and has ``spec.disruptionMode`` ``{single: {}}`` (the default) or
  ``{all: {}}``, ``priorityClassName`` and ``priority``.

Which group a pod names is read with the pod
(:func:`~gangplace.engine.node_pod_records.native_reference`). A group with the
``basic`` policy is no gang: its pods are lone pods to the planner. The PodGroups under
one CompositePodGroup (1.37, ``v1alpha3``; ``spec.parentCompositePodGroupName``) are one
gang, moved whole; the CompositePodGroup object itself is not read (its
``minGroupCount`` is taken as all of its groups).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from gangplace.engine.objects import RecordError
from gangplace.engine.timeparse import TimeFormatError, parse_time

__all__ = [
    "DISRUPTION_ALL",
    "DISRUPTION_SINGLE",
    "NATIVE_API_GROUP",
    "NativeGroupRecord",
    "is_native",
    "native_groups_from_json",
]

NATIVE_API_GROUP: Final = "scheduling.k8s.io"
DISRUPTION_ALL: Final = "all"
DISRUPTION_SINGLE: Final = "single"
_KINDS: Final = frozenset({"Workload", "PodGroup"})

Json = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class NativeGroupRecord:
    """One native group. ``name`` is what its pods' references resolve to (the
    PodGroup's name; on 1.35 ``<workload>-<podGroup>``). ``min_count`` is the gang
    policy's, None for the basic policy (no gang)."""

    namespace: str
    name: str
    min_count: int | None
    disruption: str = DISRUPTION_SINGLE
    workload: str = ""
    priority_class: str = ""
    priority: int | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    created: datetime | None = None
    # The CompositePodGroup it is under (1.37, ``spec.parentCompositePodGroupName``).
    parent: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def whole(self) -> bool:
        """Disrupted only all together: moved whole or not at all."""
        return self.disruption == DISRUPTION_ALL


def is_native(obj: Json) -> bool:
    """A Workload or PodGroup of the native gang API (not Kueue's Workload, not
    Volcano's or scheduler-plugins' PodGroup)."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    return group == NATIVE_API_GROUP and obj.get("kind") in _KINDS


def _policy(what: str, field_name: str, policy: Any) -> int | None:
    """minCount of a ``{gang: {minCount}}`` policy, None for ``{basic: {}}``."""
    if not isinstance(policy, Mapping):
        raise RecordError(f"{what}: {field_name}: expected an object with basic or gang")
    gang = policy.get("gang")
    if gang is None:
        if policy.get("basic") is None:
            raise RecordError(f"{what}: {field_name}: expected one of basic, gang")
        return None
    count = gang.get("minCount") if isinstance(gang, Mapping) else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise RecordError(
            f"{what}: {field_name}.gang.minCount={count!r}: expected an integer of 1 or more"
        )
    return count


# 1.36's string modes (v1alpha2 ``DisruptionMode``: ``DisruptionModePod``,
# ``DisruptionModePodGroup``) as 1.37's union members.
_STRING_MODES: Final = {"Pod": DISRUPTION_SINGLE, "PodGroup": DISRUPTION_ALL}


def _disruption(what: str, mode: Any) -> str:
    if mode is None:
        return DISRUPTION_SINGLE  # the API's default (Pod in 1.36, single in 1.37)
    if isinstance(mode, str) and mode in _STRING_MODES:
        return _STRING_MODES[mode]
    if isinstance(mode, Mapping):
        if mode.get(DISRUPTION_ALL) is not None:
            return DISRUPTION_ALL
        if mode.get(DISRUPTION_SINGLE) is not None:
            return DISRUPTION_SINGLE
    raise RecordError(
        f"{what}: spec.disruptionMode={mode!r}: expected Pod or PodGroup (1.36), "
        "or {single: {}} or {all: {}} (1.37)"
    )


def _created(what: str, meta: Json) -> datetime | None:
    raw = meta.get("creationTimestamp")
    try:
        return parse_time(str(raw)) if raw else None
    except TimeFormatError:
        raise RecordError(f"{what}: metadata.creationTimestamp={raw!r}: not a timestamp") from None


def native_groups_from_json(obj: Json) -> list[NativeGroupRecord]:
    """The groups one native object declares: a 1.35 Workload's pod groups, or one
    PodGroup (a Workload of 1.36+ is a template: its PodGroups are the groups). Raises
    RecordError naming the object and the field that cannot be read."""
    meta = obj.get("metadata") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    kind = str(obj.get("kind") or "")
    what = f"{kind} {ns}/{name}"
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise RecordError(f"{what}: spec: expected an object")
    ann = meta.get("annotations") or {}
    annotations = {str(k): str(v) for k, v in ann.items()} if isinstance(ann, Mapping) else {}
    created = _created(what, meta)
    if kind == "Workload":
        groups = spec.get("podGroups")
        if groups is None:
            return []  # v1alpha2+: templates only
        if not isinstance(groups, list):
            raise RecordError(f"{what}: spec.podGroups: expected a list")
        out = []
        for i, g in enumerate(groups):
            if not isinstance(g, Mapping) or not g.get("name"):
                raise RecordError(f"{what}: spec.podGroups[{i}].name: required")
            count = _policy(what, f"spec.podGroups[{i}].policy", g.get("policy"))
            out.append(
                NativeGroupRecord(
                    ns,
                    f"{name}-{g['name']}",
                    count,
                    workload=name,
                    annotations=annotations,
                    created=created,
                )
            )
        return out
    if kind != "PodGroup":
        raise RecordError(f"{what}: not a Workload or PodGroup of {NATIVE_API_GROUP}")
    ref = spec.get("workloadRef") or {}  # v1beta1
    tref = (spec.get("podGroupTemplateRef") or {}).get("workload") or {}  # v1alpha2
    workload = str(ref.get("workloadName") or tref.get("workloadName") or "")
    priority = spec.get("priority")
    return [
        NativeGroupRecord(
            ns,
            name,
            _policy(what, "spec.schedulingPolicy", spec.get("schedulingPolicy")),
            _disruption(what, spec.get("disruptionMode")),
            workload=workload,
            priority_class=str(spec.get("priorityClassName") or ""),
            priority=priority if isinstance(priority, int) else None,
            annotations=annotations,
            created=created,
            parent=str(spec.get("parentCompositePodGroupName") or ""),
        )
    ]
