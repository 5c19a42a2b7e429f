"""The native gang API (KEP-4671) as each release serves it: what a Workload, PodGroup
and CompositePodGroup of ``scheduling.k8s.io`` must hold, what may not change, and the
pod's reference to its group (``spec.workloadRef`` in 1.35, ``spec.schedulingGroup`` from
1.36).

Written from kubernetes ``staging/src/k8s.io/api/scheduling/`` and the declarative
validation tags in them (``+k8s:required``, ``+k8s:maxItems``, ``+k8s:immutable``,
``+k8s:update=NoAddItem``...), with ``pkg/apis/scheduling/validation/validation.go``:

- 1.35, ``v1alpha1`` (KEP-4671 "API", the docs page "workload-reference"): ``Workload``
  ``spec.podGroups[{name, policy: {basic: {}} | {gang: {minCount}}}]`` (at most 8, names
  unique DNS labels, immutable) and an optional immutable ``spec.controllerRef{apiGroup,
  kind, name}``; pods name it by ``spec.workloadRef{name, podGroup, podGroupReplicaKey}``.
- 1.36, ``v1alpha2`` (``v1alpha2/types.go``): ``Workload`` ``spec.podGroupTemplates[{name,
  schedulingPolicy, schedulingConstraints}]`` (at most 8, the whole spec immutable) and a
  runtime ``PodGroup`` ``spec{podGroupTemplateRef{workload{workloadName,
  podGroupTemplateName}}, schedulingPolicy, schedulingConstraints{topologyConstraints[
  {topologyKey}]}}``, immutable, status conditions ``PodGroupScheduled``; pods name it by
  ``spec.schedulingGroup.podGroupName``.
- 1.37, ``v1beta1`` (the shape of ``v1alpha3/types.go``): templates may not be added or
  removed and ``gang.minCount`` may change (nothing else); exactly one of
  ``podGroupTemplates`` and ``compositePodGroupTemplates`` (the latter forbidden unless
  CompositePodGroup is on), each level at most 8 templates, a tree at most 4 deep;
  ``PodGroup`` ``spec{parentCompositePodGroupName, workloadRef{workloadName,
  templateName}, schedulingPolicy, schedulingConstraints{topology[{key}]}, disruptionMode
  {single: {}} | {all: {}}, priorityClassName, priority}``; ``CompositePodGroup``
  ``spec{parentCompositePodGroupName, workloadRef, schedulingPolicy{basic | gang
  {minGroupCount}}, priorityClassName, priority}``.

A pod's group reference is accepted only where the release serves it with the gate on:
before its release the field is unknown (dropped with a warning, refused under Strict:
:mod:`.fields`); with the gate off it is dropped silently, as ``dropDisabledPodFields``
does (``pkg/api/pod/util.go``). Once set it may not change (``ValidatePodUpdate``:
``field is immutable``).

Left out: the scheduler's own checks of a group (one schedulerName for all its pods is
checked by the scheduler model, :mod:`tests.controllers.native_gang_scheduler`),
resourceClaims and preemptionPolicy (gates DRAWorkloadResourceClaims,
PodGroupPreemptionPolicy), and the Workload's unknown spec fields (not dropped here).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.kubeapi.gates import enabled
from tests.kubeapi.resources import NATIVE_GROUP, ResourceType
from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.versions import Release, Versions

Json = dict[str, Any]

__all__ = [
    "MAX_DEPTH",
    "MAX_TEMPLATES",
    "check_native",
    "check_pod_group_ref",
    "gate_on",
    "native_version",
    "pod_group_field",
]

MAX_TEMPLATES = 8  # WorkloadMaxPodGroupTemplates
MAX_DEPTH = 4  # WorkloadMaxTreeDepth (v1alpha3, 1.37)
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def gate_on(gate: str, versions: Versions) -> bool:
    """A gate as the cluster runs it: its release default, or on where the stack was
    started with the native gang API switched on (``Versions.native_gangs``)."""
    if versions.native_gangs and gate in (
        "GenericWorkload",
        "GangScheduling",
        "CompositePodGroup",
        "WorkloadWithJob",
    ):
        return enabled(gate, versions.kube) or _exists(gate, versions.kube)
    return enabled(gate, versions.kube)


def _exists(gate: str, kube: Release) -> bool:
    first = {"CompositePodGroup": Release(1, 37), "WorkloadWithJob": Release(1, 36)}
    return kube >= first.get(gate, Release(1, 35))


def native_version(versions: Versions) -> str | None:
    """The ``scheduling.k8s.io`` version of Workload and PodGroup this stack serves
    (None: no native gang API)."""
    if not gate_on("GenericWorkload", versions):
        return None
    if versions.kube >= Release(1, 37):
        return "v1beta1"
    if versions.kube >= Release(1, 36):
        return "v1alpha2"
    return "v1alpha1"


def pod_group_field(kube: Release) -> str | None:
    """The pod spec field naming a pod's group at ``kube`` (None: none yet)."""
    if kube >= Release(1, 36):
        return "schedulingGroup"
    if kube >= Release(1, 35):
        return "workloadRef"
    return None


