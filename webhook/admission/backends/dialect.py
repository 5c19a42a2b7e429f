"""What every backend shares: one gang policy, written in the keys of the scheduler in
use (docs/backends.md's table).

A :class:`Dialect` is one backend: which labels and annotations make a pod a gang member,
which keys a workload itself carries, what the gang object (a PodGroup) looks like for the
backends that have one, and every other way the backend differs (queues, a timeout key,
task groups, Volcano's extra PodGroup fields, what it leaves to a parent). Each backend is
a subclass in its own module of this package; :mod:`.registry` names them all. The keys
themselves are the engine's one table (:mod:`gangplace.engine.membership`), which the
descheduler reads back. Everything here is pure data in, data out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol

from gangplace.engine import membership
from gangplace.engine.membership import read_membership

from webhook.admission.keys import MANAGED_BY
from webhook.admission.patch import Editor
from webhook.admission.roles import ResolvedRole
from webhook.admission.validate import derived_name
from webhook.podgroup_intent import OwnerHint, OwnerRef, PodGroupIntent

if TYPE_CHECKING:
    from gangplace.engine.kinds import WorkloadKind

    from webhook.admission.native_gangs import Served
    from webhook.admission.validate import MinAvailable

__all__ = [
    "POD_FIELDS",
    "Dialect",
    "GangInfo",
    "GangReading",
    "Keys",
    "PodGroupKind",
    "TaskGroup",
    "foreign_gang",
]

# The pod fields that name a native gang, in every version (set at CREATE, immutable).
POD_FIELDS: Final = ("workloadRef", "schedulingGroup")


@dataclass(slots=True)
class GangInfo:
    """A gang as decided at admission. ``size`` is None for a pod on its own, whose
    gang's size the request does not show."""

    name: str
    min_member: int
    size: int | None
    queue: str | None
    timeout_seconds: int | None
    # Backend fields of the gang object's spec beyond the common ones (Volcano 1.12+).
    spec_extra: dict[str, Any] | None = None


class GangReading(Protocol):
    """The engine's reading of a gang's pod templates, as a backend's gang objects use it
    (:class:`webhook.admission.gang_decision.GangShapes`)."""

    @property
    def roles(self) -> Sequence[ResolvedRole]: ...

    def priority_class(self) -> str | None: ...

    def min_resources(self) -> dict[str, str]: ...

    def required_per_role(self) -> list[int] | None: ...


