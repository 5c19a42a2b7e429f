"""What the API server refuses in a batch/v1 Job, on create and on update, per release,
with its messages (422 ``Job.batch "x" is invalid: spec...``).

Follows ``pkg/apis/batch/validation/validation.go`` of kubernetes/kubernetes
(``validateJobSpec``, ``validatePodFailurePolicy*``, ``validatePodReplacementPolicy``
since v1.29, ``ValidateJobSpecUpdate``, ``validatePodTemplateUpdate``) and the options
``pkg/registry/batch/job/strategy.go`` gives it (``validationOptionsForJob``: a
suspended Job that never started may change its template's scheduling fields, v1.27+).
Modelled: restartPolicy (Never or OnFailure; Never with a podFailurePolicy), the
podFailurePolicy rules (at most 20; an action; exactly one of onExitCodes and
onPodConditions; an exit-code requirement's operator, container and values; a pod
condition's type and status), podReplacementPolicy (only ``Failed`` next to a
podFailurePolicy), managedBy (a domain-prefixed path of at most 63 characters), and the
fields an update may not change. Not modelled: the rest of the pod template's
validation, successPolicy and the per-index limits' bounds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

import orjson

from tests.kubeapi.gates import enabled
from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.versions import Release

Json = dict[str, Any]

__all__ = ["validate_job_create", "validate_job_update"]

MAX_RULES: Final = 20  # maxPodFailurePolicyRules
_MAX_EXIT_CODES: Final = 255  # maxPodFailurePolicyOnExitCodesValues
_MAX_CONDITIONS: Final = 20  # maxPodFailurePolicyOnPodConditionsPatterns
_MAX_MANAGED_BY: Final = 63  # maxManagedByLength
_ACTIONS: Final = ("Count", "FailJob", "Ignore")  # FailIndex needs backoffLimitPerIndex
_OPERATORS: Final = ("In", "NotIn")
_STATUSES: Final = ("False", "True", "Unknown")
_REPLACEMENT: Final = ("Failed", "TerminatingOrFailed")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PATH = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# The pod template fields a suspended, never started Job may change (validatePodTemplateUpdate).
_SCHEDULING_SPEC: Final = ("nodeSelector", "tolerations", "schedulingGates")
_SCHEDULING_META: Final = ("labels", "annotations")


def _go(value: Any) -> str:
    """A value as ``field.Error`` prints it: strings quoted, numbers bare, int32 slices
    as Go does (``[]int32{2, 1}``), objects as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return "[]int32{" + ", ".join(str(v) for v in value) + "}"
    return orjson.dumps(value).decode()


class _Errors:
    """A ``field.ErrorList``: causes worded as ``field.Error`` words them."""

    def __init__(self) -> None:
        self.causes: list[Json] = []

    def _add(self, reason: str, path: str, message: str) -> None:
        self.causes.append({"reason": reason, "message": message, "field": path})

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self._add("FieldValueInvalid", path, f"Invalid value: {_go(value)}: {detail}")

    def invalid_omit(self, path: str, detail: str) -> None:
        self._add("FieldValueInvalid", path, f"Invalid value: {detail}")

    def required(self, path: str, detail: str) -> None:
        self._add(
            "FieldValueRequired", path, f"Required value: {detail}" if detail else "Required value"
        )

    def not_supported(self, path: str, value: Any, allowed: Sequence[str]) -> None:
        listed = ", ".join(f'"{a}"' for a in allowed)
        self._add(
            "FieldValueNotSupported",
            path,
            f"Unsupported value: {_go(value)}: supported values: {listed}",
        )

    def too_many(self, path: str, n: int, most: int) -> None:
        self._add("FieldValueTooMany", path, f"Too many: {n}: must have at most {most} items")

    def duplicate(self, path: str, value: Any) -> None:
        self._add("FieldValueDuplicate", path, f"Duplicate value: {_go(value)}")

    def immutable(self, path: str, value: Any) -> None:
        self.invalid(path, value, "field is immutable")

    def raise_for(self, job: Json) -> None:
        if not self.causes:
            return
        listed = [f"{c['field']}: {c['message']}" for c in self.causes]
        text = listed[0] if len(listed) == 1 else f"[{', '.join(listed)}]"
        name = (job.get("metadata") or {}).get("name", "")
        raise ApiStatusError(
            422,
            "Invalid",
            f'Job.batch "{name}" is invalid: {text}',
            {"name": name, "group": "batch", "kind": "Job", "causes": self.causes},
        )


def _dict(value: Any) -> Json:
    return value if isinstance(value, dict) else {}


def _container_names(pod_spec: Json) -> set[str]:
    return {
        str(c.get("name"))
        for kind in ("containers", "initContainers")
        for c in pod_spec.get(kind) or ()
        if isinstance(c, dict)
    }


