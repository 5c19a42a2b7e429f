"""Small clusters for the measure and policy tests, built from records."""

from __future__ import annotations

from collections.abc import Sequence

from gangplace.engine import NodeRecord, PodShape, Snapshot

GIB = 1 << 30


def gpu_node(
    name: str, cpu: int, gpus: int, model: str = "T4", memory: int = 512 * GIB
) -> NodeRecord:
    return NodeRecord(
        name=name,
        allocatable={"cpu": cpu, "memory": memory, "pods": 110},
        gpu_resource="nvidia.com/gpu" if gpus else None,
        gpu_count=gpus,
        gpu_model=model if gpus else "",
    )


def cluster(nodes: Sequence[NodeRecord]) -> Snapshot:
    return Snapshot(nodes)


def shape(
    cpu: int, gpus: int = 0, milli: int = 1000, models: tuple[str, ...] = (), memory: int = GIB
) -> PodShape:
    return PodShape.of(
        {"cpu": cpu, "memory": memory},
        gpus=gpus,
        gpu_milli=milli if gpus else None,
        gpu_models=models,
    )


def set_free(snap: Snapshot, node: int, free_cpu: int, gpu_free: Sequence[int]) -> None:
    """Force a node's free CPU and per-device free milli-GPU (test set-up only)."""
    j = snap.res_index["cpu"]
    snap.used[node, j] = snap.alloc[node, j] - free_cpu
    for g, v in enumerate(gpu_free):
        snap.gpu_free[node, g] = v
    snap.node_version[node] += 1
