"""One gang policy, written in the keys of the scheduler in use (docs/backends.md's table).

A :class:`Dialect` says which labels and annotations make a pod a gang member, which
keys a workload itself carries, and what the gang object (a PodGroup) looks like for
the backends that have one. The keys themselves are the engine's one table
(:mod:`gangplace.engine.membership`), which the descheduler reads back. Everything here is
pure data in, data out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from gangplace.engine import membership
from gangplace.engine.membership import read_membership

from webhook.admission.keys import MANAGED_BY
from webhook.admission.patch import Editor
from webhook.admission.validate import format_duration
from webhook.config import Backend, WebhookConfig
from webhook.podgroup_intent import OwnerHint, OwnerRef, PodGroupIntent

if TYPE_CHECKING:
    from webhook.admission.native_gangs import Served

__all__ = [
    "Dialect",
    "GangInfo",
    "Keys",
    "PodGroupKind",
    "TaskGroup",
    "dialect_for",
    "foreign_gang",
]


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
    """The keys of one backend. Subclasses override what differs."""

    backend: Backend
    podgroup: PodGroupKind | None = None
    # Kueue gangs workloads through its own integrations: their pods are left alone.
    templates_carry_keys: bool = True

    def __init__(self, config: WebhookConfig) -> None:
        self.config = config

    def membership(self, meta: Mapping[str, Any] | None) -> str | None:
        """The gang an object already belongs to by this backend's keys, if any: the
        engine's one reader (:func:`gangplace.engine.membership.read_membership`) in this
        backend's dialect."""
        m = read_membership(self.backend.value, *_keys_of(meta), application=True)
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

    # --- the native gang API's hooks (webhook.admission.native_backend); nothing for the others

    @property
    def makes_objects(self) -> bool:
        """Whether the backend has gang objects for the reconciler to make."""
        return self.podgroup is not None

    def unusable(self) -> str | None:
        """Why the backend cannot write a gang on this API server, else None."""
        return None

    def left_alone(self, group: str, kind: str, obj: Mapping[str, Any]) -> str | None:
        """Why a workload is left to its own controller's gang, else None."""
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
        instances: int | None,
        priority_class: str | None,
        roles: Sequence[tuple[str, int]] = (),
    ) -> list[PodGroupIntent]:
        """Gang objects other than a PodGroup (:attr:`podgroup`) for the reconciler;
        ``roles``: each role's name and how many of it the gang needs."""
        return []

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


def foreign_gang(meta: Mapping[str, Any] | None, backend: Backend) -> str | None:
    """The key of another scheduler's group an object is in, if any: a pod in another
    scheduler's gang is left alone, and so is a pod of a YuniKorn application (YuniKorn
    schedules it, as a gang only with task groups)."""
    labels, annotations = _keys_of(meta)
    for dialect in membership.DIALECTS:
        if dialect in (backend.value, "corral"):
            continue
        m = read_membership(dialect, labels, annotations)
        if m is not None:
            return m.key
    app = membership.yunikorn_app_id(labels, annotations)
    if app is not None and backend is not Backend.YUNIKORN:
        return app[1]
    return None