def _on_exit_codes(req: Any, path: str, names: set[str], errs: _Errors) -> None:
    req = _dict(req)
    op = req.get("operator")
    if not op:
        errs.required(f"{path}.operator", 'valid values: ["In" "NotIn"]')
    elif op not in _OPERATORS:
        errs.not_supported(f"{path}.operator", op, _OPERATORS)
    container = req.get("containerName")
    if container is not None and container not in names:
        errs.invalid(
            f"{path}.containerName",
            container,
            "must be one of the container or initContainer names in the pod template",
        )
    values = req.get("values") or []
    if not isinstance(values, list):
        values = []
    if not values:
        errs.invalid(f"{path}.values", values, "at least one value is required")
    elif len(values) > _MAX_EXIT_CODES:
        errs.too_many(f"{path}.values", len(values), _MAX_EXIT_CODES)
    seen: set[Any] = set()
    ordered = True
    for j, v in enumerate(values):
        if op == "In" and v == 0:
            errs.invalid(f"{path}.values[{j}]", v, "must not be 0 for the In operator")
        if v in seen:
            errs.duplicate(f"{path}.values[{j}]", v)
        seen.add(v)
        if j > 0 and isinstance(v, int) and isinstance(values[j - 1], int) and values[j - 1] > v:
            ordered = False
    if not ordered:
        errs.invalid(f"{path}.values", values, "must be ordered")


def _on_pod_conditions(conds: list[Any], path: str, errs: _Errors) -> None:
    if len(conds) > _MAX_CONDITIONS:
        errs.too_many(path, len(conds), _MAX_CONDITIONS)
    for j, c in enumerate(conds):
        c = _dict(c)
        ctype = str(c.get("type") or "")
        if not _qualified_name(ctype):
            errs.invalid(
                f"{path}[{j}].type",
                ctype,
                "name part must consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character",
            )
        status = c.get("status")
        if not status:
            errs.required(f"{path}[{j}].status", 'valid values: ["False" "True" "Unknown"]')
        elif status not in _STATUSES:
            errs.not_supported(f"{path}[{j}].status", status, _STATUSES)


def _qualified_name(text: str) -> bool:
    prefix, _, name = text.rpartition("/")
    if prefix and not _SUBDOMAIN.match(prefix):
        return False
    return bool(name) and len(name) <= 63 and bool(_NAME.match(name))


def _pod_failure_policy(spec: Json, errs: _Errors) -> None:
    policy = _dict(spec.get("podFailurePolicy"))
    rules = policy.get("rules") or []
    if not isinstance(rules, list):
        rules = []
    path = "spec.podFailurePolicy.rules"
    if len(rules) > MAX_RULES:
        errs.too_many(path, len(rules), MAX_RULES)
    names = _container_names(_dict(_dict(spec.get("template")).get("spec")))
    for i, rule in enumerate(rules):
        rule = _dict(rule)
        rpath = f"{path}[{i}]"
        action = rule.get("action")
        if not action:
            errs.required(
                f"{rpath}.action", 'valid values: ["Count" "FailIndex" "FailJob" "Ignore"]'
            )
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                errs.invalid(
                    f"{rpath}.action", action, "requires the backoffLimitPerIndex to be set"
                )
        elif action not in _ACTIONS:
            errs.not_supported(
                f"{rpath}.action", action, ("Count", "FailIndex", "FailJob", "Ignore")
            )
        exit_codes = rule.get("onExitCodes")
        conds = rule.get("onPodConditions") or []
        if not isinstance(conds, list):
            conds = []
        if exit_codes is not None:
            _on_exit_codes(exit_codes, f"{rpath}.onExitCodes", names, errs)
        if conds:
            _on_pod_conditions(conds, f"{rpath}.onPodConditions", errs)
        if exit_codes is not None and conds:
            errs.invalid_omit(
                rpath, "specifying both OnExitCodes and OnPodConditions is not supported"
            )
        if exit_codes is None and not conds:
            errs.invalid_omit(
                rpath, "specifying one of OnExitCodes and OnPodConditions is required"
            )


def _managed_by(value: Any, errs: _Errors) -> None:
    path = "spec.managedBy"
    text = str(value)
    host, slash, rest = text.partition("/")
    if not slash or not host or not rest:
        errs.invalid(path, text, 'must be a domain-prefixed path (such as "acme.io/foo")')
    else:
        if len(host) > 253 or not _SUBDOMAIN.match(host):
            errs.invalid(
                path,
                host,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
            )
        if not _PATH.match(rest):
            errs.invalid(path, rest, "segment of path must be a valid URL path segment")
    if len(text) > _MAX_MANAGED_BY:
        errs._add(
            "FieldValueTooLong", path, f"Too long: may not be more than {_MAX_MANAGED_BY} bytes"
        )


