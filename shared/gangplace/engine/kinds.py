"""The one registry of workload kinds, keyed by (API group, kind).

Everything a part of corral needs to know about a kind is here: how the webhook makes a
gang of it (its roles: where its pod templates are and how many pods each makes), the
REST resource the informers read and the RBAC grants, where its suspend switch is and
when a suspend takes effect, what becomes of a pod of it that is evicted, whether the
descheduler reads it as an owner, and whether its pods are steps run one after another.
Every other list of kinds (the webhook's table, the resources and RBAC of
:mod:`gangplace.kube.resources`, the descheduler's readers and move methods) is derived
from :data:`KINDS`; a test fails when a second table of kinds appears. A config's
``workloads:`` entries extend it (:func:`with_added`, a new registry: nothing global
changes), and the parts that read kinds take that registry as plain data.

A kind is keyed by its group as well as its name: a Volcano ``batch.volcano.sh`` Job is
not a ``batch/v1`` Job. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "KINDS",
    "AddedKind",
    "Evicted",
    "Factor",
    "GangPer",
    "KindRecord",
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


class AddedKind(_Frozen):
    """A kind an admin adds in a config (the webhook's and the descheduler's
    ``workloads:`` entries): what the descheduler and the RBAC need of it. ``plural``:
    its REST resource (default: the kind in lower case with an ``s``, the CRD
    convention); ``suspendPath``: its suspend switch, a dot path (empty: none);
    ``suspendTakesEffect``: ``servedSchema`` (only when the served CRD declares the
    switch) or ``always``; ``evicted``: what becomes of an evicted pod it owns directly.
    The webhook's entries add the roles (:class:`WorkloadKind`)."""

    group: str
    versions: tuple[str, ...] = Field(min_length=1)
    kind: str = Field(min_length=1)
    plural: str | None = None
    suspend_path: str = Field(default="", alias="suspendPath")
    suspend_takes_effect: SuspendTakesEffect = Field(
        default="servedSchema", alias="suspendTakesEffect"
    )
    evicted: Evicted = "lost"


class WorkloadKind(AddedKind):
    """One table entry: a kind, its API versions, its roles, its default min-available.

    ``minMember``: a fixed minMember, for workloads whose first pod creates the others
    (a Spark driver makes its executors): waiting for more would deadlock, so the gang
    starts with one, and its minResources still reserve every pod. ``minAvailableFrom``:
    a path whose value is the default min-available (an elastic job's minimum).
    ``leftAloneWhen``: paths that, when set, hand the workload to another integration.
    The fields of :class:`AddedKind` count for a kind added in the config only (a
    built-in kind's :class:`KindRecord` says them).
    """

    roles: tuple[RoleSpec, ...] = Field(min_length=1)
    default_min_available: str | None = Field(default=None, alias="defaultMinAvailable")
    min_member: int | None = Field(default=None, ge=1, alias="minMember")
    min_available_from: str | None = Field(default=None, alias="minAvailableFrom")
    left_alone_when: tuple[str, ...] = Field(default=(), alias="leftAloneWhen")
    gang_per: GangPer | None = Field(default=None, alias="gangPer")


def _kind(
    group: str, versions: Sequence[str], kind: str, roles: list[dict[str, Any]], **kw: Any
) -> WorkloadKind:
    return WorkloadKind.model_validate(
        {"group": group, "versions": list(versions), "kind": kind, "roles": roles, **kw}
    )


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


_LWS = _kind(
    "leaderworkerset.x-k8s.io",
    ["v1"],
    "LeaderWorkerSet",
    [
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
    ],
    gangPer={"count": "spec.replicas", "label": "leaderworkerset.sigs.k8s.io/group-index"},
)

_SPARK = _kind(
    "sparkoperator.k8s.io",
    ["v1beta2"],
    "SparkApplication",
    [
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
    ],
    minMember=1,
    leftAloneWhen=["spec.batchScheduler"],
)


