"""The native gang API's objects (KEP-4671), per served version: pure data in, data out.

Kubernetes schedules gangs itself from 1.35. What a pod names and which objects hold the
gang's policy differ by version (docs/backends.md, "kubernetes"; which version is used:
:mod:`gangplace.engine.native_versions`). Each shape follows kubernetes/api
``scheduling/<version>/types.go`` at the tag named and the released schema
(kubernetes-validate ``v1.3x.0-local-strict/workload-scheduling-<version>.json``,
``podgroup-...``, ``compositepodgroup-...``):

- ``scheduling.k8s.io/v1alpha1`` (1.35, v0.35.0): a ``Workload`` with
  ``spec.podGroups[{name, policy: {gang: {minCount}}}]`` and ``controllerRef``; a pod
  points at it by ``spec.workloadRef{name, podGroup, podGroupReplicaKey}``, the replica
  key splitting one group into independent gangs.
- ``v1alpha2`` (1.36, v0.36.0): the ``Workload`` is an immutable template
  (``spec.podGroupTemplates[{name, schedulingPolicy}]``, at most 8); each gang is a
  runtime ``PodGroup`` (``spec.podGroupTemplateRef.workload{workloadName,
  podGroupTemplateName}``, ``spec.schedulingPolicy``) that pods name in
  ``spec.schedulingGroup.podGroupName``, set at CREATE and immutable. Its
  ``disruptionMode`` is a string (``Pod`` | ``PodGroup``), kept only with the alpha gate
  WorkloadAwarePreemption on (dropped otherwise); corral writes ``PodGroup``.
- ``v1alpha3`` and ``v1beta1`` (1.37, v0.37.0-beta.0 and the released 1.37.0 schema;
  one shape): the ``PodGroup`` names its template by ``spec.workloadRef{workloadName,
  templateName}`` and has ``disruptionMode`` (``{single: {}}`` | ``{all: {}}``) and
  ``priorityClassName``; with ``CompositePodGroup`` served (``v1alpha3`` only) the Workload
  holds ``compositePodGroupTemplates[{name, schedulingPolicy: {gang: {minGroupCount}},
  podGroupTemplates}]`` and a ``CompositePodGroup`` ties PodGroups
  (``parentCompositePodGroupName``) into one all-or-nothing gang (at most 8 templates a
  level, 4 levels).

What the API server serves is found once by :mod:`webhook.served` and handed to
admission as :class:`Served`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gangplace.engine.native_versions import NATIVE_API_GROUP, NativeApi, native_api

from webhook.admission.keys import MANAGED_BY
from webhook.admission.validate import derived_name

__all__ = [
    "GROUP",
    "MAX_TEMPLATES",
    "TEMPLATE",
    "GangObject",
    "NativeApi",
    "Served",
    "composite_object",
    "composite_objects",
    "composite_template_name",
    "gang_objects",
    "pod_reference",
    "podgroup_object",
    "scheduler_names",
    "workload_object",
]

GROUP: Final = NATIVE_API_GROUP
# The name of the pod group (template) of a gang whose roles are one group: every role
# in it, so the gang starts all or nothing as corral's other backends start it.
TEMPLATE: Final = "gang"
# The template of a CompositePodGroup over a gang's roles (another name where a role
# has this one: names are unique in a Workload's whole tree, 1.37 validation.go).
COMPOSITE_TEMPLATE: Final = "all"
# The API's limit on pod group templates (of a Workload, or of one composite level).
MAX_TEMPLATES: Final = 8


@dataclass(frozen=True, slots=True)
class Served:
    """What the API server serves that admission writes for, found by discovery at the
    webhook's start (:mod:`webhook.served`): the ``scheduling.k8s.io`` versions serving
    ``workloads``, ``podgroups`` and ``compositepodgroups``, and the ``spec`` fields of
    Volcano's served PodGroup schema (empty: not installed, or not known)."""

    workload_versions: frozenset[str] = frozenset()
    podgroup_versions: frozenset[str] = frozenset()
    volcano_podgroup_fields: frozenset[str] = frozenset()
    composite_versions: frozenset[str] = frozenset()

    @property
    def native(self) -> NativeApi | None:
        """The gang API to write (None: the server serves none)."""
        return native_api(self.workload_versions, self.podgroup_versions, self.composite_versions)


