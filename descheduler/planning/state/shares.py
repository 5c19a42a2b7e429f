"""Queues and resources in the units queue shares are computed in: every GPU resource
counted as ``gpu``, in thousandths of a GPU, so that DRF compares GPUs of any model."""

from __future__ import annotations

from collections.abc import Mapping

from gangplace.engine import EngineConfig, Queue
from gangplace.engine.objects import QueueRecord

__all__ = ["GPU", "drf_queue", "drf_resources"]

# Queue and share figures count GPUs under one name, in thousandths of a GPU.
GPU = "gpu"


def drf_resources(res: Mapping[str, int], config: EngineConfig) -> dict[str, int]:
    """Resources in engine units with every GPU resource counted as ``gpu`` in
    thousandths of a GPU (the unit queue shares are computed in)."""
    out: dict[str, int] = {}
    for k, v in res.items():
        if k in config.gpu_resources:
            out[GPU] = out.get(GPU, 0) + v * 1000
        else:
            out[k] = v
    return out


def drf_queue(q: QueueRecord, config: EngineConfig) -> Queue:
    """A Volcano Queue as the planner's DRF sees it (capability in share units)."""
    return Queue(q.name, q.weight, drf_resources(q.capability, config), q.reclaimable)
