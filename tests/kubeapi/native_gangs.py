"""The native gang API (KEP-4671) as each release serves it: what a Workload, PodGroup
and CompositePodGroup of ``scheduling.k8s.io`` must hold, what may not change, what the
server drops or defaults, and the pod's reference to its group (``spec.workloadRef`` in
1.35, ``spec.schedulingGroup`` from 1.36).

Written from kubernetes/api ``scheduling/<version>/types.go`` at the tag named and the
declarative validation tags in them (``+k8s:required``, ``+k8s:maxItems``,
``+k8s:immutable``, ``+k8s:update=NoAddItem``, ``+k8s:ifDisabled(...)``, ``+default``),
kubernetes ``pkg/apis/scheduling/validation/validation.go`` (1.37: tree-wide checks) and
``pkg/registry/scheduling/podgroup/strategy.go`` (1.36: ``dropDisabledPodGroupFields``),
checked against the released OpenAPI schemas (kubernetes-validate
``v1.3x.0-local-strict/workload-scheduling-*.json``, ``podgroup-scheduling-*.json``,
``compositepodgroup-scheduling-v1alpha3.json``):

- 1.35, ``v1alpha1`` (v0.35.0): ``Workload`` ``spec.podGroups[{name, policy: {basic: {}}
  | {gang: {minCount}}}]`` (at most 8, names unique DNS labels, immutable) and an optional
  immutable ``spec.controllerRef{apiGroup, kind, name}``; pods name it by
  ``spec.workloadRef{name, podGroup, podGroupReplicaKey}``.
- 1.36, ``v1alpha2`` (v0.36.0): ``Workload`` ``spec.podGroupTemplates[{name,
  schedulingPolicy, schedulingConstraints, disruptionMode, priorityClassName,
  priority}]`` (at most 8, immutable) and a runtime ``PodGroup``
  ``spec{podGroupTemplateRef{workload{workloadName (a DNS subdomain),
  podGroupTemplateName (a DNS label)}}, schedulingPolicy, schedulingConstraints{topology[
  {key}]}, disruptionMode, priorityClassName, priority}``, every field immutable.
  ``disruptionMode`` is a string, ``Pod`` or ``PodGroup`` (defaulted to ``Pod``);
  it, ``priorityClassName`` and ``priority`` exist only with WorkloadAwarePreemption on,
  ``schedulingConstraints`` only with TopologyAwareWorkloadScheduling: with the gate
  off the server drops them (unless the stored object has them). Pods name a PodGroup by
  ``spec.schedulingGroup.podGroupName``.
- 1.37, ``v1alpha3`` (v0.37.0-beta.0) and ``v1beta1`` (the released 1.37.0 schema; the
  same types and tags): templates may not be added or removed and ``gang.minCount``
  may change (nothing else); exactly one of ``podGroupTemplates`` and
  ``compositePodGroupTemplates`` (the latter forbidden unless CompositePodGroup is on),
  each level at most 8 templates, at most 4 levels, every template name unique in the
  whole tree and one priority (class) for all of them; ``PodGroup``
  ``spec{parentCompositePodGroupName, workloadRef{workloadName, templateName},
  schedulingPolicy, schedulingConstraints{topology[{key}]}, disruptionMode {single: {}} |
  {all: {}} (defaulted to single), priorityClassName, priority}``; ``CompositePodGroup``
  (v1alpha3 only) ``spec{parentCompositePodGroupName, workloadRef, schedulingPolicy{basic
  | gang{minGroupCount}}, schedulingConstraints, disruptionMode, priorityClassName,
  priority}``, every field immutable.

A pod's group reference is accepted only where the release serves it with the gate on:
before its release the field is unknown (dropped with a warning, refused under Strict:
:mod:`.fields`); with the gate off it is dropped silently, as ``dropDisabledPodFields``
does (``pkg/api/pod/util.go``). Once set it may not change (``ValidatePodUpdate``:
``field is immutable``).

Left out: the scheduler's own checks of a group (one schedulerName for all its pods is
checked by the scheduler model, :mod:`tests.controllers.native_gang_scheduler`),
resourceClaims and preemptionPolicy (gates DRAWorkloadResourceClaims,
PodGroupPreemptionPolicy), the priority admission plugin (``priority`` from
``priorityClassName``), and the Workload's unknown spec fields (not dropped here).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.kubeapi.gates import GATES, enabled
from tests.kubeapi.resources import NATIVE_GROUP, ResourceType
from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.versions import Release, Versions

Json = dict[str, Any]

__all__ = [
    "MAX_DEPTH",
    "MAX_TEMPLATES",
    "NATIVE_VERSIONS",
    "check_native",
    "check_pod_group_ref",
    "composite_version",
    "gate_on",
    "native_version",
    "pod_group_field",
]

MAX_TEMPLATES = 8  # WorkloadMaxPodGroupTemplates
MAX_DEPTH = 4  # WorkloadMaxTreeDepth (v1alpha3, 1.37)
HIGHEST_USER_PRIORITY = 1_000_000_000  # HighestUserDefinablePriority
# Workload and PodGroup versions, as clients prefer them (the beta, then the newest alpha).
NATIVE_VERSIONS = ("v1beta1", "v1alpha3", "v1alpha2", "v1alpha1")
COMPOSITE = "v1alpha3"  # the only version serving CompositePodGroup
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# 1.36's DisruptionMode (v0.36.0 v1alpha2/types.go: DisruptionModePod, ...PodGroup).
_STRING_MODES = ("Pod", "PodGroup")
# The gates a cluster started with the native gang API switched on has on.
_NATIVE_GATES = ("GenericWorkload", "GangScheduling", "CompositePodGroup", "WorkloadWithJob")


def gate_on(gate: str, versions: Versions) -> bool:
    """A gate as the cluster runs it: its release default, on where the stack was started
    with the native gang API switched on (``Versions.native_gangs``) or names it in
    ``Versions.gates``; never before the release that has it."""
    exists = versions.kube >= GATES[gate][0][0]
    if gate in versions.gates or (versions.native_gangs and gate in _NATIVE_GATES):
        return exists
    return enabled(gate, versions.kube)


def native_version(versions: Versions) -> str | None:
    """The ``scheduling.k8s.io`` version of Workload and PodGroup a client of this stack
    uses: the preferred one served (None: no native gang API)."""
    if not gate_on("GenericWorkload", versions):
        return None
    return next((v for v in NATIVE_VERSIONS if versions.native_api_on(v)), None)


def composite_version(versions: Versions) -> str | None:
    """The version serving CompositePodGroup (None: not served)."""
    return COMPOSITE if versions.native_api_on(COMPOSITE) else None


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


def _not_supported(errors: Errors, field: str, value: Any, allowed: tuple[str, ...]) -> None:
    shown = ", ".join(f'"{v}"' for v in allowed)
    errors.append(
        (
            field,
            "FieldValueNotSupported",
            f'Unsupported value: "{value}": supported values: {shown}',
        )
    )


def _label_key(errors: Errors, field: str, value: Any) -> None:
    """``k8s-label-key``: an optional DNS subdomain prefix and ``/``, then a name of at
    most 63 characters."""
    if not value:
        _required(errors, field)
        return
    prefix, _, name = str(value).rpartition("/")
    ok = isinstance(value, str) and 0 < len(name) <= 63 and bool(_QUALIFIED.match(name))
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        ok = False
    if not ok:
        _invalid(
            errors,
            field,
            value,
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character",
        )


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
    if ref.get("apiGroup"):
        _subdomain(errors, "spec.controllerRef.apiGroup", ref["apiGroup"])


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


def _topology(errors: Errors, field: str, constraints: Any) -> None:
    """``{topology: [{key}]}``, at most one (v0.36.0 and v0.37.0-beta.0
    ``PodGroupSchedulingConstraints``)."""
    if constraints is None:
        return
    items = _list(_dict(constraints).get("topology"))
    if len(items) > 1:
        errors.append(
            (
                f"{field}.topology",
                "FieldValueTooMany",
                f"Too many: {len(items)}: must have at most 1 items",
            )
        )
    for i, c in enumerate(items):
        _label_key(errors, f"{field}.topology[{i}].key", _dict(c).get("key"))


def _priority(errors: Errors, field: str, holder: Json) -> None:
    """``priorityClassName`` a DNS subdomain, ``priority`` at most 1e9."""
    if holder.get("priorityClassName"):
        _subdomain(errors, f"{field}.priorityClassName", holder["priorityClassName"])
    p = holder.get("priority")
    if p is not None and (not isinstance(p, int) or p > HIGHEST_USER_PRIORITY):
        _invalid(
            errors,
            f"{field}.priority",
            p,
            f"must be less than or equal to {HIGHEST_USER_PRIORITY}",
        )


def _names(templates: Any) -> list[str]:
    return [str(_dict(t).get("name")) for t in _list(templates)]


def _kind_of_policy(policy: Any) -> str | None:
    p = _dict(policy)
    return "gang" if p.get("gang") is not None else "basic" if p.get("basic") is not None else None


def _unchanged(errors: Errors, field: str, new: Json, old: Json, keys: tuple[str, ...]) -> None:
    for k in keys:
        if new.get(k) != old.get(k):
            _immutable(errors, f"{field}.{k}")


# --- what the server drops and defaults ----------------------------------------------------

# Fields of a 1.36 pod group (template) that exist only with a gate on (v0.36.0
# v1alpha2/types.go "+k8s:ifDisabled"; podgroup/strategy.go dropDisabledPodGroupFields
# drops them, unless the stored object already has them).
_GATED_V1ALPHA2 = (
    ("schedulingConstraints", "TopologyAwareWorkloadScheduling"),
    ("disruptionMode", "WorkloadAwarePreemption"),
    ("priorityClassName", "WorkloadAwarePreemption"),
    ("priority", "WorkloadAwarePreemption"),
)
# 1.37 keeps one such gate on these fields (v0.37.0-beta.0 v1alpha3/types.go).
_GATED_137 = (("schedulingConstraints", "TopologyAwareWorkloadScheduling"),)


def _drop_disabled(holder: Json, old: Json | None, gated: Any, versions: Versions) -> None:
    for key, gate in gated:
        if key in holder and not gate_on(gate, versions) and _dict(old).get(key) is None:
            del holder[key]


def _templates_by_name(spec: Json) -> dict[str, Json]:
    out: dict[str, Json] = {}
    stack = [spec]
    while stack:
        node = stack.pop()
        for key in ("podGroupTemplates", "compositePodGroupTemplates"):
            for t in _list(node.get(key)):
                if isinstance(t, dict):
                    out[str(t.get("name"))] = t
                    stack.append(t)
    return out


def _prepare(rt: ResourceType, obj: Json, old: Json | None, versions: Versions) -> None:
    """Drop what a gate switched off forbids, then default (``+default``)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    old_spec = _dict(_dict(old).get("spec")) if old is not None else None
    gated = _GATED_V1ALPHA2 if rt.version == "v1alpha2" else _GATED_137
    if rt.version == "v1alpha1":
        return
    if rt.plural == "workloads":
        before = _templates_by_name(old_spec) if old_spec is not None else {}
        for name, t in _templates_by_name(spec).items():
            _drop_disabled(t, before.get(name), gated, versions)
        return
    _drop_disabled(spec, old_spec, gated, versions)
    if rt.plural != "podgroups":
        return
    # PodGroupSpec.DisruptionMode: +default="Pod" (1.36, then dropped with the gate
    # off), +default={"single": {}} (1.37).
    if rt.version == "v1alpha2":
        if "disruptionMode" not in spec and gate_on("WorkloadAwarePreemption", versions):
            spec["disruptionMode"] = "Pod"
    elif spec.get("disruptionMode") is None:
        spec["disruptionMode"] = {"single": {}}


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
        _unchanged(errors, "spec", spec, _dict(old.get("spec")), ("podGroups", "controllerRef"))


