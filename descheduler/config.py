"""The descheduler's settings: one YAML file, validated with pydantic.

Every key has a default, so an empty file (or none) is a valid configuration. Unknown
keys are refused, and every error names the key that is wrong. Durations are written
as Go durations (``"30m"``, ``"1h"``) or seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from gangplace.config_errors import (
    ConfigError,
    KeyedValueError,
    checked_kinds,
    describe_validation_error,
)
from gangplace.engine import EngineConfig
from gangplace.engine.kinds import AddedKind, Kinds, with_added
from gangplace.engine.policies import DEFAULT_POLICY, check_policy
from gangplace.engine.timeparse import TimeFormatError, format_duration, parse_duration
from gangplace.mover.hood_moves import DEFAULT_NODE_LIMIT
from gangplace.yamlfile import YamlFileError, read_yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

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


def _duration(v: Any) -> float:
    try:
        return parse_duration(v)
    except TimeFormatError as e:
        raise ValueError(str(e)) from None


# Seconds, written in YAML as "30m", "1h30m" or a number of seconds.
Duration = Annotated[float, BeforeValidator(_duration), Field(ge=0)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SchedulingConfig(_Section):
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


class EvictionRules(_Section):
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


class LimitSettings(_Section):
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


class MovesConfig(_Section):
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


class CostWeights(_Section):
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


class MakeRoomConfig(_Section):
    """Moves that let waiting gangs start."""

    enabled: bool = Field(default=True, description="make room for waiting gangs")
    max_victims_per_gang: int = Field(
        default=16, ge=1, description="victim gangs moved to make room for one waiting gang"
    )
    candidate_nodes: int = Field(
        default=48,
        ge=1,
        description="nodes examined exactly per waiting gang, after a vectorised shortlist",
    )
    max_waiting_gangs: int = Field(
        default=64, ge=1, description="waiting gangs considered per run, in DRF order"
    )


class CapacityRoomConfig(_Section):
    """Room for a waiting gang that capacity blocks -- no move lets it start because
    what would make room fits nowhere else -- by suspending workloads without placing
    them again (opt-in). Only workloads with a suspend switch, of lower priority (and,
    with equal_priority, smaller ones of its own), least work at risk first, within the
    limits and caps. The room is held for the gang until it binds or hold_for ends:
    meanwhile corral resumes no workload of lower priority than the gang that it
    suspended, and plans the room for the gang, not for waiting gangs of its priority or
    lower. What was suspended for the gang is resumed first, once it is bound, gone,
    or the hold ends (hold_for, not moves.resume_after). With nominate, the kube-scheduler
    holds it too, against every pod of the gang's priority or lower."""

    enabled: bool = Field(
        default=False,
        description="suspend lower-priority workloads for a gang that capacity blocks",
    )
    after: Duration = Field(
        default=3600.0,
        description="only for a gang that has waited longer than this (since it was made)",
    )
    equal_priority: bool = Field(
        default=False,
        description="also suspend workloads of the gang's own priority that hold fewer GPUs "
        "than it needs (never one that started on room made for it within the cool-down)",
    )
    hold_for: Duration = Field(
        default=900.0,
        gt=0,
        description="how long the room is held for the gang: if it is not bound by then, "
        "what was suspended for it is resumed (replaces moves.resume_after for them)",
    )
    nominate: bool = Field(
        default=False,
        description="also hold the room through the scheduler: write each waiting pod's "
        "status.nominatedNodeName (the node the plan put it on) while the hold lasts, and "
        "clear it when the hold ends unbound; only for gangs the kube-scheduler places "
        "(native gangs, coscheduling, Kueue), never Volcano, YuniKorn or KAI",
    )


class DefragmentConfig(_Section):
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


class ExactMovesConfig(_Section):
    """The exact neighbourhood moves (the mover the trace replay measures), tried where
    the planner's own search finds no move: for a waiting gang make_room cannot serve,
    and, when defragmenting, for the typical GPU shapes that still fit nowhere. The same
    rules as every move: whole gangs, priority, move method, limits and budgets."""

    enabled: bool = Field(
        default=True, description="try the exact moves where the planner's search finds none"
    )
    max_pods: int = Field(
        default=8, ge=0, description="pods moved to place one pod of a gang or typical shape"
    )
    node_limit: int = Field(
        default=DEFAULT_NODE_LIMIT,
        ge=1,
        description="branch-and-bound nodes per neighbourhood solve: a limit of work, not of "
        "seconds, so a plan is the same on a busy machine and a quiet one",
    )
    max_rooms: int = Field(
        default=8,
        ge=0,
        description="defragment: pods of typical shapes that fit nowhere room is made for per "
        "run, most frequent shape first",
    )


class StaleGangsConfig(_Section):
    """Releasing partial gangs that waited past their gang timeout."""

    enabled: bool = Field(default=True, description="release stale partial gangs")
    default_timeout: Duration = Field(
        default=1800.0, description="when a gang names no timeout (corral.dev/gang-timeout)"
    )


class RunnerConfig(_Section):
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


class DeschedulerConfig(_Section):
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
    workloads: tuple[AddedKind, ...] = Field(
        default=(),
        description="workload kinds beside the built-in ones (docs/configuration.md)",
    )

    @field_validator("workloads")
    @classmethod
    def _added(cls, v: tuple[AddedKind, ...]) -> tuple[AddedKind, ...]:
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
