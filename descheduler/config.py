"""The descheduler's settings: one YAML file, validated with pydantic.

Every key has a default, so an empty file (or none) is a valid configuration. Unknown
keys are refused, and every error names the key that is wrong. Durations are written
as Go durations (``"30m"``, ``"1h"``) or seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from gangplace.config_errors import (
    ConfigError,
    KeyedValueError,
    checked_kinds,
    describe_validation_error,
)
from gangplace.engine import EngineConfig
from gangplace.engine.kinds import Kinds, WorkloadKind, with_added
from gangplace.engine.policies import DEFAULT_POLICY, check_policy
from gangplace.engine.timeparse import format_duration
from gangplace.yamlfile import YamlFileError, read_yaml
from pydantic import BaseModel, Field, ValidationError, field_validator

from descheduler.config_section import Duration, Section
from descheduler.planning.strategies.capacity_room.capacity_room_config import (
    CapacityRoomConfig,
)
from descheduler.planning.strategies.defragment.defragment_config import DefragmentConfig
from descheduler.planning.strategies.exact_moves.exact_moves_config import ExactMovesConfig
from descheduler.planning.strategies.make_room.make_room_config import MakeRoomConfig
from descheduler.planning.strategies.stale_gangs.stale_gangs_config import StaleGangsConfig

__all__ = [
    "CapacityRoomConfig",
    "ConfigError",
    "CostWeights",
    "DefragmentConfig",
    "DeschedulerConfig",
    "EvictionRules",
    "LimitSettings",
    "MakeRoomConfig",
    "MovesConfig",
    "RunnerConfig",
    "SchedulingConfig",
    "StaleGangsConfig",
    "load_config",
    "parse_config",
    "render_defaults",
]


class SchedulingConfig(Section):
    """How the simulated scheduler places pods: this should match the cluster's
    scheduler, or the plan predicts placements the scheduler will not make."""

    policy: str = Field(
        default=DEFAULT_POLICY,
        description="node scoring, one of the placement policies: binpack (Volcano "
        "binpack), spread (LeastAllocated), fgd (least growth of FGD fragmentation), "
        "corral, or the FGD paper's dotprod, gpuclustering, gpupacking or bestfit",
    )
    weights: dict[str, float] = Field(
        default_factory=lambda: {"cpu": 0.7, "memory": 0.3, "gpu": 1.0},
        description="binpack/spread weights per resource; 'gpu' weighs per-device GPU use",
    )
    fewest_nodes: bool = Field(default=True, description="keep a gang on as few nodes as it can")
    topology_key: str | None = Field(
        default=None, description="node label to keep each gang within (a rack or zone)"
    )

    @field_validator("policy")
    @classmethod
    def _policy(cls, v: str) -> str:
        try:
            return check_policy(v)
        except ValueError as e:
            raise KeyedValueError(f"scheduling.policy: {e}") from None

    @field_validator("weights")
    @classmethod
    def _non_negative(cls, v: dict[str, float]) -> dict[str, float]:
        for k, w in v.items():
            if w < 0:
                raise ValueError(f"weight for {k!r} must be >= 0, got {w}")
        if not any(w > 0 for w in v.values()):
            raise ValueError("at least one weight must be > 0")
        return v


class EvictionRules(Section):
    """Which pods are never evicted (beyond the fixed rules: DaemonSet pods, mirror
    pods, pods without a controller, ``corral.dev/evictable: "false"``,
    ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``,
    ``descheduler.alpha.kubernetes.io/prefer-no-eviction`` and
    ``kai.scheduler/safe-to-consolidate: "false"``, as an annotation or a label)."""

    excluded_namespaces: list[str] = Field(
        default_factory=lambda: ["kube-system"], description="never evict pods here"
    )
    included_namespaces: list[str] = Field(
        default_factory=list, description="when not empty, evict only pods in these"
    )
    evict_local_storage_pods: bool = Field(
        default=False, description="allow evicting pods with emptyDir or hostPath volumes"
    )
    protected_priority_classes: list[str] = Field(
        default_factory=lambda: ["system-cluster-critical", "system-node-critical"],
        description="priority classes whose pods are never evicted",
    )
    protected_priority: int = Field(
        default=2_000_000_000, description="pods at or above this priority are never evicted"
    )
    cooldown: Duration = Field(
        default=3600.0,
        description="a gang moved less than this long ago is not moved again "
        "(remembered in the corral.dev/last-moved annotation)",
    )
    min_pod_age: Duration = Field(default=0.0, description="pods younger than this are not evicted")
    victim_priority: Literal["LowerPriority", "LowerOrEqualPriority"] = Field(
        default="LowerOrEqualPriority",
        description="a gang is moved for a waiting gang only if its priority is lower "
        "(LowerPriority), or not higher (LowerOrEqualPriority; an equal one only when the "
        "plan places it again at once)",
    )


class LimitSettings(Section):
    """Caps on one run; ``null`` means no cap. A gang is never split by a limit: a
    move that does not fit the remaining budget whole is not planned. A run cut short
    (a crash, SIGTERM, a lost Lease) shares its caps with the next run that starts
    within ``runner.interval``: what it evicted counts as that run's."""

    max_evictions_per_run: int | None = Field(default=50, ge=0, description="pods evicted")
    max_evictions_per_node: int | None = Field(
        default=16, ge=0, description="pods evicted from any one node"
    )
    max_evictions_per_namespace: int | None = Field(
        default=25, ge=0, description="pods evicted from any one namespace"
    )
    max_evictions_per_queue: int | None = Field(
        default=25, ge=0, description="pods evicted from the gangs of any one queue"
    )
    max_gpus_disrupted_per_run: float | None = Field(
        default=64.0, ge=0, description="GPUs held by evicted pods, summed over the run"
    )


