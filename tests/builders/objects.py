"""Kubernetes objects as the API server returns them: the one set of builders behind the
tests' helpers (``engine_json``, ``descheduler_cluster``, ``tests.kubeapi.objects``), the sample
scripts and the benchmarks.

Each builder writes the skeleton of its kind and only the fields it is given: an
optional argument left at None leaves its field out, so a caller decides exactly what
its objects carry (and, for the samples written unsorted, in which order).
Standard library only: scripts and benchmarks import it as ``tests.builders.objects``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Json = dict[str, Any]

__all__ = [
    "GPU",
    "VOLCANO_API",
    "Json",
    "gpu_share",
    "node",
    "owner_ref",
    "pdb",
    "pod",
    "podgroup",
    "priority_class",
    "queue",
]

GPU = "nvidia.com/gpu"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"


def node(
    name: str,
    allocatable: Mapping[str, str],
    *,
    labels: Mapping[str, str] | None = None,
    uid: str | None = None,
    taints: Sequence[Mapping[str, str]] | None = None,
    unschedulable: bool = False,
    capacity: bool = True,
    ready: bool = True,
) -> Json:
    """A Node; ``capacity``: the status also lists capacity (equal to allocatable)."""
    meta: Json = {"name": name, "labels": dict(labels or {})}
    if uid is not None:
        meta["uid"] = uid
    spec: Json = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    status: Json = {"allocatable": dict(allocatable)}
    if capacity:
        status["capacity"] = dict(allocatable)
    status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def owner_ref(kind: str, name: str, *, api: str | None = None, uid: str | None = None) -> Json:
    """A controller owner reference; by default at the apiVersion of the registered kind
    of that name (batch/v1 for a Job, apps/v1 for a ReplicaSet), else batch/v1."""
    if api is None:
        from gangplace.engine.kinds import KINDS  # the project's own registry

        api = next((k.api_version for k in KINDS.values() if k.kind == kind), "batch/v1")
    ref: Json = {"apiVersion": api, "kind": kind, "name": name}
    if uid is not None:
        ref["uid"] = uid
    ref["controller"] = True
    return ref


def gpu_share(milli: int) -> dict[str, str]:
    """The annotations of a pod that asks for a share of one GPU (the trace's form)."""
    return {"alibabacloud.com/gpu-milli": str(milli), "alibabacloud.com/gpu-count": "1"}


def pod(
    name: str,
    namespace: str = "default",
    *,
    requests: Mapping[str, str],
    limits: bool = False,
    node: str = "",
    phase: str | None = None,
    container: str = "main",
    image: str | None = None,
    scheduler: str | None = None,
    priority: int | None = None,
    priority_class: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    volumes: Sequence[Json] | None = None,
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    created: str | None = None,
    owner: Json | None = None,
    ready: bool | None = None,
) -> Json:
    """A pod of one container; bound to ``node`` when given. ``phase`` defaults to
    Running when bound, else Pending; ``limits``: limits equal to the requests;
    ``ready``: a Ready condition in the status; ``owner``: see :func:`owner_ref`."""
    meta: Json = {"name": name, "namespace": namespace}
    for key, value in (
        ("uid", uid),
        ("labels", None if labels is None else dict(labels)),
        ("annotations", None if annotations is None else dict(annotations)),
        ("creationTimestamp", created),
        ("ownerReferences", None if owner is None else [owner]),
    ):
        if value is not None:
            meta[key] = value
    resources: Json = {"requests": dict(requests)}
    if limits:
        resources["limits"] = dict(requests)
    main: Json = {"name": container}
    if image is not None:
        main["image"] = image
    main["resources"] = resources
    spec: Json = {}
    for key, value in (
        ("schedulerName", scheduler),
        ("priority", priority),
        ("containers", [main]),
        ("priorityClassName", priority_class),
        ("nodeSelector", None if node_selector is None else dict(node_selector)),
        ("nodeName", node or None),
        ("volumes", None if volumes is None else list(volumes)),
    ):
        if value is not None:
            spec[key] = value
    status: Json = {"phase": phase or ("Running" if node else "Pending")}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def podgroup(
    name: str,
    namespace: str = "default",
    *,
    min_member: int,
    api: str = VOLCANO_API,
    queue: str | None = None,
    min_resources: Mapping[str, str] | None = None,
    schedule_timeout: int | None = None,
    uid: str | None = None,
    created: str | None = None,
    annotations: Mapping[str, str] | None = None,
    phase: str | None = None,
    conditions: Sequence[Json] | None = None,
) -> Json:
    """A PodGroup of Volcano (default) or scheduler-plugins (``api``); a status only when
    ``phase`` or ``conditions`` is given."""
    meta: Json = {"name": name, "namespace": namespace}
    for key, value in (
        ("uid", uid),
        ("creationTimestamp", created),
        ("annotations", None if annotations is None else dict(annotations)),
    ):
        if value is not None:
            meta[key] = value
    spec: Json = {"minMember": min_member}
    for key, value in (
        ("queue", queue),
        ("minResources", None if min_resources is None else dict(min_resources)),
        ("scheduleTimeoutSeconds", schedule_timeout),
    ):
        if value is not None:
            spec[key] = value
    out: Json = {"apiVersion": api, "kind": "PodGroup", "metadata": meta, "spec": spec}
    if phase is not None or conditions:
        status: Json = {"phase": phase} if phase is not None else {}
        if conditions:
            status["conditions"] = list(conditions)
        out["status"] = status
    return out


def queue(
    name: str,
    weight: int = 1,
    *,
    reclaimable: bool = True,
    capability: Mapping[str, str] | None = None,
    state: str | None = None,
) -> Json:
    """A Volcano Queue; a status only when ``state`` is given."""
    spec: Json = {"weight": weight, "reclaimable": reclaimable}
    if capability:
        spec["capability"] = dict(capability)
    out: Json = {"apiVersion": VOLCANO_API, "kind": "Queue", "metadata": {"name": name}}
    out["spec"] = spec
    if state is not None:
        out["status"] = {"state": state}
    return out


def pdb(
    name: str,
    namespace: str = "default",
    *,
    match_labels: Mapping[str, str] | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    generation: int | None = None,
    status: Json | None = None,
) -> Json:
    """A policy/v1 PodDisruptionBudget; ``status`` as the disruption controller wrote it."""
    meta: Json = {"name": name, "namespace": namespace}
    if generation is not None:
        meta["generation"] = generation
    spec: Json = {"selector": {"matchLabels": dict(match_labels or {})}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    out: Json = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta}
    out["spec"] = spec
    if status is not None:
        out["status"] = dict(status)
    return out


def priority_class(name: str, value: int, *, global_default: bool | None = None) -> Json:
    out: Json = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    if global_default is not None:
        out["globalDefault"] = global_default
    return out


# The podFailurePolicy rule that keeps an eviction from counting against backoffLimit.
IGNORE_DISRUPTION = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}