class Volcano(Dialect):
    backend = Backend.VOLCANO
    podgroup = PodGroupKind("scheduling.volcano.sh", "v1beta1")

    def member_keys(
        self, gang: GangInfo, *, role: str | None, task_groups: Sequence[TaskGroup] | None
    ) -> Keys:
        ann = {membership.VOLCANO_GROUP_NAME: gang.name}
        if gang.queue:
            ann[membership.VOLCANO_QUEUE_NAME] = gang.queue
        if gang.timeout_seconds:
            ann[membership.VOLCANO_SLA_WAITING_TIME] = format_duration(gang.timeout_seconds)
        return Keys(annotations=ann)

    def podgroup_body(
        self,
        gang: GangInfo,
        namespace: str,
        priority_class: str | None,
        min_resources: Mapping[str, str],
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {"minMember": gang.min_member}
        if gang.queue:
            spec["queue"] = gang.queue
        if priority_class:
            spec["priorityClassName"] = priority_class
        if min_resources:
            spec["minResources"] = dict(min_resources)
        if gang.spec_extra:
            spec.update(gang.spec_extra)
        timeout = gang.timeout_seconds
        ann = {membership.VOLCANO_SLA_WAITING_TIME: format_duration(timeout)} if timeout else None
        return self._podgroup_object(gang, namespace, spec, ann)


class Coscheduling(Dialect):
    backend = Backend.COSCHEDULING
    podgroup = PodGroupKind("scheduling.x-k8s.io", "v1alpha1")

    def member_keys(
        self, gang: GangInfo, *, role: str | None, task_groups: Sequence[TaskGroup] | None
    ) -> Keys:
        return Keys(labels={membership.COSCHED_POD_GROUP_LABEL: gang.name})

    def podgroup_body(
        self,
        gang: GangInfo,
        namespace: str,
        priority_class: str | None,
        min_resources: Mapping[str, str],
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {"minMember": gang.min_member}
        if min_resources:
            spec["minResources"] = dict(min_resources)
        if gang.timeout_seconds:
            spec["scheduleTimeoutSeconds"] = gang.timeout_seconds
        return self._podgroup_object(gang, namespace, spec)


def task_groups_json(groups: Sequence[TaskGroup]) -> str:
    """The ``yunikorn.apache.org/task-groups`` value; byte-stable so that a second
    admission of the same object compares equal and patches nothing."""
    return orjson.dumps([g.to_json() for g in groups], option=orjson.OPT_SORT_KEYS).decode()


class YuniKorn(Dialect):
    backend = Backend.YUNIKORN

    def member_keys(
        self, gang: GangInfo, *, role: str | None, task_groups: Sequence[TaskGroup] | None
    ) -> Keys:
        labels = {membership.YUNIKORN_APP_ID_LABEL: gang.name}
        if gang.queue:
            labels[membership.YUNIKORN_QUEUE_LABEL] = gang.queue
        ann: dict[str, str] = {}
        if task_groups and role:
            ann[membership.YUNIKORN_TASK_GROUP_NAME] = role
            ann[membership.YUNIKORN_TASK_GROUPS] = task_groups_json(task_groups)
            if gang.timeout_seconds:
                ann[membership.YUNIKORN_POLICY] = (
                    f"placeholderTimeoutInSeconds={gang.timeout_seconds}"
                )
        return Keys(labels=labels, annotations=ann)


class Kueue(Dialect):
    backend = Backend.KUEUE
    templates_carry_keys = False

    def member_keys(
        self, gang: GangInfo, *, role: str | None, task_groups: Sequence[TaskGroup] | None
    ) -> Keys:
        # A plain pod group: every pod names the group and its total count. A gang of
        # one is just a pod in a queue.
        labels: dict[str, str] = {}
        ann: dict[str, str] = {}
        if gang.queue:
            labels[membership.KUEUE_QUEUE_LABEL] = gang.queue
        total = gang.size if gang.size is not None else gang.min_member
        if total > 1:
            labels[membership.KUEUE_POD_GROUP_LABEL] = gang.name
            ann[membership.KUEUE_TOTAL_COUNT] = str(total)
        return Keys(labels=labels, annotations=ann)

    def workload_keys(self, gang: GangInfo) -> Keys:
        return Keys(labels={membership.KUEUE_QUEUE_LABEL: gang.queue} if gang.queue else {})


_DIALECTS: dict[Backend, type[Dialect]] = {
    Backend.VOLCANO: Volcano,
    Backend.COSCHEDULING: Coscheduling,
    Backend.YUNIKORN: YuniKorn,
    Backend.KUEUE: Kueue,
}


# The dialect of each config in use (and what the API server serves), by id (a config is
# immutable once loaded): admit() asks for it on every request.
_CACHE: dict[tuple[int, Served | None], tuple[WebhookConfig, Dialect]] = {}


def _make(config: WebhookConfig, served: Served | None) -> Dialect:
    if config.backend is Backend.KAI:
        from webhook.admission.kai import Kai  # its own module, built on this one

        return Kai(config)
    if config.backend is Backend.KUBERNETES:
        from webhook.admission.native_backend import Kubernetes

        return Kubernetes(config, served)
    return _DIALECTS[config.backend](config)


def dialect_for(config: WebhookConfig, served: Served | None = None) -> Dialect:
    """The configured backend's dialect, made once per config; ``served``: what the API
    server serves (:mod:`webhook.served`), which the ``kubernetes`` backend writes for."""
    hit = _CACHE.get((id(config), served))
    if hit is None or hit[0] is not config:
        if len(_CACHE) > 16:
            _CACHE.clear()
        hit = (config, _make(config, served))
        _CACHE[(id(config), served)] = hit
    return hit[1]
