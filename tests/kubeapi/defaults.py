"""What the API server adds to a new object, as a v1.28 server returns it on create: for a
pod, defaulted spec fields, the admission plugins' additions (ServiceAccount token volume,
default tolerations, priority) and the status it starts with (phase Pending, qosClass); for
a Job, its generated selector and labels and the defaulted spec, per release (the Job
fields of a feature gate that is off are dropped, :mod:`.gates`).

:func:`default_job_fields` is the Job's defaulting function alone (``SetDefaults_Job``),
which the API server runs when it decodes a request and again after each mutating
webhook's patch (:func:`redefault`)."""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable
from typing import Any, Final

from tests.kubeapi.gates import enabled
from tests.kubeapi.versions import Release

Json = dict[str, Any]

__all__ = [
    "default_job",
    "default_job_fields",
    "default_pod",
    "drop_disabled_job_fields",
    "qos_class",
    "redefault",
]

_MAX_INT32: Final = 2**31 - 1
# The Job fields of a gate: dropped on create while the gate is off, and on update unless
# the old Job has them (pkg/registry/batch/job/strategy.go dropDisabledFields).
_GATED_JOB_FIELDS: Final = (
    ("podReplacementPolicy", "JobPodReplacementPolicy"),
    ("backoffLimitPerIndex", "JobBackoffLimitPerIndex"),
    ("maxFailedIndexes", "JobBackoffLimitPerIndex"),
    ("managedBy", "JobManagedBy"),
)

_TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
_SUFFIX = string.ascii_lowercase + string.digits


def _suffix() -> str:
    return "".join(secrets.choice(_SUFFIX) for _ in range(5))


def qos_class(spec: Json) -> str:
    """Guaranteed, Burstable or BestEffort, from the containers' requests and limits."""
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or str(req.get(r, lim[r])) != str(lim[r]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _pull_policy(image: str) -> str:
    tail = image.rsplit("/", 1)[-1]
    if "@" in tail:
        return "IfNotPresent"
    return "Always" if ":" not in tail or tail.endswith(":latest") else "IfNotPresent"


def default_pod(obj: Json, priority_of: Callable[[str | None], int | None]) -> None:
    """Default ``obj`` (a new pod) in place. ``priority_of(name)`` is the value of a
    PriorityClass (None: unknown); ``priority_of(None)`` the global default's, if any."""
    spec = obj.setdefault("spec", {})
    sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    volumes = spec.setdefault("volumes", [])
    mount_token = spec.get("automountServiceAccountToken") is not False and not any(
        m.get("mountPath") == _TOKEN_MOUNT
        for c in spec.get("containers") or ()
        for m in c.get("volumeMounts") or ()
    )
    token_volume = f"kube-api-access-{_suffix()}"
    if mount_token:
        volumes.append(
            {
                "name": token_volume,
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {
                                            "apiVersion": "v1",
                                            "fieldPath": "metadata.namespace",
                                        },
                                    }
                                ]
                            }
                        },
                    ],
                    "defaultMode": 420,
                },
            }
        )
    if not volumes:
        del spec["volumes"]
    for kind in ("initContainers", "containers"):
        for c in spec.get(kind) or ():
            c.setdefault("resources", {})
            if mount_token and kind == "containers":
                c.setdefault("volumeMounts", []).append(
                    {"name": token_volume, "readOnly": True, "mountPath": _TOKEN_MOUNT}
                )
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("imagePullPolicy", _pull_policy(str(c.get("image", ""))))
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec["serviceAccountName"] = sa
    spec["serviceAccount"] = sa
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    tolerations = spec.setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(
            t.get("key") == key and t.get("effect") in (None, "NoExecute") for t in tolerations
        ):
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )
    if "priority" not in spec:
        value = priority_of(spec.get("priorityClassName"))
        if value is None and spec.get("priorityClassName") is None:
            value = priority_of(None)
        spec["priority"] = value if value is not None else 0
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", qos_class(spec))


def _default_pod_template_spec(spec: Json) -> None:
    """What defaulting (not admission) adds to a pod spec in a template."""
    for kind in ("initContainers", "containers"):
        for c in spec.get(kind) or ():
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("imagePullPolicy", _pull_policy(str(c.get("image", ""))))
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")


def _default_failure_policy(spec: Json) -> None:
    """podFailurePolicy rules as stored: onExitCodes null when unset, a pod condition's
    status True when unset."""
    policy = spec.get("podFailurePolicy")
    if not isinstance(policy, dict):
        return
    for rule in policy.get("rules") or ():
        rule.setdefault("onExitCodes", None)
        for cond in rule.get("onPodConditions") or ():
            cond.setdefault("status", "True")


def default_job_fields(obj: Json, kube: Release) -> None:
    """``SetDefaults_Job`` of ``pkg/apis/batch/v1/defaults.go`` (v1.28-v1.37) and the pod
    template's defaults, on a Job in place; only fields still unset change.
    parallelism and completions (both 1 when both are unset), backoffLimit (6, or the
    largest int32 with a backoffLimitPerIndex), completionMode NonIndexed, suspend false,
    a podFailurePolicy pod condition's status True, and since v1.29 (JobPodReplacementPolicy
    beta) podReplacementPolicy: ``Failed`` with a podFailurePolicy, else
    ``TerminatingOrFailed``."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = _MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6
    if spec.get("completionMode") is None:
        spec["completionMode"] = "NonIndexed"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    _default_failure_policy(spec)
    if enabled("JobPodReplacementPolicy", kube) and spec.get("podReplacementPolicy") is None:
        failed = spec.get("podFailurePolicy") is not None
        spec["podReplacementPolicy"] = "Failed" if failed else "TerminatingOrFailed"
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        _default_pod_template_spec(template["spec"])


def drop_disabled_job_fields(spec: Json, kube: Release, old: Json | None = None) -> None:
    """The fields of a gate that is off on ``kube`` go, unless the old spec (on update)
    has them already: ``dropDisabledFields`` of ``pkg/registry/batch/job/strategy.go``
    (and ``managedBy`` is no field of batch/v1 before v1.30: decoding drops it)."""
    for key, gate in _GATED_JOB_FIELDS:
        if key in spec and not enabled(gate, kube) and (old is None or old.get(key) is None):
            del spec[key]


def redefault(group: str, plural: str, obj: Json, kube: Release) -> None:
    """What the API server's defaulter does to an object a mutating webhook patched
    (``staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/
    dispatcher.go``, ``o.GetObjectDefaulter().Default`` after the patch, every
    release): unset fields get their defaults again, set ones stay. Modelled for Jobs,
    the kind whose defaults depend on fields a webhook adds (podReplacementPolicy
    follows podFailurePolicy); pods are defaulted when stored."""
    if (group, plural) == ("batch", "jobs"):
        default_job_fields(obj, kube)


def default_job(obj: Json, kube: Release) -> None:
    """Default ``obj`` (a new batch/v1 Job, its uid set) in place: the generated selector
    and the labels that go with it, :func:`default_job_fields`, the fields of gates that
    are off dropped, an empty status."""
    meta = obj["metadata"]
    spec = obj.setdefault("spec", {})
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    tmeta.setdefault("creationTimestamp", None)
    if not spec.get("manualSelector"):
        uid, name = meta["uid"], meta["name"]
        generated = {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **generated}
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    if not meta.get("labels") and tmeta.get("labels"):
        meta["labels"] = dict(tmeta["labels"])
    template.setdefault("spec", {})
    default_job_fields(obj, kube)
    drop_disabled_job_fields(spec, kube)
    obj["status"] = {}
