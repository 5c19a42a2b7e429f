"""Server-side field validation, and the fields of the built-in kinds this server tells
kubectl about -- top-level fields of every kind, and the ``spec`` fields of the workload
kinds and budgets corral touches -- with the release each later field arrived in.

The field lists are written from the API types of kubernetes ``staging/src/k8s.io/api``
(``core/v1/types.go`` PodSpec, ``batch/v1/types.go`` JobSpec and CronJobSpec,
``apps/v1/types.go``, ``policy/v1/types.go``, ...) at v1.28.7, with the fields later
releases added (``resources`` on PodSpec in v1.32, ``successPolicy`` and ``managedBy``
on JobSpec in v1.30); they feed :mod:`.openapi` (what kubectl is told). What the server
refuses or warns about is decided by the release's own OpenAPI schema at every depth
(:func:`unknown_fields`, :mod:`.released_schemas`); a test keeps the lists within it.

``fieldValidation`` (``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go``,
``update.go``, ``patch.go`` and ``rest.go``, v1.28; GA in 1.27): ``Strict`` refuses a
body with unknown fields (400, ``strict decoding error: unknown field "spec.foo"``),
``Warn`` (the default) drops them with one ``Warning`` header each, ``Ignore`` drops
them silently. Custom resources are checked by their CRD's schema (:func:`.crds.prune`).
"""

from __future__ import annotations

import re
from typing import Any

from tests.kubeapi.released_schemas import TypeMismatch, decode
from tests.kubeapi.resources import ResourceType
from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.versions import Release

Json = dict[str, Any]

__all__ = [
    "FIELD_VALIDATION",
    "SPEC_FIELDS",
    "TOP_FIELDS",
    "known_fields",
    "type_mismatch",
    "unknown_fields",
]

FIELD_VALIDATION = ("Ignore", "Strict", "Warn")

_SPEC_STATUS = ("spec", "status")

# (group, plural) -> the fields beside apiVersion, kind and metadata.
TOP_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): _SPEC_STATUS,
    ("", "nodes"): _SPEC_STATUS,
    ("", "namespaces"): _SPEC_STATUS,
    ("", "events"): (
        "involvedObject",
        "reason",
        "message",
        "source",
        "firstTimestamp",
        "lastTimestamp",
        "count",
        "type",
        "eventTime",
        "series",
        "action",
        "related",
        "reportingComponent",
        "reportingInstance",
    ),
    ("", "configmaps"): ("data", "binaryData", "immutable"),
    ("", "secrets"): ("data", "stringData", "type", "immutable"),
    ("", "serviceaccounts"): ("secrets", "imagePullSecrets", "automountServiceAccountToken"),
    ("batch", "jobs"): _SPEC_STATUS,
    ("batch", "cronjobs"): _SPEC_STATUS,
    ("apps", "deployments"): _SPEC_STATUS,
    ("apps", "statefulsets"): _SPEC_STATUS,
    ("apps", "replicasets"): _SPEC_STATUS,
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): ("webhooks",),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): ("webhooks",),
    ("apiextensions.k8s.io", "customresourcedefinitions"): _SPEC_STATUS,
    ("events.k8s.io", "events"): (
        "eventTime",
        "series",
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
        "regarding",
        "related",
        "note",
        "type",
        "deprecatedSource",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "deprecatedCount",
    ),
    ("coordination.k8s.io", "leases"): ("spec",),
    ("scheduling.k8s.io", "priorityclasses"): (
        "value",
        "globalDefault",
        "description",
        "preemptionPolicy",
    ),
    ("policy", "poddisruptionbudgets"): _SPEC_STATUS,
    ("rbac.authorization.k8s.io", "roles"): ("rules",),
    ("rbac.authorization.k8s.io", "rolebindings"): ("subjects", "roleRef"),
    ("rbac.authorization.k8s.io", "clusterroles"): ("rules", "aggregationRule"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): ("subjects", "roleRef"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"): _SPEC_STATUS,
}

_POD_SPEC = (
    "volumes",
    "initContainers",
    "containers",
    "ephemeralContainers",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "dnsPolicy",
    "nodeSelector",
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
    "nodeName",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "securityContext",
    "imagePullSecrets",
    "hostname",
    "subdomain",
    "affinity",
    "schedulerName",
    "tolerations",
    "hostAliases",
    "priorityClassName",
    "priority",
    "dnsConfig",
    "readinessGates",
    "runtimeClassName",
    "enableServiceLinks",
    "preemptionPolicy",
    "overhead",
    "topologySpreadConstraints",
    "setHostnameAsFQDN",
    "os",
    "hostUsers",
    "schedulingGates",
    "resourceClaims",
)
_WORKLOAD_SELECTOR = ("replicas", "selector", "template", "minReadySeconds")

