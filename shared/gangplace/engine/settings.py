"""Engine settings, validated at the edge with pydantic."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gangplace.engine.model import DEFAULT_GPU_RESOURCES

__all__ = ["DEFAULT_GPU_MODEL_LABELS", "EngineConfig"]

# Node labels that name the GPU model, most specific first (NVIDIA GPU feature discovery,
# then corral's own, then the open-gpu-share convention of the Alibaba trace).
DEFAULT_GPU_MODEL_LABELS: tuple[str, ...] = (
    "nvidia.com/gpu.product",
    "corral.dev/gpu-model",
    "alibabacloud.com/gpu-card-model",
)


class EngineConfig(BaseModel):
    """How the engine reads a cluster.

    ``overcommit`` multiplies a resource's allocatable (``{"cpu": 1.5}``: nodes take 50%
    more CPU requests than they have). GPU resources are never overcommitted.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_resources: tuple[str, ...] = Field(default=DEFAULT_GPU_RESOURCES, min_length=1)
    gpu_model_labels: tuple[str, ...] = DEFAULT_GPU_MODEL_LABELS
    overcommit: dict[str, float] = Field(default_factory=dict)
    default_pods_per_node: int = Field(default=110, ge=1)

    @field_validator("overcommit")
    @classmethod
    def _positive(cls, v: dict[str, float]) -> dict[str, float]:
        for name, factor in v.items():
            if not factor > 0 or factor > 100:
                raise ValueError(
                    f"overcommit factor for {name!r} must be in (0, 100], got {factor}"
                )
        return v

    @model_validator(mode="after")
    def _never_gpus(self) -> EngineConfig:
        for name in self.overcommit:
            if name in self.gpu_resources and self.overcommit[name] != 1:
                raise ValueError(f"overcommit: GPU resource {name!r} cannot be overcommitted")
        return self