@dataclass(frozen=True, slots=True)
class KindRecord:
    """One workload kind. ``gang``: how the webhook makes a gang of it (None: it makes
    none); ``plural`` and ``version``: its REST resource (the version a path is built
    with when the caller has no other); ``suspend_path``: its suspend switch (empty:
    none); ``read``: the descheduler reads it as an owner of gangs (to follow a pod up
    to its top-level workload, and to suspend it); ``steps``: its pods run one after
    another (workflow steps), never as a gang unless their template says so."""

    group: str
    kind: str
    plural: str
    version: str
    gang: WorkloadKind | None = None
    suspend_path: tuple[str, ...] = ()
    suspend_takes_effect: SuspendTakesEffect = "servedSchema"
    evicted: Evicted = "lost"
    read: bool = False
    steps: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.kind)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def split_api_version(api_version: str) -> tuple[str, str]:
    """(group, version) of an apiVersion: ``batch/v1`` -> (batch, v1), ``v1`` -> ('', v1)."""
    group, _, version = api_version.rpartition("/")
    return group, version


def registry(records: Iterable[KindRecord]) -> Mapping[tuple[str, str], KindRecord]:
    """The records by (group, kind); a second record of the same key is a mistake."""
    out: dict[tuple[str, str], KindRecord] = {}
    for r in records:
        if r.key in out:
            raise ValueError(f"kind {r.kind} of group {r.group!r} is registered twice")
        if r.gang is not None and (r.gang.group, r.gang.kind) != r.key:
            raise ValueError(f"kind {r.kind}: its gang spec names {r.gang.group}/{r.gang.kind}")
        out[r.key] = r
    return out


_SUSPEND = ("spec", "suspend")
_RUN_POLICY_SUSPEND = ("spec", "runPolicy", "suspend")

KINDS: Mapping[tuple[str, str], KindRecord] = registry(
    (
        KindRecord(
            "batch",
            "Job",
            "jobs",
            "v1",
            gang=_kind(
                "batch",
                ["v1"],
                "Job",
                [
                    {
                        "name": "worker",
                        "at": "spec",
                        "template": "template",
                        "count": [{"paths": ["parallelism", "completions"]}],
                    }
                ],
            ),
            suspend_path=_SUSPEND,
            suspend_takes_effect="always",
            evicted="job-failures",
            read=True,
        ),
        KindRecord(
            "kubeflow.org",
            "PyTorchJob",
            "pytorchjobs",
            "v1",
            gang=_kind(
                "kubeflow.org",
                ["v1"],
                "PyTorchJob",
                _replica_specs("pytorchReplicaSpecs"),
                minAvailableFrom="spec.elasticPolicy.minReplicas",
            ),
            suspend_path=_RUN_POLICY_SUSPEND,
            read=True,
        ),
        KindRecord(
            "kubeflow.org",
            "TFJob",
            "tfjobs",
            "v1",
            gang=_kind("kubeflow.org", ["v1"], "TFJob", _replica_specs("tfReplicaSpecs")),
            suspend_path=_RUN_POLICY_SUSPEND,
            read=True,
        ),
        KindRecord(
            "kubeflow.org",
            "MPIJob",
            "mpijobs",
            "v2beta1",
            gang=_kind(
                "kubeflow.org",
                ["v2beta1", "v1"],
                "MPIJob",
                _replica_specs("mpiReplicaSpecs"),
                defaultMinAvailable="100%",
            ),
            suspend_path=_RUN_POLICY_SUSPEND,
            read=True,
        ),
        KindRecord(
            "jobset.x-k8s.io",
            "JobSet",
            "jobsets",
            "v1alpha2",
            gang=_kind(
                "jobset.x-k8s.io",
                ["v1alpha2"],
                "JobSet",
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
            ),
            suspend_path=_SUSPEND,
            read=True,
        ),
        # Read (between a RayJob and its pods) but without a switch of its own.
        KindRecord(
            "ray.io",
            "RayCluster",
            "rayclusters",
            "v1",
            gang=_kind("ray.io", ["v1"], "RayCluster", _ray_roles("spec")),
            read=True,
        ),
        KindRecord(
            "ray.io",
            "RayJob",
            "rayjobs",
            "v1",
            gang=_kind("ray.io", ["v1"], "RayJob", _ray_roles("spec.rayClusterSpec")),
            suspend_path=_SUSPEND,
            read=True,
        ),
        KindRecord(
            "leaderworkerset.x-k8s.io",
            "LeaderWorkerSet",
            "leaderworkersets",
            "v1",
            gang=_LWS,
        ),
        KindRecord(
            "sparkoperator.k8s.io",
            "SparkApplication",
            "sparkapplications",
            "v1beta2",
            gang=_SPARK,
        ),
        # Direct pod owners that make an evicted pod again without loss.
        KindRecord("apps", "ReplicaSet", "replicasets", "v1", evicted="recreated"),
        KindRecord("apps", "StatefulSet", "statefulsets", "v1", evicted="recreated"),
        KindRecord(
            "", "ReplicationController", "replicationcontrollers", "v1", evicted="recreated"
        ),
        # Argo Workflows runs a workflow's steps one pod after another.
        KindRecord("argoproj.io", "Workflow", "workflows", "v1alpha1", steps=True),
    )
)


