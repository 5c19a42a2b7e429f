"""What the API server adds to a new pod: defaulted spec fields, the admission plugins'
additions (ServiceAccount token volume, default tolerations, priority) and the status it
starts with (phase Pending, qosClass), as a v1.28 server returns them on create."""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable
from typing import Any

Json = dict[str, Any]

__all__ = ["default_pod", "qos_class"]

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