# --- errors ---------------------------------------------------------------------------

Errors = list[tuple[str, str, str]]  # (field, reason, message)


def _raise(rt: ResourceType, name: str, errors: Errors) -> None:
    if not errors:
        return
    message = "; ".join(f"{f}: {m}" for f, _, m in errors)
    if len(errors) > 1:
        message = f"[{', '.join(f'{f}: {m}' for f, _, m in errors)}]"
    qualified = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    raise ApiStatusError(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {message}',
        {
            "name": name,
            "group": rt.group,
            "kind": rt.kind,
            "causes": [{"reason": r, "message": m, "field": f} for f, r, m in errors],
        },
    )


def _required(errors: Errors, field: str) -> None:
    errors.append((field, "FieldValueRequired", "Required value"))


def _invalid(errors: Errors, field: str, value: Any, why: str) -> None:
    shown = f'"{value}"' if isinstance(value, str) else str(value).replace("None", "null")
    errors.append((field, "FieldValueInvalid", f"Invalid value: {shown}: {why}"))


def _immutable(errors: Errors, field: str) -> None:
    errors.append((field, "FieldValueInvalid", "Invalid value: field is immutable"))


def _forbidden(errors: Errors, field: str, why: str) -> None:
    errors.append((field, "FieldValueForbidden", f"Forbidden: {why}"))


def _name(errors: Errors, field: str, value: Any, pattern: re.Pattern[str], size: int) -> None:
    if value is None or value == "":
        _required(errors, field)
    elif not isinstance(value, str) or len(value) > size or not pattern.match(value):
        kind = "RFC 1123 label" if pattern is _LABEL else "lowercase RFC 1123 subdomain"
        _invalid(
            errors,
            field,
            value,
            f"a {kind} must consist of lower case alphanumeric characters or '-', and must "
            "start and end with an alphanumeric character",
        )


def _label(errors: Errors, field: str, value: Any) -> None:
    _name(errors, field, value, _LABEL, 63)


def _subdomain(errors: Errors, field: str, value: Any) -> None:
    _name(errors, field, value, _SUBDOMAIN, 253)


def _dict(x: Any) -> Json:
    return x if isinstance(x, dict) else {}


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


# --- shared pieces ----------------------------------------------------------------------


def _policy(errors: Errors, field: str, policy: Any, count_key: str = "minCount") -> None:
    """A union of ``basic`` and ``gang``: exactly one; gang's count at least 1."""
    if not isinstance(policy, dict) or not policy:
        _required(errors, field)
        return
    members = [k for k in ("basic", "gang") if policy.get(k) is not None]
    if len(members) != 1:
        _invalid(errors, field, "{...}", "must specify exactly one of: `basic`, `gang`")
        return
    if members[0] == "gang":
        n = _dict(policy["gang"]).get(count_key)
        if n is None:
            _required(errors, f"{field}.gang.{count_key}")
        elif not isinstance(n, int) or isinstance(n, bool) or n < 1:
            _invalid(errors, f"{field}.gang.{count_key}", n, "must be greater than or equal to 1")


def _controller_ref(errors: Errors, ref: Any) -> None:
    if ref is None:
        return
    ref = _dict(ref)
    if not ref.get("kind"):
        _required(errors, "spec.controllerRef.kind")
    if not ref.get("name"):
        _required(errors, "spec.controllerRef.name")