def _disruption_string(errors: Errors, field: str, mode: Any) -> None:
    """1.36: ``Pod`` or ``PodGroup`` (``+k8s:enum``)."""
    if mode is not None and mode not in _STRING_MODES:
        _not_supported(errors, field, mode, _STRING_MODES)


def _pod_group_template_v1alpha2(errors: Errors, field: str, t: Json) -> None:
    _policy(errors, f"{field}.schedulingPolicy", t.get("schedulingPolicy"))
    _topology(errors, f"{field}.schedulingConstraints", t.get("schedulingConstraints"))
    _disruption_string(errors, f"{field}.disruptionMode", t.get("disruptionMode"))
    _priority(errors, field, t)


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
        _unchanged(
            errors, "spec", spec, _dict(old.get("spec")), ("podGroupTemplates", "controllerRef")
        )


def _disruption_union(errors: Errors, field: str, mode: Any) -> None:
    """1.37: ``{single: {}}`` or ``{all: {}}``."""
    if mode is None:
        return
    if isinstance(mode, str):
        _invalid(errors, field, mode, "must be an object with one of: `single`, `all`")
        return
    m = _dict(mode)
    if sum(1 for k in ("single", "all") if m.get(k) is not None) != 1:
        _invalid(errors, field, "{...}", "must specify exactly one of: `single`, `all`")


