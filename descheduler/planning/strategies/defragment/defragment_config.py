"""The ``defragment`` section of the descheduler config: its keys, defaults and checks."""

from __future__ import annotations

from pydantic import Field

from descheduler.config_section import Section

__all__ = ["DefragmentConfig"]


class DefragmentConfig(Section):
    """Moves that lower FGD fragmentation (and GPUs stranded for want of CPU) when no
    gang is waiting. A move's gain is the fall, on the nodes it touches, of F(M) plus
    stranding_weight x the idle GPU beyond what each node's free CPU can drive."""

    enabled: bool = Field(
        default=False,
        description="defragment when no gang waits (off by default: it throws work away "
        "and starts nothing)",
    )
    max_gpu_hours_at_risk: float | None = Field(
        default=1.0,
        ge=0,
        description="a unit moved to defragment has at most this many GPU-hours of work at "
        "risk (moves.max_gpu_hours_at_risk caps it too); null: only that cap",
    )
    min_gain_gpus: float = Field(
        default=0.5,
        ge=0,
        description="each move must gain at least this many GPUs: the fall of F(M) plus "
        "stranding_weight x the fall of CPU-stranded GPU",
    )
    min_total_gain_gpus: float = Field(
        default=1.0, ge=0, description="the plan's moves together must gain this many GPUs"
    )
    max_candidates: int = Field(
        default=200, ge=1, description="victim gangs simulated per run, most fragmented first"
    )
    max_pods_per_move: int = Field(
        default=4,
        ge=1,
        description="only gangs this small are moved whole; of larger gangs, single members "
        "above minAvailable",
    )
    stranding_weight: float = Field(
        default=1.0,
        ge=0,
        description="weight of CPU-stranded GPU in a move's gain (0: FGD fragmentation "
        "alone; above 0 CPU-only pods are candidates too)",
    )
    workload_coverage: float = Field(
        default=0.95, gt=0, le=1, description="share of pods the target shapes must cover"
    )
