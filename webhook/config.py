"""The webhook's YAML configuration, validated by pydantic.

With no file at all every default is what a Volcano user expects: backend volcano,
schedulerName ``volcano``, queue ``default``, minAvailable = the whole gang, PodGroups
named after the gang. Keys are camelCase as in Kubernetes objects (snake_case is
accepted too); an unknown key is an error naming it.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from gangplace.config_errors import (
    ConfigError,
    KeyedValueError,
    checked_kinds,
    describe_validation_error,
)
from gangplace.engine import EngineConfig
from gangplace.engine.kinds import Kinds, with_added
from gangplace.engine.membership import SCHEDULER_NAMES
from gangplace.engine.policies import DEFAULT_POLICY, check_policy
from gangplace.yamlfile import YamlFileError, read_yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from webhook.admission.backends.registry import BACKENDS
from webhook.admission.roles import BUILTIN_KINDS, WorkloadKind, WorkloadTable
from webhook.admission.validate import (
    InvalidValue,
    check_default_min_available,
    check_duration,
    check_queue,
)

__all__ = ["Backend", "ConfigError", "NodePool", "WebhookConfig", "load_config"]


class Backend(StrEnum):
    VOLCANO = "volcano"
    COSCHEDULING = "coscheduling"
    YUNIKORN = "yunikorn"
    KUEUE = "kueue"
    KUBERNETES = "kubernetes"
    KAI = "kai"


# What each scheduler calls itself and its catch-all queue when nobody says otherwise.
# Kueue admits workloads and the native gang API uses the default scheduler (or the
# pod's own): for them the scheduler stays as it is (None).
DEFAULT_SCHEDULER: dict[Backend, str | None] = {b: SCHEDULER_NAMES.get(b.value) for b in Backend}
DEFAULT_QUEUE: dict[Backend, str | None] = {
    Backend.VOLCANO: "default",
    Backend.COSCHEDULING: None,  # scheduler-plugins has no queues
    Backend.YUNIKORN: "root.default",
    Backend.KUEUE: "default",  # a LocalQueue named default in the namespace
    Backend.KUBERNETES: None,  # the native gang API has no queues
    Backend.KAI: "default-queue",  # what KAI's pod grouper falls back to
}

# Backends without queues (their class says so): namespaceQueues and defaultQueue are
# refused, corral.dev/queue is ignored with a warning.
NO_QUEUES = frozenset(b for b in Backend if not BACKENDS[b].has_queues)


# podGroupWait's ceiling: the answer must come before the API server's timeoutSeconds.
_MAX_WAIT = 29


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class NodePool(_Model):
    """Pin gang pods to nodes labelled ``key=value`` (a required node affinity), so two
    schedulers never fight over the same nodes."""

    key: str = Field(min_length=1)
    value: str


class WebhookConfig(_Model):
    backend: Backend = Backend.VOLCANO
    scheduler_name: str | None = None
    default_min_available: dict[str, str] = Field(default_factory=lambda: {"*": "100%"})
    namespace_queues: dict[str, str] = Field(default_factory=dict)
    default_queue: str | None = None
    node_pool: NodePool | None = None
    infeasible: Literal["warn", "deny"] = "warn"
    # The policy the feasibility check places a gang with: the cluster's scheduler's.
    policy: str = DEFAULT_POLICY
    warn_when_full: bool = False
    non_gang_pods: Literal["single-pod-gang", "ignore"] = "single-pod-gang"
    gang_timeout: str | None = None
    excluded_namespaces: tuple[str, ...] = ("kube-system",)
    own_namespace: str = "corral-system"
    # Every batch/v1 Job (restartPolicy Never) gets a first podFailurePolicy rule that
    # ignores pods failed by a disruption (eviction, drain): its kind's disruption_rule
    # hook, gangplace.engine.quirks.job_disruption.
    jobs_ignore_disruptions: bool = True
    # How long a gang's first pod may wait for its PodGroup before it is answered
    # (Volcano's /pods/validate refuses a pod whose PodGroup is not there): "0s" is off.
    pod_group_wait: str = "2s"
    workloads: tuple[WorkloadKind, ...] = ()
    engine: EngineConfig = Field(default_factory=EngineConfig)

    @field_validator("workloads")
    @classmethod
    def _added(cls, v: tuple[WorkloadKind, ...]) -> tuple[WorkloadKind, ...]:
        return checked_kinds(v, gangs=True)

    @field_validator("default_min_available")
    @classmethod
    def _min_values(cls, v: dict[str, str]) -> dict[str, str]:
        for kind, raw in v.items():
            check_default_min_available(f"defaultMinAvailable.{kind}", raw)
        return v

    @field_validator("namespace_queues")
    @classmethod
    def _queues(cls, v: dict[str, str]) -> dict[str, str]:
        for ns, q in v.items():
            check_queue(f"namespaceQueues.{ns}", q)
        return v

    @field_validator("default_queue")
    @classmethod
    def _queue(cls, v: str | None) -> str | None:
        if v is not None:
            check_queue("defaultQueue", v)
        return v

    @field_validator("policy")
    @classmethod
    def _policy(cls, v: str) -> str:
        try:
            return check_policy(v)
        except ValueError as e:
            raise KeyedValueError(f"policy: {e}") from None

    @field_validator("gang_timeout")
    @classmethod
    def _timeout(cls, v: str | None) -> str | None:
        if v is not None:
            check_duration("gangTimeout", v)
        return v

    @field_validator("pod_group_wait")
    @classmethod
    def _wait(cls, v: str) -> str:
        if v.strip() in ("0", "0s"):
            return v
        seconds = check_duration("podGroupWait", v)
        if seconds > _MAX_WAIT:
            raise InvalidValue(
                "podGroupWait",
                v,
                f"is too long: at most {_MAX_WAIT}s",
                '"0s" (off) or a duration below the webhook\'s timeoutSeconds '
                "(5s in the manifests, at most 30s)",
            )
        return v

    @model_validator(mode="after")
    def _queue_needs_backend(self) -> WebhookConfig:
        if self.backend in NO_QUEUES and (self.namespace_queues or self.default_queue):
            raise ValueError(
                f"namespaceQueues/defaultQueue: the {self.backend.value} backend has no "
                "queues; remove them or choose volcano, yunikorn, kueue or kai"
            )
        return self

    # --- derived values, computed once ----------------------------------------------

    @cached_property
    def effective_scheduler_name(self) -> str | None:
        """The schedulerName pods get (None: left as it is)."""
        return self.scheduler_name or DEFAULT_SCHEDULER[self.backend]

    @cached_property
    def effective_default_queue(self) -> str | None:
        return self.default_queue or DEFAULT_QUEUE[self.backend]

    @cached_property
    def table(self) -> WorkloadTable:
        return WorkloadTable([*BUILTIN_KINDS, *self.workloads])

    @cached_property
    def kinds(self) -> Kinds:
        """The registry of kinds extended by ``workloads`` (the same records the
        descheduler's ``workloads:`` make: what RBAC is generated from)."""
        return with_added(self.workloads)

    @cached_property
    def timeout_seconds(self) -> int | None:
        return (
            None if self.gang_timeout is None else check_duration("gangTimeout", self.gang_timeout)
        )

    @cached_property
    def pod_group_wait_seconds(self) -> float:
        """How long a pod CREATE waits for its gang's PodGroup: only Volcano refuses
        a pod whose PodGroup is not there (0: not at all)."""
        if self.backend is not Backend.VOLCANO or self.pod_group_wait.strip() in ("0", "0s"):
            return 0.0
        return float(check_duration("podGroupWait", self.pod_group_wait))

    @cached_property
    def skipped_namespaces(self) -> frozenset[str]:
        return frozenset((*self.excluded_namespaces, self.own_namespace))

    def queue_for(self, namespace: str) -> str | None:
        return self.namespace_queues.get(namespace) or self.effective_default_queue

    def min_available_for(self, kind: WorkloadKind | None, kind_name: str) -> str:
        """The default min-available of a kind: config per kind, else the table's, else
        the config's ``*``, else the whole gang."""
        v = self.default_min_available.get(kind_name)
        if v is None and kind is not None:
            v = kind.default_min_available
        return v or self.default_min_available.get("*") or "100%"


def load_config(path: str | Path | None) -> WebhookConfig:
    """The config in ``path`` (None: all defaults). Raises ConfigError naming the file
    and the bad field."""
    if path is None:
        return WebhookConfig()
    where = str(path)
    try:
        doc: Any = read_yaml(path)
    except YamlFileError as e:
        raise ConfigError(f"{where}: {e}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: expected a mapping of settings at the top level")
    return parse_config(doc, where)


def parse_config(doc: dict[str, Any], where: str = "config") -> WebhookConfig:
    try:
        return WebhookConfig.model_validate(doc)
    except ValidationError as e:
        raise ConfigError(describe_validation_error(e, where, WebhookConfig)) from None