def _meta(name: str, namespace: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": {MANAGED_BY[0]: MANAGED_BY[1]}}


def _gang_policy(min_count: int) -> dict[str, Any]:
    return {"gang": {"minCount": min_count}}


def _whole(api: NativeApi) -> Any:
    """A gang is disrupted whole or not at all (the descheduler reads it back): 1.36's
    string ``PodGroup`` (v0.36.0 v1alpha2 ``DisruptionModePodGroup``), 1.37's union
    ``{all: {}}``. On 1.36 the field needs the alpha gate WorkloadAwarePreemption; with it
    off the API server drops it without a word (``dropDisabledPodGroupFields``, 1.36
    ``pkg/registry/scheduling/podgroup/strategy.go``), so writing it is safe."""
    return "PodGroup" if api.version == "v1alpha2" else {"all": {}}


def _template(api: NativeApi, name: str, min_count: int) -> dict[str, Any]:
    """One pod group template, with the disruption mode its PodGroups copy."""
    return {
        "name": name,
        "schedulingPolicy": _gang_policy(min_count),
        "disruptionMode": _whole(api),
    }


def workload_object(
    api: NativeApi,
    name: str,
    namespace: str,
    templates: Sequence[tuple[str, int]],
    controller: Mapping[str, str] | None,
    *,
    composite: int | None = None,
) -> dict[str, Any]:
    """The gang's ``Workload``: ``templates`` (name, minCount); ``controller`` the
    workload it stands for (``apiGroup``, ``kind``, ``name``), None for a bare pod's
    gang; ``composite``: the templates under one composite template needing that many."""
    spec: dict[str, Any] = {}
    if controller is not None:
        spec["controllerRef"] = dict(controller)
    if not api.runtime_groups:
        spec["podGroups"] = [{"name": n, "policy": _gang_policy(c)} for n, c in templates]
    else:
        tmpls = [_template(api, n, c) for n, c in templates]
        top = composite_template_name([n for n, _ in templates])
        if composite is None:
            spec["podGroupTemplates"] = tmpls
        else:
            spec["compositePodGroupTemplates"] = [
                {
                    "name": top,
                    "schedulingPolicy": {"gang": {"minGroupCount": composite}},
                    "podGroupTemplates": tmpls,
                }
            ]
    return {
        "apiVersion": api.api_version,
        "kind": "Workload",
        "metadata": _meta(name, namespace),
        "spec": spec,
    }


def podgroup_object(
    api: NativeApi,
    name: str,
    workload: str,
    template: str,
    namespace: str,
    min_count: int,
    priority_class: str | None,
    *,
    parent: str | None = None,
) -> dict[str, Any]:
    """One runtime ``PodGroup`` (v1alpha2+): one gang (or one role of a composite one),
    made from the Workload's ``template``, disrupted whole. On 1.36 (v1alpha2) it
    carries no priority class: the field needs WorkloadAwarePreemption there, and the
    priority admission plugin then resolves it (v0.36.0 ``scheduling/v1alpha2/types.go``)."""
    assert api.runtime_groups
    spec: dict[str, Any] = {}
    if api.version == "v1alpha2":
        spec["podGroupTemplateRef"] = {
            "workload": {"workloadName": workload, "podGroupTemplateName": template}
        }
        spec["schedulingPolicy"] = _gang_policy(min_count)
        spec["disruptionMode"] = _whole(api)
    else:
        if parent is not None:
            spec["parentCompositePodGroupName"] = parent
        spec["workloadRef"] = {"workloadName": workload, "templateName": template}
        spec["schedulingPolicy"] = _gang_policy(min_count)
        spec["disruptionMode"] = _whole(api)
        if priority_class:
            spec["priorityClassName"] = priority_class
    return {
        "apiVersion": api.api_version,
        "kind": "PodGroup",
        "metadata": _meta(name, namespace),
        "spec": spec,
    }


def composite_template_name(roles: Sequence[str]) -> str:
    """The composite template's name: :data:`COMPOSITE_TEMPLATE`, or with a number added
    where a role already has it."""
    name, i = COMPOSITE_TEMPLATE, 1
    while name in roles:
        name, i = f"{COMPOSITE_TEMPLATE}-{i}", i + 1
    return name


def composite_object(
    api: NativeApi,
    name: str,
    workload: str,
    namespace: str,
    min_groups: int,
    priority_class: str | None,
    template: str = COMPOSITE_TEMPLATE,
) -> dict[str, Any]:
    """The ``CompositePodGroup`` (1.37, v1alpha3) tying a gang's role PodGroups together
    (v0.37.0-beta.0 ``scheduling/v1alpha3/types.go`` ``CompositePodGroupSpec``: workloadRef
    and schedulingPolicy required, every field immutable)."""
    spec: dict[str, Any] = {
        "workloadRef": {"workloadName": workload, "templateName": template},
        "schedulingPolicy": {"gang": {"minGroupCount": min_groups}},
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": api.composite_api_version,
        "kind": "CompositePodGroup",
        "metadata": _meta(name, namespace),
        "spec": spec,
    }


def pod_reference(
    api: NativeApi, group: str, workload: str, template: str, instance: str | None
) -> tuple[str, dict[str, Any]]:
    """The pod ``spec`` field naming its gang and its value: ``schedulingGroup`` (the
    runtime PodGroup ``group``), else ``workloadRef`` (the Workload's ``template``, the
    replica key ``instance`` for a workload with one gang per instance)."""
    if api.runtime_groups:
        return "schedulingGroup", {"podGroupName": group}
    ref: dict[str, Any] = {"name": workload, "podGroup": template}
    if instance is not None:
        ref["podGroupReplicaKey"] = instance
    return "workloadRef", ref


def scheduler_names(specs: Sequence[Any]) -> set[str]:
    """The schedulerNames a gang's pod templates ask for ("" where none is set)."""
    out: set[str] = set()
    for s in specs:
        name = s.get("schedulerName") if isinstance(s, dict) else None
        out.add(name if isinstance(name, str) and name != "default-scheduler" else "")
    return out


# A gang object to make: (apiVersion, plural, name, body).
GangObject = tuple[str, str, str, dict[str, Any]]


def gang_objects(
    api: NativeApi,
    name: str,
    min_member: int,
    namespace: str,
    ctrl: Mapping[str, str] | None,
    instances: int | None,
    priority_class: str | None,
) -> list[GangObject]:
    """The Workload and, where served, one runtime PodGroup per gang (per instance, for
    a kind with one gang per instance)."""
    body = workload_object(api, name, namespace, [(TEMPLATE, min_member)], ctrl)
    out: list[GangObject] = [(api.api_version, "workloads", name, body)]
    if not api.runtime_groups:
        return out
    names = [name] if instances is None else [derived_name(name, str(i)) for i in range(instances)]
    for n in names:
        body = podgroup_object(api, n, name, TEMPLATE, namespace, min_member, priority_class)
        out.append((api.api_version, "podgroups", n, body))
    return out


def composite_objects(
    api: NativeApi,
    name: str,
    namespace: str,
    ctrl: Mapping[str, str] | None,
    priority_class: str | None,
    roles: Sequence[tuple[str, int]],
) -> list[GangObject]:
    """One PodGroup per role (its share of the gang's minimum) under one
    CompositePodGroup that needs every role: all or nothing across roles. ``roles``:
    each role's name and how many of it the gang needs."""
    templates = [(derived_name(r), max(n, 1)) for r, n in roles]
    body = workload_object(api, name, namespace, templates, ctrl, composite=len(templates))
    top = composite_object(
        api,
        name,
        name,
        namespace,
        len(templates),
        priority_class,
        composite_template_name([t for t, _ in templates]),
    )
    out: list[GangObject] = [
        (api.api_version, "workloads", name, body),
        (api.composite_api_version, "compositepodgroups", name, top),
    ]
    for t, n in templates:
        pg = derived_name(name, t)
        body = podgroup_object(api, pg, name, t, namespace, n, priority_class, parent=name)
        out.append((api.api_version, "podgroups", pg, body))
    return out