# (group, plural) -> its spec's fields at v1.28.
SPEC_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): _POD_SPEC,
    ("batch", "jobs"): (
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "podFailurePolicy",
        "backoffLimit",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
        "selector",
        "manualSelector",
        "template",
        "ttlSecondsAfterFinished",
        "completionMode",
        "suspend",
        "podReplacementPolicy",
    ),
    ("batch", "cronjobs"): (
        "schedule",
        "timeZone",
        "startingDeadlineSeconds",
        "concurrencyPolicy",
        "suspend",
        "jobTemplate",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ),
    ("apps", "deployments"): (
        *_WORKLOAD_SELECTOR,
        "strategy",
        "revisionHistoryLimit",
        "paused",
        "progressDeadlineSeconds",
    ),
    ("apps", "statefulsets"): (
        *_WORKLOAD_SELECTOR,
        "volumeClaimTemplates",
        "serviceName",
        "podManagementPolicy",
        "updateStrategy",
        "revisionHistoryLimit",
        "persistentVolumeClaimRetentionPolicy",
        "ordinals",
    ),
    ("apps", "replicasets"): _WORKLOAD_SELECTOR,
    ("policy", "poddisruptionbudgets"): (
        "minAvailable",
        "selector",
        "maxUnavailable",
        "unhealthyPodEvictionPolicy",
    ),
}

# Fields later releases added to a spec: (group, plural, field) -> the first release.
# A release adds its fields here (the native gang API's pod fields among them).
SPEC_FIELDS_SINCE: dict[tuple[str, str, str], Release] = {
    ("batch", "jobs", "successPolicy"): Release(1, 30),
    ("batch", "jobs", "managedBy"): Release(1, 30),
    ("", "pods", "resources"): Release(1, 32),
    # the native gang API's reference from a pod to its group (KEP-4671; core/v1
    # types.go PodSpec at v1.35 and v1.36): workloadRef in 1.35 alone, replaced by
    # schedulingGroup in 1.36 (tests/kubeapi/native_gangs.py)
    ("", "pods", "workloadRef"): Release(1, 35),
    ("", "pods", "schedulingGroup"): Release(1, 36),
}
# Fields a later release removed: (group, plural, field) -> the last release with it.
SPEC_FIELDS_UNTIL: dict[tuple[str, str, str], Release] = {
    ("", "pods", "workloadRef"): Release(1, 35),
}


def known_fields(rt: ResourceType, kube: Release) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(top-level fields, spec fields) of a built-in kind at release ``kube``; a spec not
    listed is not checked (empty)."""
    key = (rt.group, rt.plural)
    top = ("apiVersion", "kind", "metadata", *TOP_FIELDS.get(key, ()))
    spec = SPEC_FIELDS.get(key, ())
    later = tuple(
        f
        for (g, p, f), since in SPEC_FIELDS_SINCE.items()
        if (g, p) == key and kube >= since and kube <= SPEC_FIELDS_UNTIL.get((g, p, f), kube)
    )
    return top, (*spec, *later) if spec else ()


def unknown_fields(rt: ResourceType, obj: Any, kube: Release) -> list[str]:
    """The unknown fields of a built-in object at every depth, as the decoder names them
    (``spec.containers[0].foo``), by the OpenAPI schema of release ``kube``
    (:mod:`.released_schemas`); a value of the wrong type is :func:`type_mismatch`."""
    if not rt.builtin or not isinstance(obj, dict):
        return []
    return list(decode(kube, obj, rt.api_version, rt.kind).unknown)


def type_mismatch(rt: ResourceType, obj: Any, kube: Release) -> TypeMismatch | None:
    """The first value of a wrong JSON type in a built-in object (decoding stops there)."""
    if not rt.builtin or not isinstance(obj, dict):
        return None
    return decode(kube, obj, rt.api_version, rt.kind).mismatch


_STEP = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")


def drop_fields(obj: Json, paths: list[str]) -> None:
    """Remove the fields :func:`unknown_fields` found (what decoding does with them):
    ``spec.containers[0].foo`` steps through the list's first item."""
    for path in paths:
        steps = [m.group(1) if m.group(1) is not None else m.group(2) for m in _STEP.finditer(path)]
        parent: Any = obj
        for step in steps[:-1]:
            if isinstance(parent, list) and step.isdigit() and int(step) < len(parent):
                parent = parent[int(step)]
            elif isinstance(parent, dict):
                parent = parent.get(step)
            else:
                parent = None
        if isinstance(parent, dict) and steps:
            parent.pop(steps[-1], None)


def directive(value: str | None) -> str:
    """The ``fieldValidation`` query parameter: Warn when absent; 400 for anything else
    than Ignore, Strict or Warn."""
    if value is None or value == "":
        return "Warn"
    if value not in FIELD_VALIDATION:
        raise ApiStatusError(
            400,
            "BadRequest",
            f'fieldValidation: Unsupported value: "{value}": supported values: '
            + ", ".join(f'"{v}"' for v in FIELD_VALIDATION),
        )
    return value


def strict_error(rt: ResourceType, unknown: list[str], *, decoding: bool) -> ApiStatusError:
    """The refusal of a Strict request. A create or update body fails to decode (named
    by its kind); a patch fails after it is applied."""
    what = ", ".join(f'unknown field "{f}"' for f in unknown)
    message = f"strict decoding error: {what}"
    if decoding:
        message = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {message}'
    return ApiStatusError(400, "BadRequest", message)
