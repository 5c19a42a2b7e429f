"""Builders of the objects a descheduler test cluster needs, as the API returns them:
GPU nodes, controller-owned pods in gangs, PodGroups, Queues, PDBs and PriorityClasses."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
EARLIER = "2026-12-02T08:00:00Z"  # four hours before NOW


def gpu_node(
    name: str,
    gpus: int = 8,
    *,
    cpu: str = "96",
    memory: str = "1024Gi",
    model: str = "A100",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    node_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if gpus:
        node_labels["nvidia.com/gpu.product"] = model
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "allocatable": alloc,
            "capacity": dict(alloc),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    node: str = "",
    gpus: int = 0,
    *,
    namespace: str = "default",
    gang: str | None = None,
    cpu: str = "4",
    memory: str = "16Gi",
    owner_kind: str = "Job",
    owner: str | None = None,
    created: str = EARLIER,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    priority: int | None = None,
    priority_class: str | None = None,
    volumes: list[dict[str, Any]] | None = None,
    phase: str | None = None,
    gpu_milli: int | None = None,
) -> dict[str, Any]:
    """A pod owned by a controller (``owner_kind=""`` for none); ``gang`` ties it to a
    Volcano PodGroup of that name."""
    req: dict[str, str] = {"cpu": cpu, "memory": memory}
    ann = dict(annotations or {})
    if gpus and gpu_milli is None:
        req["nvidia.com/gpu"] = str(gpus)
    elif gpu_milli is not None:
        ann["alibabacloud.com/gpu-milli"] = str(gpu_milli)
        ann["alibabacloud.com/gpu-count"] = "1"
    if gang:
        ann["scheduling.k8s.io/group-name"] = gang
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "labels": dict(labels or {}),
        "annotations": ann,
        "creationTimestamp": created,
    }
    if owner_kind:
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": owner_kind,
                "name": owner or gang or name,
                "uid": f"uid-owner-{owner or gang or name}",
                "controller": True,
            }
        ]
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "main", "resources": {"requests": req, "limits": dict(req)}}],
    }
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    if volumes:
        spec["volumes"] = volumes
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase or ("Running" if node else "Pending")},
    }


def podgroup(
    name: str,
    min_member: int,
    *,
    namespace: str = "default",
    phase: str = "Running",
    queue: str | None = None,
    annotations: dict[str, str] | None = None,
    created: str = EARLIER,
    api: str = "scheduling.volcano.sh/v1beta1",
    min_resources: dict[str, str] | None = None,
    conditions: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if queue:
        spec["queue"] = queue
    if min_resources:
        spec["minResources"] = min_resources
    status: dict[str, Any] = {"phase": phase}
    if conditions:
        status["conditions"] = conditions
    return {
        "apiVersion": api,
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": dict(annotations or {}),
            "creationTimestamp": created,
            "uid": f"uid-pg-{namespace}-{name}",
        },
        "spec": spec,
        "status": status,
    }


def gang(
    name: str,
    nodes: list[str],
    gpus: int,
    *,
    min_member: int | None = None,
    namespace: str = "default",
    phase: str | None = None,
    queue: str | None = None,
    pending: int = 0,
    pg_annotations: dict[str, str] | None = None,
    created: str = EARLIER,
    **pod_kw: Any,
) -> list[dict[str, Any]]:
    """A PodGroup and its pods: one running pod per entry of ``nodes`` (a node may
    repeat), and ``pending`` more waiting."""
    size = len(nodes) + pending
    items = [
        podgroup(
            name,
            size if min_member is None else min_member,
            namespace=namespace,
            phase=phase or ("Running" if nodes else "Pending"),
            queue=queue,
            annotations=pg_annotations,
            created=created,
        )
    ]
    ann = {"scheduling.volcano.sh/queue-name": queue} if queue else {}
    ann.update(pod_kw.pop("annotations", {}))
    for i, n in enumerate([*nodes, *([""] * pending)]):
        items.append(
            pod(
                f"{name}-{i}",
                n,
                gpus,
                namespace=namespace,
                gang=name,
                created=created,
                annotations=ann,
                **pod_kw,
            )
        )
    return items


def queue(
    name: str,
    weight: int = 1,
    *,
    reclaimable: bool = True,
    capability: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight, "reclaimable": reclaimable}
    if capability:
        spec["capability"] = capability
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def pdb(
    name: str, labels: dict[str, str], allowed: int, *, namespace: str = "default"
) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {"selector": {"matchLabels": labels}, "maxUnavailable": 1},
        "status": {"disruptionsAllowed": allowed, "observedGeneration": 1},
    }


def as_list(*groups: Any) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for g in groups:
        items.extend(g if isinstance(g, list) else [g])
    return {"apiVersion": "v1", "kind": "List", "items": items}
