"""Builders of Node and Pod JSON for the engine's tests: minimal objects (no capacity, no
owner), on the shared builders of :mod:`.objects`."""

from __future__ import annotations

from typing import Any

from tests.builders import objects as b


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
        alloc[b.GPU] = str(gpus)
    return b.node(
        name,
        alloc,
        labels=labels,
        taints=taints,
        unschedulable=unschedulable,
        capacity=False,
        ready=ready,
    )


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
    req = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    if gpus:
        req[b.GPU] = str(gpus)
    out = b.pod(
        name,
        namespace,
        requests=req,
        node=node,
        phase=phase if node else "Pending",
        container="c",
        annotations=annotations or {},
    )
    out["spec"].update(spec or {})
    return out