class MovesConfig(Section):
    """How a gang is moved, chosen per top-level owner: a workload with a suspend switch
    (batch/v1 Job, JobSet, Kubeflow jobs, RayJob) is suspended and resumed; pods whose
    owner makes them again without loss (ReplicaSet, StatefulSet; a Job whose
    podFailurePolicy ignores DisruptionTarget, or whose backoffLimit leaves room for
    every member evicted) are evicted; anything else is not moved."""

    suspend: bool = Field(
        default=True,
        description="suspend and resume workloads that have a suspend switch (false: "
        "evict their pods where that is safe, else leave them)",
    )
    resume_after: Duration = Field(
        default=600.0,
        description="resume a workload corral suspended after this long, even if the gang "
        "it made room for is not bound yet",
    )
    resume_wait: Duration = Field(
        default=30.0,
        description="run: how long to wait for the gangs room was made for to be bound, "
        "resuming the workloads suspended for them; later runs resume the rest",
    )
    retry_deadline: Duration = Field(
        default=60.0,
        description="a gang whose eviction was refused after some members went is retried "
        "until this deadline, then reported as partially moved",
    )
    suspend_grace: Duration = Field(
        default=60.0,
        description="after suspending a gang's workloads, how long to wait for its pods to "
        "go (deleted, or terminating); if they do not, the suspend is rolled back and the "
        "workload marked never to be suspended again (0: not checked)",
    )
    max_gpu_hours_at_risk: float | None = Field(
        default=8.0,
        ge=0,
        description="a workload whose work at risk -- GPUs x the time since its last "
        "checkpoint (corral.dev/last-checkpoint, corral.dev/checkpoint-interval; without "
        "either, since it started) -- is above this many GPU-hours is never moved; null: "
        "no cap",
    )


class CostWeights(Section):
    """What a move costs: least cost first. Cost = pod * pods moved + gpu_hour *
    GPU-hours of work at risk (what the moved pods did since their last checkpoint, lost
    on restart) + priority_per_1000 * priority / 1000 per pod."""

    pod: float = Field(default=1.0, ge=0, description="cost of each pod moved")
    gpu_hour: float = Field(
        default=1.0,
        ge=0,
        description="cost of each GPU-hour of work at risk in the moved pods (done since "
        "their last checkpoint)",
    )
    priority_per_1000: float = Field(
        default=0.1, ge=0, description="cost per pod of each 1000 of its priority"
    )


class RunnerConfig(Section):
    """``corral-descheduler run``."""

    interval: Duration = Field(
        default=600.0,
        gt=0,
        description="time between runs (--interval); also how long a run cut short "
        "passes its limits on to the next",
    )
    dry_run: bool = Field(default=False, description="plan and report, evict nothing")
    only_schedulable_gangs: bool = Field(
        default=True,
        description="evict for a waiting gang only when the scheduler can place it now: its "
        "pods exist and are pending, and a Volcano PodGroup is Inqueue (Volcano places only "
        "enqueued gangs); otherwise the room would go to other pods. A gang known only by "
        "its PodGroup is planned for, not acted on",
    )