def job(
    name: str,
    namespace: str = "default",
    *,
    backoff_limit: int = 6,
    parallelism: int = 1,
    suspend: bool = False,
    ignore_disruption: bool = False,
    failed: int = 0,
    uid: str | None = None,
    created: str | None = None,
    annotations: dict[str, str] | None = None,
    owner: Json | None = None,
) -> Json:
    """A batch/v1 Job as the API returns it (the smallest pod template the API server
    accepts: the descheduler reads only the Job's own fields). ``ignore_disruption``: its
    podFailurePolicy ignores the DisruptionTarget condition an eviction sets."""
    meta: Json = {"name": name, "namespace": namespace}
    if uid is not None:
        meta["uid"] = uid
    if created is not None:
        meta["creationTimestamp"] = created
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner is not None:
        meta["ownerReferences"] = [owner]
    meta["resourceVersion"] = "1"
    spec: Json = {
        "backoffLimit": backoff_limit,
        "parallelism": parallelism,
        "completions": parallelism,
        "suspend": suspend,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}],
            }
        },
    }
    if ignore_disruption:
        spec["podFailurePolicy"] = {"rules": [dict(IGNORE_DISRUPTION)]}
    status: Json = {"active": 0 if suspend else parallelism}
    if failed:
        status["failed"] = failed
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }
