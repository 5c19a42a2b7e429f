"""Builders of Node and Pod JSON for tests, in the shape the API server returns them."""

from __future__ import annotations

from typing import Any


def node_json(
    name: str,
    cpu: str = "32",
    memory: str = "256Gi",
    gpus: int = 0,
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    pods: str = "110",
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod_json(
    name: str,
    node: str = "",
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    gpus: int = 0,
    *,
    namespace: str = "default",
    phase: str = "Running",
    annotations: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    req: dict[str, str] = {}
    if cpu is not None:
        req["cpu"] = cpu
    if memory is not None:
        req["memory"] = memory
    if gpus:
        req["nvidia.com/gpu"] = str(gpus)
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": req}}]}
    if node:
        body["nodeName"] = node
    body.update(spec or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
        "spec": body,
        "status": {"phase": phase if node else "Pending"},
    }