def _pod_group_template_137(errors: Errors, field: str, t: Json) -> None:
    _policy(errors, f"{field}.schedulingPolicy", t.get("schedulingPolicy"))
    _topology(errors, f"{field}.schedulingConstraints", t.get("schedulingConstraints"))
    _disruption_union(errors, f"{field}.disruptionMode", t.get("disruptionMode"))
    _priority(errors, field, t)


def _composite_template(errors: Errors, field: str, t: Json, depth: int) -> None:
    _policy(errors, f"{field}.schedulingPolicy", t.get("schedulingPolicy"), "minGroupCount")
    _topology(errors, f"{field}.schedulingConstraints", t.get("schedulingConstraints"))
    _disruption_union(errors, f"{field}.disruptionMode", t.get("disruptionMode"))
    _priority(errors, field, t)
    if depth > MAX_DEPTH:
        _invalid(errors, field, "{...}", f"maximum template hierarchy depth is {MAX_DEPTH}")
        return
    pods, composites = t.get("podGroupTemplates"), t.get("compositePodGroupTemplates")
    if not _list(pods) and not _list(composites):
        _invalid(
            errors,
            field,
            t.get("name"),
            "must have at least one child PodGroupTemplate or CompositePodGroupTemplate",
        )
    _templates(errors, f"{field}.podGroupTemplates", pods, _pod_group_template_137)
    _templates(
        errors,
        f"{field}.compositePodGroupTemplates",
        composites,
        lambda e, f, c: _composite_template(e, f, c, depth + 1),
    )