class DeschedulerConfig(Section):
    engine: EngineConfig = Field(
        default_factory=EngineConfig, description="how the engine reads the cluster"
    )
    scheduling: SchedulingConfig = Field(default_factory=SchedulingConfig)
    eviction: EvictionRules = Field(default_factory=EvictionRules)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    cost: CostWeights = Field(default_factory=CostWeights)
    moves: MovesConfig = Field(default_factory=MovesConfig)
    make_room: MakeRoomConfig = Field(default_factory=MakeRoomConfig)
    capacity_room: CapacityRoomConfig = Field(default_factory=CapacityRoomConfig)
    defragment: DefragmentConfig = Field(default_factory=DefragmentConfig)
    exact_moves: ExactMovesConfig = Field(default_factory=ExactMovesConfig)
    stale_gangs: StaleGangsConfig = Field(default_factory=StaleGangsConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    queue_default: str = Field(default="default", description="queue of gangs that name none")
    workloads: tuple[WorkloadKind, ...] = Field(
        default=(),
        description="workload kinds beside the built-in ones (docs/configuration.md)",
    )

    @field_validator("workloads")
    @classmethod
    def _added(cls, v: tuple[WorkloadKind, ...]) -> tuple[WorkloadKind, ...]:
        return checked_kinds(v)

    @property
    def kinds(self) -> Kinds:
        """The registry of kinds extended by ``workloads`` (what the informers, the
        state, the move methods and the suspender read)."""
        return with_added(self.workloads)


def parse_config(raw: Any, where: str = "config") -> DeschedulerConfig:
    """A config from parsed YAML (``None`` for an empty file)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping of keys at the top level")
    try:
        return DeschedulerConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(describe_validation_error(e, where, DeschedulerConfig)) from None


def load_config(path: str | Path | None) -> DeschedulerConfig:
    """The config in YAML file ``path``, or the defaults when ``path`` is None."""
    if path is None:
        return DeschedulerConfig()
    try:
        raw = read_yaml(path)
    except YamlFileError as e:
        raise ConfigError(f"config {path}: {e}") from None
    return parse_config(raw, f"config {path}")


def _yaml_value(v: Any) -> str:
    text = yaml.safe_dump(v, default_flow_style=True, width=1000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _doc(model: type[BaseModel]) -> list[str]:
    text = (model.__doc__ or "").strip()
    return [" ".join(p.split()) for p in text.split("\n\n") if p.strip()] if text else []


def render_defaults() -> str:
    """Every key with its default and what it means, as a YAML file that loads back
    to the defaults (``corral-descheduler config``)."""
    lines = ["# corral-descheduler configuration: every key, at its default."]
    defaults = DeschedulerConfig()
    for name, field in DeschedulerConfig.model_fields.items():
        value = getattr(defaults, name)
        lines.append("")
        if isinstance(value, BaseModel):
            lines.extend(f"# {d}" for d in _doc(type(value)))
            lines.append(f"{name}:")
            for key, sub in type(value).model_fields.items():
                doc = sub.description or _ENGINE_KEYS.get(key)
                if doc:
                    lines.append(f"  # {doc}")
                raw = getattr(value, key)
                dumped = value.model_dump(mode="json")[key] if raw is not None else None
                if key in _DURATIONS:
                    dumped = format_duration(float(raw))
                lines.append(f"  {key}: {_yaml_value(dumped)}")
        else:
            if field.description:
                lines.append(f"# {field.description}")
            lines.append(f"{name}: {_yaml_value(value)}")
    return "\n".join(lines) + "\n"


# The engine's own settings, described here for the reference.
_ENGINE_KEYS = {
    "gpu_resources": "extended resources counted as whole GPUs, per device",
    "gpu_model_labels": "node labels that name the GPU model, most specific first",
    "overcommit": "per-resource factor on allocatable, e.g. {cpu: 1.5}; never GPUs",
    "default_pods_per_node": "pods a node takes when it does not say",
}

# Keys written back as Go durations.
_DURATIONS = frozenset(
    {
        "after",
        "cooldown",
        "min_pod_age",
        "default_timeout",
        "hold_for",
        "interval",
        "resume_after",
        "resume_wait",
        "retry_deadline",
        "suspend_grace",
    }
)