def _templates(
    errors: Errors, field: str, templates: Any, check: Callable[[Errors, str, Json], None]
) -> None:
    items = _list(templates)
    if len(items) > MAX_TEMPLATES:
        errors.append(
            (
                field,
                "FieldValueTooMany",
                f"Too many: {len(items)}: must have at most {MAX_TEMPLATES} items",
            )
        )
    seen: set[str] = set()
    for i, t in enumerate(items):
        t = _dict(t)
        _label(errors, f"{field}[{i}].name", t.get("name"))
        name = t.get("name")
        if isinstance(name, str) and name in seen:
            errors.append((f"{field}[{i}]", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        if isinstance(name, str):
            seen.add(name)
        check(errors, f"{field}[{i}]", t)


def _topology(errors: Errors, field: str, constraints: Any, list_key: str, key: str) -> None:
    if constraints is None:
        return
    items = _list(_dict(constraints).get(list_key))
    if len(items) > 1:
        errors.append(
            (
                f"{field}.{list_key}",
                "FieldValueTooMany",
                f"Too many: {len(items)}: must have at most 1 items",
            )
        )
    for i, c in enumerate(items):
        if not _dict(c).get(key):
            _required(errors, f"{field}.{list_key}[{i}].{key}")


def _names(templates: Any) -> list[str]:
    return [str(_dict(t).get("name")) for t in _list(templates)]


def _kind_of_policy(policy: Any) -> str | None:
    p = _dict(policy)
    return "gang" if p.get("gang") is not None else "basic" if p.get("basic") is not None else None


# --- Workload -------------------------------------------------------------------------


def _workload_v1alpha1(errors: Errors, obj: Json, old: Json | None) -> None:
    spec = _dict(obj.get("spec"))
    _controller_ref(errors, spec.get("controllerRef"))
    groups = spec.get("podGroups")
    if not _list(groups):
        _required(errors, "spec.podGroups")

    def group(errs: Errors, field: str, g: Json) -> None:
        _policy(errs, f"{field}.policy", g.get("policy"))

    _templates(errors, "spec.podGroups", groups, group)
    if old is not None:
        old_spec = _dict(old.get("spec"))
        if spec.get("podGroups") != old_spec.get("podGroups"):
            _immutable(errors, "spec.podGroups")
        if spec.get("controllerRef") != old_spec.get("controllerRef"):
            _immutable(errors, "spec.controllerRef")


def _pod_group_template_v1alpha2(errors: Errors, field: str, t: Json) -> None:
    _policy(errors, f"{field}.schedulingPolicy", t.get("schedulingPolicy"))
    _topology(
        errors,
        f"{field}.schedulingConstraints",
        t.get("schedulingConstraints"),
        "topologyConstraints",
        "topologyKey",
    )


def _workload_v1alpha2(errors: Errors, obj: Json, old: Json | None) -> None:
    spec = _dict(obj.get("spec"))
    _controller_ref(errors, spec.get("controllerRef"))
    if not _list(spec.get("podGroupTemplates")):
        _required(errors, "spec.podGroupTemplates")
    _templates(
        errors,
        "spec.podGroupTemplates",
        spec.get("podGroupTemplates"),
        _pod_group_template_v1alpha2,
    )
    if old is not None:
        old_spec = _dict(old.get("spec"))
        for k in ("podGroupTemplates", "controllerRef"):
            if spec.get(k) != old_spec.get(k):
                _immutable(errors, f"spec.{k}")


def _disruption_mode(errors: Errors, field: str, mode: Any) -> None:
    if mode is None:
        return
    m = _dict(mode)
    if sum(1 for k in ("single", "all") if m.get(k) is not None) != 1:
        _invalid(errors, field, "{...}", "must specify exactly one of: `single`, `all`")


def _pod_group_template_v1beta1(errors: Errors, field: str, t: Json) -> None:
    _policy(errors, f"{field}.schedulingPolicy", t.get("schedulingPolicy"))
    _topology(
        errors, f"{field}.schedulingConstraints", t.get("schedulingConstraints"), "topology", "key"
    )
    _disruption_mode(errors, f"{field}.disruptionMode", t.get("disruptionMode"))


def _composite_template(errors: Errors, field: str, t: Json, depth: int) -> None:
    _policy(errors, f"{field}.schedulingPolicy", t.get("schedulingPolicy"), "minGroupCount")
    if depth > MAX_DEPTH:
        _invalid(errors, field, "{...}", f"must not be nested deeper than {MAX_DEPTH} levels")
        return
    pods, composites = t.get("podGroupTemplates"), t.get("compositePodGroupTemplates")
    if not _list(pods) and not _list(composites):
        _required(errors, f"{field}.podGroupTemplates")
    _templates(errors, f"{field}.podGroupTemplates", pods, _pod_group_template_v1beta1)
    _templates(
        errors,
        f"{field}.compositePodGroupTemplates",
        composites,
        lambda e, f, c: _composite_template(e, f, c, depth + 1),
    )


def _tree_update(errors: Errors, field: str, new: Json, old: Json) -> None:
    """NoAddItem/NoRemoveItem on every template list; the policy's kind, constraints and
    disruption mode fixed; only ``gang.minCount`` (``minGroupCount``) may change."""
    for key in ("podGroupTemplates", "compositePodGroupTemplates"):
        if _names(new.get(key)) != _names(old.get(key)) and (
            sorted(_names(new.get(key))) != sorted(_names(old.get(key)))
        ):
            _forbidden(errors, f"{field}.{key}", "items may not be added or removed")
            continue
        old_by = {str(_dict(t).get("name")): _dict(t) for t in _list(old.get(key))}
        for i, t in enumerate(_list(new.get(key))):
            t = _dict(t)
            before = old_by.get(str(t.get("name")), {})
            here = f"{field}.{key}[{i}]"
            if _kind_of_policy(t.get("schedulingPolicy")) != _kind_of_policy(
                before.get("schedulingPolicy")
            ):
                _forbidden(errors, f"{here}.schedulingPolicy", "the policy may not be set or unset")
            for k in ("schedulingConstraints", "disruptionMode", "priorityClassName", "priority"):
                if t.get(k) != before.get(k):
                    _immutable(errors, f"{here}.{k}")
            if key == "compositePodGroupTemplates":
                _tree_update(errors, here, t, before)


def _workload_v1beta1(errors: Errors, obj: Json, old: Json | None, composite: bool) -> None:
    spec = _dict(obj.get("spec"))
    _controller_ref(errors, spec.get("controllerRef"))
    pods, composites = spec.get("podGroupTemplates"), spec.get("compositePodGroupTemplates")
    if composites is not None and not composite:
        _forbidden(
            errors, "spec.compositePodGroupTemplates", "disabled by feature gate CompositePodGroup"
        )
        composites = None
    if bool(_list(pods)) == bool(_list(composites)):
        _invalid(
            errors,
            "spec",
            "{...}",
            "must specify exactly one of: `podGroupTemplates`, `compositePodGroupTemplates`",
        )
    _templates(errors, "spec.podGroupTemplates", pods, _pod_group_template_v1beta1)
    _templates(
        errors,
        "spec.compositePodGroupTemplates",
        composites,
        lambda e, f, c: _composite_template(e, f, c, 2),
    )
    if old is not None:
        old_spec = _dict(old.get("spec"))
        if spec.get("controllerRef") != old_spec.get("controllerRef"):
            _immutable(errors, "spec.controllerRef")
        _tree_update(errors, "spec", spec, old_spec)


# --- PodGroup and CompositePodGroup ---------------------------------------------------------


def _pod_group_v1alpha2(errors: Errors, obj: Json, old: Json | None) -> None:
    spec = _dict(obj.get("spec"))
    ref = spec.get("podGroupTemplateRef")
    if ref is not None:
        workload = _dict(_dict(ref).get("workload"))
        if not workload:
            _invalid(
                errors,
                "spec.podGroupTemplateRef",
                "{...}",
                "must specify exactly one of: `workload`",
            )
        else:
            _label(
                errors,
                "spec.podGroupTemplateRef.workload.workloadName",
                workload.get("workloadName"),
            )
            _label(
                errors,
                "spec.podGroupTemplateRef.workload.podGroupTemplateName",
                workload.get("podGroupTemplateName"),
            )
    _policy(errors, "spec.schedulingPolicy", spec.get("schedulingPolicy"))
    _topology(
        errors,
        "spec.schedulingConstraints",
        spec.get("schedulingConstraints"),
        "topologyConstraints",
        "topologyKey",
    )
    if old is not None:
        old_spec = _dict(old.get("spec"))
        for k in ("podGroupTemplateRef", "schedulingPolicy", "schedulingConstraints"):
            if spec.get(k) != old_spec.get(k):
                _immutable(errors, f"spec.{k}")


def _workload_ref(errors: Errors, spec: Json, required: bool) -> None:
    ref = spec.get("workloadRef")
    if ref is None:
        if required:
            _required(errors, "spec.workloadRef")
        return
    ref = _dict(ref)
    _subdomain(errors, "spec.workloadRef.workloadName", ref.get("workloadName"))
    _label(errors, "spec.workloadRef.templateName", ref.get("templateName"))


def _parent(errors: Errors, spec: Json, composite: bool, needs_ref: bool) -> None:
    parent = spec.get("parentCompositePodGroupName")
    if parent is None:
        return
    if not composite:
        _forbidden(
            errors, "spec.parentCompositePodGroupName", "disabled by feature gate CompositePodGroup"
        )
        return
    _subdomain(errors, "spec.parentCompositePodGroupName", parent)
    if needs_ref and spec.get("workloadRef") is None:
        _required(errors, "spec.workloadRef")


def _pod_group_v1beta1(errors: Errors, obj: Json, old: Json | None, composite: bool) -> None:
    spec = _dict(obj.get("spec"))
    _parent(errors, spec, composite, needs_ref=True)
    _workload_ref(errors, spec, required=False)
    _policy(errors, "spec.schedulingPolicy", spec.get("schedulingPolicy"))
    _topology(
        errors, "spec.schedulingConstraints", spec.get("schedulingConstraints"), "topology", "key"
    )
    _disruption_mode(errors, "spec.disruptionMode", spec.get("disruptionMode"))
    if old is not None:
        old_spec = _dict(old.get("spec"))
        for k in (
            "parentCompositePodGroupName",
            "workloadRef",
            "schedulingConstraints",
            "disruptionMode",
            "priorityClassName",
            "priority",
        ):
            if spec.get(k) != old_spec.get(k):
                _immutable(errors, f"spec.{k}")
        if _kind_of_policy(spec.get("schedulingPolicy")) != _kind_of_policy(
            old_spec.get("schedulingPolicy")
        ):
            _forbidden(errors, "spec.schedulingPolicy", "the policy may not be set or unset")


def _composite_pod_group(errors: Errors, obj: Json, old: Json | None) -> None:
    spec = _dict(obj.get("spec"))
    _parent(errors, spec, True, needs_ref=False)
    _workload_ref(errors, spec, required=True)
    _policy(errors, "spec.schedulingPolicy", spec.get("schedulingPolicy"), "minGroupCount")
    if old is not None:
        old_spec = _dict(old.get("spec"))
        for k in ("parentCompositePodGroupName", "workloadRef", "priorityClassName", "priority"):
            if spec.get(k) != old_spec.get(k):
                _immutable(errors, f"spec.{k}")
        if _kind_of_policy(spec.get("schedulingPolicy")) != _kind_of_policy(
            old_spec.get("schedulingPolicy")
        ):
            _forbidden(errors, "spec.schedulingPolicy", "the policy may not be set or unset")


def check_native(rt: ResourceType, obj: Json, old: Json | None, versions: Versions) -> None:
    """422 Invalid, worded as the API server words it, for a native gang object the
    release refuses (``old``: the stored object, on an update); other kinds pass."""
    if rt.group != NATIVE_GROUP or rt.plural not in (
        "workloads",
        "podgroups",
        "compositepodgroups",
    ):
        return
    errors: Errors = []
    if obj.get("spec") is None:
        _required(errors, "spec")
    composite = gate_on("CompositePodGroup", versions)
    key = (rt.version, rt.plural)
    if key == ("v1alpha1", "workloads"):
        _workload_v1alpha1(errors, obj, old)
    elif key == ("v1alpha2", "workloads"):
        _workload_v1alpha2(errors, obj, old)
    elif key == ("v1alpha2", "podgroups"):
        _pod_group_v1alpha2(errors, obj, old)
    elif key == ("v1beta1", "workloads"):
        _workload_v1beta1(errors, obj, old, composite)
    elif key == ("v1beta1", "podgroups"):
        _pod_group_v1beta1(errors, obj, old, composite)
    elif rt.plural == "compositepodgroups":
        _composite_pod_group(errors, obj, old)
    _raise(rt, str(obj["metadata"].get("name", "")), errors)


# --- pods ---------------------------------------------------------------------------------


def drop_disabled_pod_fields(spec: Json, versions: Versions) -> None:
    """``dropDisabledPodFields``: the group reference is dropped, without a word, where the
    release has the field but the gate is off."""
    field = pod_group_field(versions.kube)
    if field is not None and not gate_on("GenericWorkload", versions):
        spec.pop(field, None)


def check_pod_group_ref(pod: Json, old: Json | None, versions: Versions) -> None:
    """The pod's group reference: its names well formed, and never changed once set."""
    field = pod_group_field(versions.kube)
    if field is None:
        return
    spec = _dict(pod.get("spec"))
    ref = spec.get(field)
    errors: Errors = []
    if ref is not None:
        ref = _dict(ref)
        if field == "workloadRef":
            _subdomain(errors, "spec.workloadRef.name", ref.get("name"))
            _label(errors, "spec.workloadRef.podGroup", ref.get("podGroup"))
            key = ref.get("podGroupReplicaKey")
            if key not in (None, ""):
                _label(errors, "spec.workloadRef.podGroupReplicaKey", key)
        else:
            _subdomain(errors, "spec.schedulingGroup.podGroupName", ref.get("podGroupName"))
    if old is not None and ref != _dict(old.get("spec")).get(field):
        _immutable(errors, f"spec.{field}")
    _raise(
        ResourceType("", "v1", "pods", "Pod", True),
        str(_dict(pod.get("metadata")).get("name", "")),
        errors,
    )