def _tree_names(errors: Errors, spec: Json) -> None:
    """Every template name unique in the whole tree (validation.go
    ``validateWorkloadTemplateNamesUniqueness``; a duplicate within one list is the
    list's own error)."""
    seen: dict[str, str] = {}

    def walk(node: Json, field: str) -> None:
        for key in ("podGroupTemplates", "compositePodGroupTemplates"):
            here = f"{field}.{key}"
            for i, t in enumerate(_list(node.get(key))):
                name = str(_dict(t).get("name"))
                where = seen.setdefault(name, here)
                if where != here:
                    errors.append(
                        (f"{here}[{i}].name", "FieldValueDuplicate", f'Duplicate value: "{name}"')
                    )
                if key == "compositePodGroupTemplates":
                    walk(_dict(t), f"{here}[{i}]")

    walk(spec, "spec")


def _tree_priority(errors: Errors, spec: Json) -> None:
    """One priority and priorityClassName for every template (validation.go
    ``validateWorkloadPriority``)."""
    seen = {
        (str(t.get("priorityClassName") or ""), t.get("priority"))
        for t in _templates_by_name(spec).values()
    }
    if len(seen) > 1:
        _invalid(
            errors,
            "spec",
            None,
            "all priority and priorityClassName values must be identical, detected multiple values",
        )


_TEMPLATE_FIXED = (
    "schedulingConstraints",
    "disruptionMode",
    "priorityClassName",
    "priority",
    "resourceClaims",
)


def _tree_update(errors: Errors, field: str, new: Json, old: Json) -> None:
    """NoAddItem/NoRemoveItem on every template list; the policy's kind, constraints,
    disruption mode and priority fixed; only ``gang.minCount`` may change (a composite
    template's ``gang.minGroupCount`` too: ``+k8s:update=NoSet,NoUnset`` on the member)."""
    for key in ("podGroupTemplates", "compositePodGroupTemplates"):
        if sorted(_names(new.get(key))) != sorted(_names(old.get(key))):
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
            _unchanged(errors, here, t, before, _TEMPLATE_FIXED)
            if key == "compositePodGroupTemplates":
                _tree_update(errors, here, t, before)