Kinds = Mapping[tuple[str, str], KindRecord]

# A CRD's group is a DNS subdomain with a dot in it; its plural a lower-case DNS label.
_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
_PLURAL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")
_PATH_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _added_record(entry: AddedKind, where: str) -> KindRecord:
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
    plural = entry.plural if entry.plural is not None else f"{entry.kind.lower()}s"
    if not _PLURAL.match(plural) or len(plural) > 63:
        raise ValueError(
            f"{where}.plural: {plural!r} is not a resource name (allowed: lower-case letters, "
            "digits and '-', as the CRD's spec.names.plural)"
        )
    path = tuple(entry.suspend_path.split(".")) if entry.suspend_path else ()
    if path and (len(path) < 2 or path[0] != "spec" or not all(map(_PATH_PART.match, path))):
        raise ValueError(
            f"{where}.suspendPath: {entry.suspend_path!r} is not a dot path of field names "
            "under spec (allowed: such as spec.suspend)"
        )
    return KindRecord(
        entry.group,
        entry.kind,
        plural,
        entry.versions[0],
        gang=entry if isinstance(entry, WorkloadKind) else None,
        suspend_path=path,
        suspend_takes_effect=entry.suspend_takes_effect,
        evicted=entry.evicted,
        read=True,
    )


def with_added(added: Sequence[AddedKind], base: Kinds = KINDS, where: str = "workloads") -> Kinds:
    """The registry ``base`` extended with the kinds a config adds (its ``workloads:``
    entries, ``where`` naming the key): each is read by the descheduler as an owner,
    makes gangs when it has roles, and may be suspended when it has a switch. Raises
    ValueError, one line naming the entry, for an entry that cannot be one: a kind the
    registry holds, one added twice, a bad group, version, plural or path."""
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
    records = [_added_record(e, f"{where}[{i}]") for i, e in enumerate(added)]
    if not records:
        return base
    return registry((*base.values(), *records))


def kind_of(api_version: str, kind: str, kinds: Kinds = KINDS) -> KindRecord | None:
    """The registered kind an object or owner reference names (by its apiVersion's
    group and its kind), or None."""
    return kinds.get((split_api_version(api_version)[0], kind))


def gang_kinds(kinds: Kinds = KINDS) -> tuple[WorkloadKind, ...]:
    """The kinds the webhook makes gangs of, in registry order."""
    return tuple(r.gang for r in kinds.values() if r.gang is not None)


def read_kinds(kinds: Kinds = KINDS) -> tuple[KindRecord, ...]:
    """The kinds the descheduler reads as owners."""
    return tuple(r for r in kinds.values() if r.read)


def suspendable_kinds(kinds: Kinds = KINDS) -> tuple[KindRecord, ...]:
    """The kinds the descheduler reads and may suspend (they have a switch)."""
    return tuple(r for r in kinds.values() if r.read and r.suspend_path)
