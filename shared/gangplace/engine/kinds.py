"""The one registry of workload kinds, keyed by (API group, kind).

Everything a part of corral needs to know about a kind is in its one record,
:class:`WorkloadKind` (the webhook, the descheduler and ``kubectl corral`` read the
same): how the webhook makes a gang of it (its roles: where its pod templates are and
how many pods each makes), the REST resource the informers read and the RBAC grants,
where its suspend switch is and when a suspend takes effect, what becomes of a pod of
it that is evicted, whether the descheduler reads it as an owner, whether its pods are
steps run one after another, and its quirks (:class:`KindHooks`: pure functions from
:mod:`gangplace.engine.quirks`, such as when KubeRay refuses a suspend). Callers ask a
kind's record, never test its name. Every other list of kinds (the webhook's table,
the resources and RBAC of :mod:`gangplace.kube.resources`, the descheduler's readers
and move methods) is derived from :data:`KINDS`; a test fails when a second table of
kinds appears. A config's ``workloads:`` entries are records of the same type and
extend it (:func:`with_added`, a new registry: nothing global changes); an added kind
has no quirks (the hooks' defaults). The parts that read kinds take that registry as plain data.

A kind is keyed by its group as well as its name: a Volcano ``batch.volcano.sh`` Job is
not a ``batch/v1`` Job. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from gangplace.engine.quirks.job_disruption import disruption_rule
from gangplace.engine.quirks.job_self_ganged import indexed_job_self_ganged
from gangplace.engine.quirks.jobset_subgroups import jobset_subgroups
from gangplace.engine.quirks.ray_suspend import rayjob_suspend_refusal

__all__ = [
    "KINDS",
    "Evicted",
    "Factor",
    "GangPer",
    "JobRule",
    "KindHooks",
    "Kinds",
    "RoleSpec",
    "SuspendTakesEffect",
    "WorkloadKind",
    "gang_kinds",
    "kind_of",
    "read_kinds",
    "registry",
    "split_api_version",
    "suspendable_kinds",
    "with_added",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Factor(_Frozen):
    """One factor of a role's pod count: the value at ``paths`` (the smallest present,
    or with ``mode: first`` the first present), plus ``offset``; ``default`` when no
    path is set. ``mode: max`` takes the largest present. A plain string in the config
    means ``{paths: [that string]}``."""

    paths: tuple[str, ...] = Field(min_length=1)
    default: int = Field(default=1, ge=0)
    offset: int = 0
    mode: Literal["min", "first", "max"] = "min"
    when: dict[str, str] = Field(default_factory=dict)


class RoleSpec(_Frozen):
    """A role (launcher, worker, head...): where its pod template is, how many pods.

    ``format`` says what sits at ``template``: a pod template (``podTemplate``), or a
    Spark operator pod description (``sparkPod``: cores, memory, gpu, labels and
    annotations, from which the operator builds the pods)."""

    at: str = Field(min_length=1)
    template: str = Field(min_length=1)
    name: str = ""
    name_field: str = Field(default="name", alias="nameField")
    fallback_template: str | None = Field(default=None, alias="fallbackTemplate")
    count: tuple[Factor, ...] = ()
    format: Literal["podTemplate", "sparkPod"] = "podTemplate"

    @field_validator("count", mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return [{"paths": [f]} if isinstance(f, str) else f for f in v]
        return v

    @model_validator(mode="after")
    def _named(self) -> RoleSpec:
        if "*" not in self.at.split(".") and not self.name:
            raise ValueError(f"role at {self.at!r}: needs a name (its path has no '*')")
        return self


class GangPer(_Frozen):
    """One gang per instance of the workload's replicated unit (a LeaderWorkerSet's
    group of a leader and its workers) instead of one for the whole workload.

    ``count`` is the number of instances; each role's pod count is divided among them.
    The gangs are named ``<workload name>-<i>``; a pod finds its instance ``i`` in its
    label ``label`` (set by the workload's controller)."""

    count: str = Field(min_length=1)
    label: str = Field(min_length=1)


# What becomes of an evicted pod of a kind that owns pods directly: its controller makes
# it again without loss (``recreated``), it counts as a failure of the Job
# (``job-failures``: the Job controller counts it unless its podFailurePolicy ignores
# DisruptionTarget, and fails the Job past backoffLimit), or it is not made again
# without loss (``lost``).
Evicted = Literal["recreated", "job-failures", "lost"]
# When a suspend takes effect: always (the switch is built into the API: batch/v1 Job,
# Kubernetes 1.24+), or only when the served CRD declares the switch (a switch it lacks
# is pruned on write and ignored).
SuspendTakesEffect = Literal["always", "servedSchema"]


# What a kind's disruption rule writes: the spec fields to set (None: none) and warnings.
JobRule = tuple[dict[str, Any] | None, list[str]]


def _no_refusal(obj: Mapping[str, Any], what: str) -> str:
    return ""


def _no_subgroups(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return []


def _not_self_ganged(obj: Mapping[str, Any]) -> str | None:
    return None


def _no_rule(obj: Mapping[str, Any]) -> JobRule:
    return None, []


@dataclass(frozen=True, slots=True)
class KindHooks:
    """A kind's quirks, as pure functions over the workload object (no client, no I/O);
    each default says the kind has no such quirk (an added kind has none).

    ``suspend_refusal(obj, what)``: why its controller would not act on a suspend ('':
    it would; ``what`` names the object in the message). ``subgroups(obj)``: its
    repeated groups of pods (name, subGroupSize, replicas, labelSelector,
    matchLabelKeys), for a Volcano PodGroup's subGroupPolicy. ``self_ganged(obj)``: why
    its own controller makes its gang where the native runtime PodGroup is served
    (None: it does not). ``disruption_rule(obj)``: the spec fields that keep an
    eviction from counting as its failure, and warnings, at CREATE."""

    suspend_refusal: Callable[[Mapping[str, Any], str], str] = _no_refusal
    subgroups: Callable[[Mapping[str, Any]], list[dict[str, Any]]] = _no_subgroups
    self_ganged: Callable[[Mapping[str, Any]], str | None] = _not_self_ganged
    disruption_rule: Callable[[Mapping[str, Any]], JobRule] = _no_rule


_NO_HOOKS = KindHooks()


class WorkloadKind(_Frozen):
    """One workload kind: the registry's record, and a config's ``workloads:`` entry.

    ``versions``: the API versions the webhook admits it in; the first is the one corral
    reads and writes it in (informers, suspend patches, RBAC: :attr:`version`).
    ``plural``: its REST resource (default: the kind in lower case with an ``s``, the
    CRD convention); ``suspendPath``: its suspend switch, a dot path (empty: none);
    ``suspendTakesEffect``: ``servedSchema`` (only when the served CRD declares the
    switch) or ``always``; ``evicted``: what becomes of an evicted pod it owns directly.

    ``roles``: how the webhook makes a gang of it (none: it makes none; the webhook's
    config needs them). ``minMember``: a fixed minMember, for workloads whose first pod
    creates the others (a Spark driver makes its executors): waiting for more would
    deadlock, so the gang starts with one, and its minResources still reserve every
    pod. ``minAvailableFrom``: a path whose value is the default min-available (an
    elastic job's minimum). ``leftAloneWhen``: paths that, when set, hand the workload
    to another integration.

    What only the built-in table says (no config key): :attr:`read` (the descheduler
    reads it as an owner; every added kind is read), :attr:`steps` (its pods run one
    after another, never as a gang unless their template says so) and :attr:`hooks`.
    """

    group: str
    versions: tuple[str, ...] = Field(min_length=1)
    kind: str = Field(min_length=1)
    plural_given: str | None = Field(default=None, alias="plural")
    suspend_at: str = Field(default="", alias="suspendPath")
    suspend_takes_effect: SuspendTakesEffect = Field(
        default="servedSchema", alias="suspendTakesEffect"
    )
    evicted: Evicted = "lost"
    roles: tuple[RoleSpec, ...] = ()
    default_min_available: str | None = Field(default=None, alias="defaultMinAvailable")
    min_member: int | None = Field(default=None, ge=1, alias="minMember")
    min_available_from: str | None = Field(default=None, alias="minAvailableFrom")
    left_alone_when: tuple[str, ...] = Field(default=(), alias="leftAloneWhen")
    gang_per: GangPer | None = Field(default=None, alias="gangPer")
    _read: bool = PrivateAttr(default=True)
    _steps: bool = PrivateAttr(default=False)
    _hooks: KindHooks = PrivateAttr(default=_NO_HOOKS)

    @property
    def plural(self) -> str:
        """Its REST resource: ``plural``, else the kind in lower case with an ``s``."""
        return self.plural_given if self.plural_given is not None else f"{self.kind.lower()}s"

    @property
    def suspend_path(self) -> tuple[str, ...]:
        """The suspend switch's field names (empty: none)."""
        return tuple(self.suspend_at.split(".")) if self.suspend_at else ()

    @property
    def read(self) -> bool:
        return self._read

    @property
    def steps(self) -> bool:
        return self._steps

    @property
    def hooks(self) -> KindHooks:
        return self._hooks

    @property
    def makes_gangs(self) -> bool:
        """The webhook makes gangs of it (it has roles)."""
        return bool(self.roles)

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.kind)

    @property
    def version(self) -> str:
        """The version corral reads and writes it in: the first of :attr:`versions`."""
        return self.versions[0]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _kind(
    group: str,
    kind: str,
    plural: str,
    versions: Sequence[str],
    roles: Sequence[Mapping[str, Any]] = (),
    *,
    read: bool = False,
    steps: bool = False,
    hooks: KindHooks = _NO_HOOKS,
    **kw: Any,
) -> WorkloadKind:
    """A built-in kind's record (what a config cannot say included)."""
    record = WorkloadKind.model_validate(
        {
            "group": group,
            "versions": list(versions),
            "kind": kind,
            "plural": plural,
            "roles": list(roles),
            **kw,
        }
    )
    record._read, record._steps, record._hooks = read, steps, hooks
    return record


def _replica_specs(field: str) -> list[dict[str, Any]]:
    return [{"at": f"spec.{field}.*", "template": "template", "count": ["replicas"]}]


def _ray_roles(prefix: str) -> list[dict[str, Any]]:
    return [
        {"name": "head", "at": f"{prefix}.headGroupSpec", "template": "template"},
        {
            "at": f"{prefix}.workerGroupSpecs.*",
            "nameField": "groupName",
            "template": "template",
            "count": [
                {"paths": ["replicas", "minReplicas"], "mode": "first", "default": 0},
                {"paths": ["numOfHosts"]},
            ],
        },
    ]


_LWS_ROLES: list[dict[str, Any]] = [
    {
        "name": "leader",
        "at": "spec.leaderWorkerTemplate",
        "template": "leaderTemplate",
        "fallbackTemplate": "workerTemplate",
        "count": ["$.spec.replicas"],
    },
    {
        "name": "worker",
        "at": "spec.leaderWorkerTemplate",
        "template": "workerTemplate",
        "count": ["$.spec.replicas", {"paths": ["size"], "offset": -1}],
    },
]

_SPARK_ROLES: list[dict[str, Any]] = [
    {"name": "driver", "at": "spec", "template": "driver", "format": "sparkPod"},
    {
        "name": "executor",
        "at": "spec",
        "template": "executor",
        "format": "sparkPod",
        "count": [
            {
                # Spark's initial executors: the largest of these that is set
                # (the dynamic ones only with dynamic allocation on); Spark
                # starts 2 when none is.
                "paths": [
                    "executor.instances",
                    "dynamicAllocation.initialExecutors",
                    "dynamicAllocation.minExecutors",
                ],
                "when": {
                    "dynamicAllocation.initialExecutors": "dynamicAllocation.enabled",
                    "dynamicAllocation.minExecutors": "dynamicAllocation.enabled",
                },
                "mode": "max",
                "default": 2,
            }
        ],
    },
]


Kinds = Mapping[tuple[str, str], WorkloadKind]


def registry(records: Iterable[WorkloadKind]) -> Kinds:
    """The records by (group, kind); a second record of the same key is a mistake."""
    out: dict[tuple[str, str], WorkloadKind] = {}
    for r in records:
        if r.key in out:
            raise ValueError(f"kind {r.kind} of group {r.group!r} is registered twice")
        out[r.key] = r
    return out


def split_api_version(api_version: str) -> tuple[str, str]:
    """(group, version) of an apiVersion: ``batch/v1`` -> (batch, v1), ``v1`` -> ('', v1)."""
    group, _, version = api_version.rpartition("/")
    return group, version


_SUSPEND = "spec.suspend"
_RUN_POLICY_SUSPEND = "spec.runPolicy.suspend"

KINDS: Kinds = registry(
    (
        _kind(
            "batch",
            "Job",
            "jobs",
            ["v1"],
            [
                {
                    "name": "worker",
                    "at": "spec",
                    "template": "template",
                    "count": [{"paths": ["parallelism", "completions"]}],
                }
            ],
            suspendPath=_SUSPEND,
            suspendTakesEffect="always",
            evicted="job-failures",
            read=True,
            hooks=KindHooks(self_ganged=indexed_job_self_ganged, disruption_rule=disruption_rule),
        ),
        _kind(
            "kubeflow.org",
            "PyTorchJob",
            "pytorchjobs",
            ["v1"],
            _replica_specs("pytorchReplicaSpecs"),
            minAvailableFrom="spec.elasticPolicy.minReplicas",
            suspendPath=_RUN_POLICY_SUSPEND,
            read=True,
        ),
        _kind(
            "kubeflow.org",
            "TFJob",
            "tfjobs",
            ["v1"],
            _replica_specs("tfReplicaSpecs"),
            suspendPath=_RUN_POLICY_SUSPEND,
            read=True,
        ),
        # Two operators serve MPIJob, each one version of the one CRD mpijobs.kubeflow.org
        # (a cluster has one of them): mpi-operator v0.4+ serves and stores v2beta1
        # (../shared/crds/kubeflow.org_mpijobs.yaml: mpiReplicaSpecs, runPolicy.suspend),
        # the training operator v1 its own kubeflow.org/v1 (mpiReplicaSpecs, runPolicy).
        # The webhook admits both; the descheduler reads and suspends v2beta1, the first.
        _kind(
            "kubeflow.org",
            "MPIJob",
            "mpijobs",
            ["v2beta1", "v1"],
            _replica_specs("mpiReplicaSpecs"),
            defaultMinAvailable="100%",
            suspendPath=_RUN_POLICY_SUSPEND,
            read=True,
        ),
        _kind(
            "jobset.x-k8s.io",
            "JobSet",
            "jobsets",
            ["v1alpha2"],
            [
                {
                    "at": "spec.replicatedJobs.*",
                    "template": "template.spec.template",
                    "count": [
                        "replicas",
                        {"paths": ["template.spec.parallelism", "template.spec.completions"]},
                    ],
                }
            ],
            suspendPath=_SUSPEND,
            read=True,
            hooks=KindHooks(subgroups=jobset_subgroups),
        ),
        # Read (between a RayJob and its pods) but without a switch of its own.
        _kind("ray.io", "RayCluster", "rayclusters", ["v1"], _ray_roles("spec"), read=True),
        _kind(
            "ray.io",
            "RayJob",
            "rayjobs",
            ["v1"],
            _ray_roles("spec.rayClusterSpec"),
            suspendPath=_SUSPEND,
            read=True,
            hooks=KindHooks(suspend_refusal=rayjob_suspend_refusal),
        ),
        _kind(
            "leaderworkerset.x-k8s.io",
            "LeaderWorkerSet",
            "leaderworkersets",
            ["v1"],
            _LWS_ROLES,
            gangPer={"count": "spec.replicas", "label": "leaderworkerset.sigs.k8s.io/group-index"},
        ),
        _kind(
            "sparkoperator.k8s.io",
            "SparkApplication",
            "sparkapplications",
            ["v1beta2"],
            _SPARK_ROLES,
            minMember=1,
            leftAloneWhen=["spec.batchScheduler"],
        ),
        # Direct pod owners that make an evicted pod again without loss.
        _kind("apps", "ReplicaSet", "replicasets", ["v1"], evicted="recreated"),
        _kind("apps", "StatefulSet", "statefulsets", ["v1"], evicted="recreated"),
        _kind("", "ReplicationController", "replicationcontrollers", ["v1"], evicted="recreated"),
        # Argo Workflows runs a workflow's steps one pod after another.
        _kind("argoproj.io", "Workflow", "workflows", ["v1alpha1"], steps=True),
    )
)

# A CRD's group is a DNS subdomain with a dot in it; its plural a lower-case DNS label.
_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
_PLURAL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")
_PATH_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _checked(entry: WorkloadKind, where: str) -> WorkloadKind:
    """``entry`` when it can be a kind of the cluster's API, else ValueError naming the key."""
    if not _GROUP.match(entry.group) or len(entry.group) > 253:
        raise ValueError(
            f"{where}.group: {entry.group!r} is not an API group (allowed: a DNS subdomain "
            "with a dot, such as example.com)"
        )
    bad = next((v for v in entry.versions if not _VERSION.match(v)), None)
    if bad is not None:
        raise ValueError(
            f"{where}.versions: {bad!r} is not an API version (allowed: v1, v1beta1, v2alpha1...)"
        )
    plural = entry.plural
    if not _PLURAL.match(plural) or len(plural) > 63:
        raise ValueError(
            f"{where}.plural: {plural!r} is not a resource name (allowed: lower-case letters, "
            "digits and '-', as the CRD's spec.names.plural)"
        )
    path = entry.suspend_path
    if path and (len(path) < 2 or path[0] != "spec" or not all(map(_PATH_PART.match, path))):
        raise ValueError(
            f"{where}.suspendPath: {entry.suspend_at!r} is not a dot path of field names "
            "under spec (allowed: such as spec.suspend)"
        )
    return entry


def with_added(
    added: Sequence[WorkloadKind], base: Kinds = KINDS, where: str = "workloads"
) -> Kinds:
    """The registry ``base`` extended with the kinds a config adds (its ``workloads:``
    entries, ``where`` naming the key): each is read by the descheduler as an owner,
    makes gangs when it has roles, and may be suspended when it has a switch; none has
    quirks. Raises ValueError, one line naming the entry, for an entry that cannot be
    one: a kind the registry holds, one added twice, a bad group, version, plural or
    path."""
    seen: dict[tuple[str, str], int] = {}
    for i, e in enumerate(added):
        key = (e.group, e.kind)
        if key in base:
            raise ValueError(
                f"{where}[{i}]: {e.kind} of group {e.group!r} is built in (allowed: a kind "
                "the built-in table lacks)"
            )
        if key in seen:
            raise ValueError(
                f"{where}[{i}]: {e.kind} of group {e.group!r} is already {where}[{seen[key]}]"
            )
        seen[key] = i
    records = [_checked(e, f"{where}[{i}]") for i, e in enumerate(added)]
    if not records:
        return base
    return registry((*base.values(), *records))


def kind_of(api_version: str, kind: str, kinds: Kinds = KINDS) -> WorkloadKind | None:
    """The registered kind an object or owner reference names (by its apiVersion's
    group and its kind), or None."""
    return kinds.get((split_api_version(api_version)[0], kind))


def gang_kinds(kinds: Kinds = KINDS) -> tuple[WorkloadKind, ...]:
    """The kinds the webhook makes gangs of, in registry order."""
    return tuple(r for r in kinds.values() if r.makes_gangs)


def read_kinds(kinds: Kinds = KINDS) -> tuple[WorkloadKind, ...]:
    """The kinds the descheduler reads as owners."""
    return tuple(r for r in kinds.values() if r.read)


def suspendable_kinds(kinds: Kinds = KINDS) -> tuple[WorkloadKind, ...]:
    """The kinds the descheduler reads and may suspend (they have a switch)."""
    return tuple(r for r in kinds.values() if r.read and r.suspend_path)
