"""Builders of the objects a descheduler test cluster needs, as the API returns them:
GPU nodes, controller-owned pods in gangs, PodGroups, Queues and PDBs (on the shared
builders of :mod:`.objects`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.builders import objects as b

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
# The priority of a gang built waiting whole (no member running), unless told.
WAITING_PRIORITY = 1000
EARLIER = "2026-12-02T08:00:00Z"  # four hours before NOW
# When a bound pod's run began (status.startTime), unless told: twenty minutes before
# NOW, so a move of it loses little work (gangplace.engine.checkpoints).
STARTED = "2026-12-02T11:40:00Z"


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
    node_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if gpus:
        alloc[b.GPU] = str(gpus)
        node_labels["nvidia.com/gpu.product"] = model
    return b.node(name, alloc, labels=node_labels, taints=taints)


def pod(
    name: str,
    node: str = "",
    gpus: int = 0,
    *,
    namespace: str = "default",
    gang: str | None = None,
    cpu: str = "4",
    memory: str = "16Gi",
    owner_kind: str = "ReplicaSet",
    owner: str | None = None,
    created: str = EARLIER,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    priority: int | None = None,
    priority_class: str | None = None,
    volumes: list[dict[str, Any]] | None = None,
    phase: str | None = None,
    gpu_milli: int | None = None,
    started: str | None = STARTED,
) -> dict[str, Any]:
    """A pod owned by a controller (``owner_kind=""`` for none; by default a ReplicaSet,
    which makes an evicted pod again: see :func:`job` for Jobs); ``gang`` ties it to a
    Volcano PodGroup of that name; ``started``: its ``status.startTime`` when it runs
    (None: none, so its creation counts as its start)."""
    req: dict[str, str] = {"cpu": cpu, "memory": memory}
    ann = dict(annotations or {})
    if gpus and gpu_milli is None:
        req[b.GPU] = str(gpus)
    elif gpu_milli is not None:
        ann.update(b.gpu_share(gpu_milli))
    if gang:
        ann["scheduling.k8s.io/group-name"] = gang
    controller = owner or gang or name
    out = b.pod(
        name,
        namespace,
        requests=req,
        limits=True,
        node=node,
        phase=phase,
        scheduler="volcano",
        priority=priority,
        priority_class=priority_class or None,
        volumes=volumes or None,
        uid=f"uid-{namespace}-{name}",
        labels=labels or {},
        annotations=ann,
        created=created,
        owner=b.owner_ref(owner_kind, controller, uid=f"uid-owner-{controller}")
        if owner_kind
        else None,
    )
    if node and started and out["status"]["phase"] == "Running":
        out["status"]["startTime"] = started
    return out


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
    return b.podgroup(
        name,
        namespace,
        min_member=min_member,
        api=api,
        queue=queue or None,
        min_resources=min_resources or None,
        uid=f"uid-pg-{namespace}-{name}",
        created=created,
        annotations=annotations or {},
        phase=phase,
        conditions=conditions,
    )


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
    if not nodes and "priority" not in pod_kw and "priority_class" not in pod_kw:
        # A gang that waits whole outranks the running ones (priority 0), so that room
        # may be made for it under either victim_priority (the default moves gangs of
        # equal priority only as consolidations); tests of equal priorities say so.
        pod_kw["priority"] = WAITING_PRIORITY
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
    return b.queue(name, weight, reclaimable=reclaimable, capability=capability)


def pdb(
    name: str, labels: dict[str, str], allowed: int, *, namespace: str = "default"
) -> dict[str, Any]:
    return b.pdb(
        name,
        namespace,
        match_labels=labels,
        max_unavailable=1,
        generation=1,
        status={"disruptionsAllowed": allowed, "observedGeneration": 1},
    )


def as_list(*groups: Any) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for g in groups:
        items.extend(g if isinstance(g, list) else [g])
    return {"apiVersion": "v1", "kind": "List", "items": items}
