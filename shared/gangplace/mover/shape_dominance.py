"""When one pod shape needs at least what another does: a proof that the lesser fits
nowhere, whatever the arrangement, carries over to the greater. The oracle skips the
checks such a proof answers; the planner skips the gangs an earlier failure answers."""

from __future__ import annotations

from gangplace.engine.feasibility import static_mask
from gangplace.engine.model import PodShape
from gangplace.engine.snapshot import Snapshot

__all__ = ["needs_at_least"]


def needs_at_least(snap: Snapshot, p: PodShape, q: PodShape) -> bool:
    """Whether a pod of shape ``p`` fits only where one of ``q`` would: it asks for at
    least as much of every resource and GPU, on no node that ``q`` may not use. Then
    "q fits nowhere, whatever the arrangement" carries over to p."""
    vp, _ = snap.vector(p)
    vq, _ = snap.vector(q)
    if not (vp >= vq).all():
        return False
    if q.is_gpu:
        if not p.is_gpu:
            return False
        if q.gpu_milli >= 1000:
            if p.gpu_milli < 1000 or p.gpu_count < q.gpu_count:
                return False
        elif p.gpu_milli < q.gpu_milli:
            return False
    mp, mq = static_mask(snap, p), static_mask(snap, q)
    return bool((mp <= mq).all())