@dataclass(frozen=True, slots=True)
class TaskGroup:
    """A YuniKorn task group: one role, how many of it are required, one member's
    resources and placement constraints (for the placeholders YuniKorn starts)."""

    name: str
    min_member: int
    min_resource: Mapping[str, str]
    node_selector: Mapping[str, Any] | None = None
    tolerations: Sequence[Any] | None = None
    affinity: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "minMember": self.min_member,
            "minResource": dict(self.min_resource),
        }
        if self.node_selector:
            out["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            out["tolerations"] = list(self.tolerations)
        if self.affinity:
            out["affinity"] = dict(self.affinity)
        return out


@dataclass(slots=True)
class Keys:
    """Labels and annotations to write on one object's metadata."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.labels or self.annotations)


@dataclass(frozen=True, slots=True)
class PodGroupKind:
    group: str
    version: str
    plural: str = "podgroups"
    kind: str = "PodGroup"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


class Dialect:
    """One backend: its keys and every way it differs. Subclasses override what differs."""

    # The config's name of the backend (``backend:``), also its membership dialect.
    name: ClassVar[str]
    podgroup: ClassVar[PodGroupKind | None] = None
    # Kueue gangs workloads through its own integrations: their pods are left alone.
    templates_carry_keys: ClassVar[bool] = True
    # Whether the scheduler has queues (corral.dev/queue and the config's queues).
    has_queues: ClassVar[bool] = True
    # Why corral.dev/gang-timeout is ignored (the scheduler has no per-gang key), else None.
    no_timeout: ClassVar[str | None] = None
    # Whether corral.dev/network-topology is written (a field of the gang object).
    writes_topology: ClassVar[bool] = False
    # Whether every member carries the gang's task groups (one per role).
    uses_task_groups: ClassVar[bool] = False

    def __init__(self, served: Served | None = None) -> None:
        # What the API server serves (found once at start): the fields and versions
        # a backend writes for.
        self.served = served

    def left_to_parent(self, *, pod: bool) -> str | None:
        """Why a workload with a controller (``pod``: a pod of a workload in the table) is
        left alone because the backend gangs its parent instead, else None."""
        return None

    def gang_fields(
        self,
        topology: Mapping[str, Any] | None,
        subgroups: list[dict[str, Any]],
        whole: bool,
    ) -> tuple[dict[str, Any] | None, list[str]]:
        """The gang object's spec fields beyond the common ones (:attr:`GangInfo.spec_extra`),
        and warnings for what cannot be written. ``subgroups``: the workload's repeated
        groups (its kind's hook); ``whole``: the gang needs every pod."""
        return None, []

    def unapplied_minimum(
        self, kind: str, min_member: int, size: int, given: MinAvailable | None
    ) -> list[str]:
        """Warnings for a minimum the backend cannot say (a workload's gang of ``size``)."""
        return []

    def membership(self, meta: Mapping[str, Any] | None) -> str | None:
        """The gang an object already belongs to by this backend's keys, if any: the
        engine's one reader (:func:`gangplace.engine.membership.read_membership`) in this
        backend's dialect."""
        m = read_membership(self.name, *_keys_of(meta), application=True)
        return m.gang if m is not None else None

    def member_keys(
        self, gang: GangInfo, *, role: str | None, task_groups: Sequence[TaskGroup] | None
    ) -> Keys:
        """Keys for a gang member (a pod, or a pod template). ``task_groups`` is the
        whole gang's role list where the backend needs it on every member."""
        raise NotImplementedError

    def workload_keys(self, gang: GangInfo) -> Keys:
        """Keys for the workload object itself (not its templates)."""
        return Keys()

    def podgroup_body(
        self,
        gang: GangInfo,
        namespace: str,
        priority_class: str | None,
        min_resources: Mapping[str, str],
    ) -> dict[str, Any] | None:
        """The gang object, without ownerReferences (added once the owner's uid is
        known); None for backends without one."""
        return None

    # --- the native gang API's hooks (webhook.admission.backends.kubernetes); nothing for the
    # others

    @property
    def makes_objects(self) -> bool:
        """Whether the backend has gang objects for the reconciler to make."""
        return self.podgroup is not None

    def unusable(self) -> str | None:
        """Why the backend cannot write a gang on this API server, else None."""
        return None

    def left_alone(self, entry: WorkloadKind, obj: Mapping[str, Any]) -> str | None:
        """Why a workload of ``entry``'s kind is left to its own controller's gang, else
        None."""
        return None

    def check_templates(self, specs: Sequence[Any], per_instance: bool) -> None:
        """Refuse (InvalidValue) pod templates that cannot form one gang."""

    def role_keys(self, keys: Keys, role: str, roles: int, per_instance: bool) -> None:
        """Add to a role's template keys what only a gang of ``roles`` roles needs."""

    def edit_pod(self, ed: Editor, meta: Mapping[str, Any], gang: str, workload: str) -> None:
        """Edits of a gang pod's spec beyond its keys (``workload``: the gang of its
        workload, ``gang`` the pod's own, ``<workload>-<instance>`` for a split kind)."""

    def gang_intents(
        self,
        gang: GangInfo,
        namespace: str,
        owner: OwnerRef | None,
        shaped: GangReading,
        *,
        instances: int | None = None,
        update: bool = False,
    ) -> list[PodGroupIntent]:
        """The gang objects for the reconciler: here one PodGroup (:attr:`podgroup`) per
        gang, ``<gang>-<i>`` for each of ``instances``; its body is rendered when it is
        made. ``update``: a workload was scaled; an existing PodGroup of this owner
        follows."""
        kind = self.podgroup
        if kind is None:
            return []
        if instances is None:
            gangs = [gang]
        else:
            gangs = [replace(gang, name=derived_name(gang.name, str(i))) for i in range(instances)]
        return [
            PodGroupIntent(
                kind.api_version,
                kind.plural,
                namespace,
                one.name,
                self._podgroup_later(one, namespace, shaped),
                owner,
                update=update,
            )
            for one in gangs
        ]

    def removals(
        self, namespace: str, gang: str, instances: int | None, owner: OwnerRef
    ) -> list[PodGroupIntent]:
        """The removal of a suspended workload's PodGroups (one per instance, for a kind
        with one gang per instance), made by corral and owned by ``owner``."""
        kind = self.podgroup
        if kind is None:
            return []
        names = (
            [gang] if instances is None else [derived_name(gang, str(i)) for i in range(instances)]
        )
        return [
            PodGroupIntent(kind.api_version, kind.plural, namespace, n, {}, owner, remove=True)
            for n in names
        ]

    def _podgroup_later(
        self, gang: GangInfo, namespace: str, shaped: GangReading
    ) -> Callable[[], dict[str, Any]]:
        """The PodGroup's body, rendered on first use (off the request path)."""

        def body() -> dict[str, Any]:
            out = self.podgroup_body(
                gang, namespace, shaped.priority_class(), shaped.min_resources()
            )
            assert out is not None
            return out

        return body

    def hints(self, namespace: str, gang: str, workload: str, owner: OwnerRef) -> list[OwnerHint]:
        """The owner of the gang objects a pod (or child workload) of ``workload`` names."""
        if self.podgroup is None:
            return []
        return [OwnerHint(self.podgroup.api_version, namespace, gang, owner)]

    def _podgroup_object(
        self,
        gang: GangInfo,
        namespace: str,
        spec: dict[str, Any],
        annotations: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        assert self.podgroup is not None
        meta: dict[str, Any] = {
            "name": gang.name,
            "namespace": namespace,
            "labels": {MANAGED_BY[0]: MANAGED_BY[1]},
        }
        if annotations:
            meta["annotations"] = annotations
        return {
            "apiVersion": self.podgroup.api_version,
            "kind": self.podgroup.kind,
            "metadata": meta,
            "spec": spec,
        }


def _keys_of(meta: Mapping[str, Any] | None) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) of an object's metadata, the string values only."""
    out: list[dict[str, str]] = []
    for field_ in ("labels", "annotations"):
        m = meta.get(field_) if meta else None
        out.append(
            {k: v for k, v in m.items() if isinstance(v, str) and v} if isinstance(m, dict) else {}
        )
    return out[0], out[1]


def foreign_gang(meta: Mapping[str, Any] | None, spec: Any, own: str) -> str | None:
    """The key of another scheduler's group an object is in, if any: a pod in another
    scheduler's gang is left alone, and so is a pod of a YuniKorn application (YuniKorn
    schedules it, as a gang only with task groups) and a pod whose spec names a native
    gang someone else set (the Job controller's). ``own``: the backend in use."""
    labels, annotations = _keys_of(meta)
    for dialect in membership.DIALECTS:
        if dialect in (own, "corral"):
            continue
        m = read_membership(dialect, labels, annotations)
        if m is not None:
            return m.key
    app = membership.yunikorn_app_id(labels, annotations)
    if app is not None and own != "yunikorn":
        return app[1]
    if isinstance(spec, dict):
        return next((f for f in POD_FIELDS if spec.get(f)), None)
    return None
