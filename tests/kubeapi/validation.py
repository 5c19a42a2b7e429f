"""What the in-memory API server refuses in an object it is given (names, budgets; a
Job's rules are in :mod:`.job_validation`), and the canonical form it stores quantities in."""

from __future__ import annotations

import re
from typing import Any

from gangplace.engine.selectors import LabelSelector, SelectorError

from tests.kubeapi.enums import pdb_enum_errors, pod_spec_enum_errors
from tests.kubeapi.quantity import canonical_resources
from tests.kubeapi.resources import ResourceType
from tests.kubeapi.status import ApiStatusError

Json = dict[str, Any]

__all__ = ["canonical_quantities", "validate"]

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _pod_spec_quantities(spec: Any) -> None:
    if not isinstance(spec, dict):
        return
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(kind) or ():
            if isinstance(c, dict):
                canonical_resources(c.get("resources"))
    canonical_resources(spec.get("overhead"))


def canonical_quantities(rt: ResourceType, obj: Json) -> None:
    """Quantities of built-in kinds are stored in canonical form ("1000" cpu is "1k")."""
    key = (rt.group, rt.plural)
    if key == ("", "pods"):
        _pod_spec_quantities(obj.get("spec"))
    elif key == ("batch", "jobs"):
        _pod_spec_quantities(((obj.get("spec") or {}).get("template") or {}).get("spec"))
    elif key == ("", "nodes"):
        status = obj.get("status")
        if isinstance(status, dict):
            canonical_resources(status.get("capacity"))
            canonical_resources(status.get("allocatable"))


# Built-in kinds whose pod template's enums are checked (a Job's restartPolicy by its own
# rule, :mod:`.job_validation`).
_TEMPLATED = {
    ("batch", "jobs"): False,
    ("apps", "deployments"): True,
    ("apps", "statefulsets"): True,
    ("apps", "replicasets"): True,
}


def _enums(rt: ResourceType, obj: Json, name: str) -> None:
    """Enumerated fields out of their lists (:mod:`.enums`): 422, every error named."""
    key = (rt.group, rt.plural)
    spec = obj.get("spec")
    if key == ("", "pods"):
        errors = pod_spec_enum_errors(spec, "spec")
    elif key in _TEMPLATED and isinstance(spec, dict):
        template = spec.get("template")
        pod_spec = template.get("spec") if isinstance(template, dict) else None
        errors = pod_spec_enum_errors(pod_spec, "spec.template.spec", restart=_TEMPLATED[key])
    elif key == ("policy", "poddisruptionbudgets"):
        errors = pdb_enum_errors(spec)
    else:
        return
    if errors:
        parts = [f"{f}: {m}" for f, m in errors]
        message = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
        raise ApiStatusError(
            422,
            "Invalid",
            f'{rt.kind} "{name}" is invalid: {message}',
            {
                "name": name,
                "group": rt.group,
                "kind": rt.kind,
                "causes": [
                    {"reason": "FieldValueNotSupported", "message": m, "field": f}
                    for f, m in errors
                ],
            },
        )


def validate(rt: ResourceType, obj: Json) -> None:
    """A created or updated object's name, and a budget's selector and figures (422)."""
    name = obj["metadata"].get("name", "")
    if len(name) > 253 or not _NAME.match(name):
        raise ApiStatusError(
            422,
            "Invalid",
            f'{rt.kind} "{name}" is invalid: metadata.name: Invalid value: "{name}": '
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character",
        )
    _enums(rt, obj, name)
    if rt.plural == "poddisruptionbudgets":
        spec = obj.get("spec") or {}
        try:
            LabelSelector.from_json(spec.get("selector"), "spec.selector")
        except SelectorError as e:
            raise ApiStatusError(
                422, "Invalid", f'PodDisruptionBudget "{name}" is invalid: {e}'
            ) from None
        for k in ("minAvailable", "maxUnavailable"):
            v = spec.get(k)
            if v is not None and not (
                (isinstance(v, int) and not isinstance(v, bool) and v >= 0)
                or (isinstance(v, str) and re.fullmatch(r"\d+%?", v))
            ):
                raise ApiStatusError(
                    422,
                    "Invalid",
                    f'PodDisruptionBudget "{name}" is invalid: spec.{k}: Invalid value: '
                    f"{v!r}: must be a non-negative integer or a percentage",
                )
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            raise ApiStatusError(
                422,
                "Invalid",
                f'PodDisruptionBudget "{name}" is invalid: spec: Invalid value: '
                "minAvailable and maxUnavailable cannot be both set",
            )