def _spec(spec: Json, kube: Release, errs: _Errors) -> None:
    """``validateJobSpec`` (the parts listed in the module docstring)."""
    pod_spec = _dict(_dict(spec.get("template")).get("spec"))
    restart = pod_spec.get("restartPolicy")
    rpath = "spec.template.spec.restartPolicy"
    if spec.get("podFailurePolicy") is not None:
        _pod_failure_policy(spec, errs)
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        # v1.29+ (validatePodReplacementPolicy); on v1.28 the field was dropped before.
        if spec.get("podFailurePolicy") is not None:
            if replacement != "Failed":
                errs.not_supported("spec.podReplacementPolicy", replacement, ("Failed",))
        elif replacement not in _REPLACEMENT:
            errs.not_supported("spec.podReplacementPolicy", replacement, _REPLACEMENT)
    if restart in ("Always", "", None):
        errs.required(rpath, 'valid values: "OnFailure", "Never"')
    elif restart not in ("OnFailure", "Never"):
        errs.not_supported(rpath, restart, ("OnFailure", "Never"))
    elif spec.get("podFailurePolicy") is not None and restart != "Never":
        errs.invalid(rpath, restart, 'only "Never" is supported when podFailurePolicy is specified')
    if spec.get("managedBy") is not None and enabled("JobManagedBy", kube):
        _managed_by(spec["managedBy"], errs)


def validate_job_create(job: Json, kube: Release) -> None:
    """A new Job as stored (defaulted, the fields of gates that are off dropped)."""
    errs = _Errors()
    _spec(_dict(job.get("spec")), kube, errs)
    errs.raise_for(job)


def _template_update(old: Json, new: Json, old_status: Json, errs: _Errors) -> None:
    """The pod template may not change, but for its scheduling fields on a Job that was
    suspended and never started (``status.startTime`` unset)."""
    before, after = _dict(old.get("template")), _dict(new.get("template"))
    mutable = bool(old.get("suspend")) and old_status.get("startTime") is None
    if mutable:
        before = {**before, "metadata": dict(_dict(before.get("metadata")))}
        before["spec"] = dict(_dict(before.get("spec")))
        bmeta, bspec = before["metadata"], before["spec"]
        ameta, aspec = _dict(after.get("metadata")), _dict(after.get("spec"))
        for key, src, dst in (
            *((k, ameta, bmeta) for k in _SCHEDULING_META),
            *((k, aspec, bspec) for k in _SCHEDULING_SPEC),
        ):
            if key in src:
                dst[key] = src[key]
            else:
                dst.pop(key, None)
        # node affinity may change; the rest of the affinity may not
        aff_after, aff_before = aspec.get("affinity"), bspec.get("affinity")
        if isinstance(aff_after, dict) or isinstance(aff_before, dict):
            merged = {k: v for k, v in _dict(aff_before).items() if k != "nodeAffinity"}
            if "nodeAffinity" in _dict(aff_after):
                merged["nodeAffinity"] = aff_after["nodeAffinity"]
            if merged:
                bspec["affinity"] = merged
            else:
                bspec.pop("affinity", None)
    if _dropped_empty(before) != _dropped_empty(after):
        errs.immutable("spec.template", after)


def _dropped_empty(template: Json) -> Json:
    """A template with empty metadata and spec left out: typed objects compare so."""
    return {k: v for k, v in template.items() if not (k in ("metadata", "spec") and v == {})}


def validate_job_update(old: Json, new: Json, kube: Release) -> None:
    """An update of a Job's spec: the new spec valid, and what may not change
    (``ValidateJobSpecUpdate``): completions (but for an Indexed Job with completions ==
    parallelism), selector, the template (see :func:`_template_update`),
    completionMode, podFailurePolicy, backoffLimitPerIndex, managedBy, successPolicy."""
    errs = _Errors()
    before, after = _dict(old.get("spec")), _dict(new.get("spec"))
    _spec(after, kube, errs)
    elastic = after.get("completionMode") == "Indexed" and after.get("completions") == after.get(
        "parallelism"
    )
    if not elastic and before.get("completions") != after.get("completions"):
        errs.immutable("spec.completions", after.get("completions"))
    if before.get("selector") != after.get("selector"):
        errs.immutable("spec.selector", after.get("selector"))
    _template_update(before, after, _dict(old.get("status")), errs)
    for key in (
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ):
        if before.get(key) != after.get(key):
            errs.immutable(f"spec.{key}", after.get(key))
    errs.raise_for(new)
