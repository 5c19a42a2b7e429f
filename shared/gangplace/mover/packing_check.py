"""Whether a plan just carried out left a real packing: the one check every plan that
moves pods (the mover's neighbourhood plans, the oracle's exact plans) passes before
it is kept."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gangplace.engine.feasibility import static_mask
from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.snapshot import Snapshot

__all__ = ["verify_nodes"]


def verify_nodes(
    snap: Snapshot,
    nodes: Iterable[int],
    what: str,
    moved: Callable[[PodRecord], bool] | None = None,
) -> None:
    """Every one of ``nodes`` within its allocatable and its GPUs, and each pod on a node
    its shape may use (the static filters): ``what`` (a plan just carried out) left a
    real packing, or this raises RuntimeError naming the node or pod. ``moved``: only the
    pods it says the plan placed are held to the filters; a pod that stayed where it was
    may run where no pod is placed now (a node cordoned since, a taint added)."""
    for n in nodes:
        if (snap.used[n] > snap.alloc[n]).any():
            raise RuntimeError(f"node {snap.node_names[n]} overcommitted by {what}")
        if (snap.gpu_free[n, : int(snap.gpu_total[n])] < 0).any():
            raise RuntimeError(f"node {snap.node_names[n]}: a GPU overcommitted by {what}")
        for p in snap.pods_on(n):
            if (moved is None or moved(p)) and not static_mask(snap, p.shape)[n]:
                raise RuntimeError(f"pod {p.key} placed by {what} on a node its shape may not use")
