"""The relayout heuristic: what re-laying out every GPU-sharing pod of a cluster by
best-fit decreasing, on the GPUs whole-GPU pods leave, would leave idle (CPU and memory
ignored: an optimistic figure for migration, not a bound)."""

from __future__ import annotations

from gangplace.engine.snapshot import Snapshot

__all__ = ["lone_share_idle_pct", "relayout_idle_pct"]


def relayout_idle_pct(snap: Snapshot) -> float:
    """Idle GPU (% of capacity) if every sharing pod were laid out again best-fit
    decreasing on the GPUs that whole-GPU pods leave; the GPUs left over are counted as
    taken by whole-GPU pods (a replay's tail never runs out of them)."""
    cap = float(snap.gpu_total.sum()) * 1000
    if cap == 0:
        return 0.0
    shares = sorted(
        (p.shape.gpu_milli for p in snap.pods if p.node >= 0 and p.shape.is_shared_gpu),
        reverse=True,
    )
    whole = sum(
        p.shape.gpu_demand_milli for p in snap.pods if p.node >= 0 and not p.shape.is_shared_gpu
    )
    free_gpus = int(snap.gpu_total.sum()) - whole // 1000
    bins: list[int] = []  # room left on each GPU the shares use
    for d in shares:
        fit = [i for i, r in enumerate(bins) if r >= d]
        if fit:
            i = min(fit, key=lambda j: (bins[j], j))
            bins[i] -= d
        elif len(bins) < free_gpus:
            bins.append(1000 - d)
    return round(100.0 * sum(bins) / cap, 2)


def lone_share_idle_pct(snap: Snapshot, milli: int = 810) -> float:
    """Idle GPU (% of capacity) on GPUs that hold exactly one ``milli`` share and
    nothing else."""
    cap = float(snap.gpu_total.sum()) * 1000
    load: dict[tuple[int, int], list[int]] = {}
    for p in snap.pods:
        if p.node >= 0 and p.shape.is_shared_gpu:
            load.setdefault((p.node, p.gpus[0]), []).append(p.shape.gpu_milli)
    lone = sum(1000 - v[0] for v in load.values() if v == [milli])
    return round(100.0 * lone / cap, 2) if cap else 0.0