def _workload_137(errors: Errors, obj: Json, old: Json | None, composite: bool) -> None:
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
    _templates(errors, "spec.podGroupTemplates", pods, _pod_group_template_137)
    _templates(
        errors,
        "spec.compositePodGroupTemplates",
        composites,
        lambda e, f, c: _composite_template(e, f, c, 2),
    )
    _tree_names(errors, spec)
    _tree_priority(errors, spec)
    if old is not None:
        old_spec = _dict(old.get("spec"))
        _unchanged(errors, "spec", spec, old_spec, ("controllerRef",))
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
            # WorkloadPodGroupTemplateReference: workloadName k8s-long-name (a subdomain),
            # podGroupTemplateName k8s-short-name (a label).
            _subdomain(
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
    _topology(errors, "spec.schedulingConstraints", spec.get("schedulingConstraints"))
    _disruption_string(errors, "spec.disruptionMode", spec.get("disruptionMode"))
    _priority(errors, "spec", spec)
    if old is not None:
        _unchanged(
            errors,
            "spec",
            spec,
            _dict(old.get("spec")),
            (
                "podGroupTemplateRef",
                "schedulingPolicy",
                "schedulingConstraints",
                "disruptionMode",
                "priorityClassName",
                "priority",
            ),
        )


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


def _pod_group_137(errors: Errors, obj: Json, old: Json | None, composite: bool) -> None:
    spec = _dict(obj.get("spec"))
    _parent(errors, spec, composite, needs_ref=True)
    _workload_ref(errors, spec, required=False)
    _policy(errors, "spec.schedulingPolicy", spec.get("schedulingPolicy"))
    _topology(errors, "spec.schedulingConstraints", spec.get("schedulingConstraints"))
    _disruption_union(errors, "spec.disruptionMode", spec.get("disruptionMode"))
    _priority(errors, "spec", spec)
    if old is not None:
        old_spec = _dict(old.get("spec"))
        _unchanged(
            errors,
            "spec",
            spec,
            old_spec,
            ("parentCompositePodGroupName", "workloadRef", *_TEMPLATE_FIXED),
        )
        if _kind_of_policy(spec.get("schedulingPolicy")) != _kind_of_policy(
            old_spec.get("schedulingPolicy")
        ):
            _forbidden(errors, "spec.schedulingPolicy", "the policy may not be set or unset")


def _composite_pod_group(errors: Errors, obj: Json, old: Json | None) -> None:
    """v0.37.0-beta.0 ``CompositePodGroupSpec``: workloadRef and schedulingPolicy required,
    every field ``+k8s:immutable`` (the policy too, unlike a PodGroup's minCount)."""
    spec = _dict(obj.get("spec"))
    _parent(errors, spec, True, needs_ref=False)
    _workload_ref(errors, spec, required=True)
    _policy(errors, "spec.schedulingPolicy", spec.get("schedulingPolicy"), "minGroupCount")
    _topology(errors, "spec.schedulingConstraints", spec.get("schedulingConstraints"))
    _disruption_union(errors, "spec.disruptionMode", spec.get("disruptionMode"))
    _priority(errors, "spec", spec)
    if old is not None:
        _unchanged(
            errors,
            "spec",
            spec,
            _dict(old.get("spec")),
            ("parentCompositePodGroupName", "workloadRef", "schedulingPolicy", *_TEMPLATE_FIXED),
        )


def check_native(rt: ResourceType, obj: Json, old: Json | None, versions: Versions) -> None:
    """Drop and default what the release drops and defaults in a native gang object,
    then 422 Invalid, worded as the API server words it, for one the release refuses
    (``old``: the stored object, on an update); other kinds pass."""
    if rt.group != NATIVE_GROUP or rt.plural not in (
        "workloads",
        "podgroups",
        "compositepodgroups",
    ):
        return
    errors: Errors = []
    if obj.get("spec") is None:
        _required(errors, "spec")
    _prepare(rt, obj, old, versions)
    composite = gate_on("CompositePodGroup", versions)
    key = (rt.version, rt.plural)
    if key == ("v1alpha1", "workloads"):
        _workload_v1alpha1(errors, obj, old)
    elif key == ("v1alpha2", "workloads"):
        _workload_v1alpha2(errors, obj, old)
    elif key == ("v1alpha2", "podgroups"):
        _pod_group_v1alpha2(errors, obj, old)
    elif rt.plural == "workloads":  # v1alpha3, v1beta1
        _workload_137(errors, obj, old, composite)
    elif rt.plural == "podgroups":
        _pod_group_137(errors, obj, old, composite)
    else:
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
