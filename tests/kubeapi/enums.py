"""The enumerated fields of the built-in kinds that the API server's validation checks
(the published OpenAPI schemas carry no enums for them, so the schemas alone cannot):
a value outside the list is 422 ``Unsupported value``, the supported values in the
order the validation lists them, the errors in the order ``ValidatePodSpec`` finds them
(containers, init containers, restartPolicy, dnsPolicy, tolerations, preemptionPolicy).

From kubernetes v1.28.7 ``pkg/apis/core/validation/validation.go``: ``restartPolicy``
(``validateRestartPolicy``: Always, OnFailure, Never; a Job's own rule is in
:mod:`.job_validation`), ``dnsPolicy`` (``validateDNSPolicy``), a container's
``imagePullPolicy`` (``validatePullPolicy``, a sorted set), ``preemptionPolicy``
(``validatePreemptionPolicy``), a toleration's ``operator`` and ``effect``
(``ValidateTolerations``, ``validateTaintEffect``); and
``pkg/apis/policy/validation/validation.go`` (``unhealthyPodEvictionPolicy``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Json = dict[str, Any]

__all__ = ["pdb_enum_errors", "pod_spec_enum_errors"]

Error = tuple[str, str]

_RESTART = ("Always", "OnFailure", "Never")
_DNS = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_PULL = ("Always", "IfNotPresent", "Never")
_PREEMPTION = ("Never", "PreemptLowerPriority")
_OPERATOR = ("Equal", "Exists")
_EFFECT = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_UNHEALTHY = ("AlwaysAllow", "IfHealthyBudget")


def _quoted(v: Any) -> str:
    return '"' + str(v).replace('"', '\\"') + '"'


def _check(value: Any, allowed: Sequence[str], path: str, out: list[Error]) -> None:
    if value is None or value == "" or value in allowed:
        return
    listed = ", ".join(_quoted(a) for a in allowed)
    out.append((path, f"Unsupported value: {_quoted(value)}: supported values: {listed}"))


def pod_spec_enum_errors(spec: Any, path: str, *, restart: bool = True) -> list[Error]:
    """The enum errors of a pod spec at ``path`` (``spec``, ``spec.template.spec``);
    ``restart``: check restartPolicy here (a Job's template has its own rule)."""
    out: list[Error] = []
    if not isinstance(spec, dict):
        return out
    for kind in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(kind) or ()):
            if isinstance(c, dict):
                _check(c.get("imagePullPolicy"), _PULL, f"{path}.{kind}[{i}].imagePullPolicy", out)
    if restart:
        _check(spec.get("restartPolicy"), _RESTART, f"{path}.restartPolicy", out)
    _check(spec.get("dnsPolicy"), _DNS, f"{path}.dnsPolicy", out)
    for i, t in enumerate(spec.get("tolerations") or ()):
        if isinstance(t, dict):
            _check(t.get("operator"), _OPERATOR, f"{path}.tolerations[{i}].operator", out)
            _check(t.get("effect"), _EFFECT, f"{path}.tolerations[{i}].effect", out)
    _check(spec.get("preemptionPolicy"), _PREEMPTION, f"{path}.preemptionPolicy", out)
    return out


def pdb_enum_errors(spec: Any) -> list[Error]:
    out: list[Error] = []
    if isinstance(spec, dict):
        _check(
            spec.get("unhealthyPodEvictionPolicy"),
            _UNHEALTHY,
            "spec.unhealthyPodEvictionPolicy",
            out,
        )
    return out
