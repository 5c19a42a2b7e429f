"""The gang a review makes, decided the same way for pods and workloads: the user's
corral.dev values checked with the config's defaults, the engine's reading of its pods,
the feasibility verdict, and the PodGroup it wants."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from gangplace.engine import Gang, PodShape, ShapeError, TaskRole, shape_from_pod
from gangplace.engine.model import GPU_SHARE_COUNT, GPU_SHARE_MILLI, GPU_SHARE_MODEL

from webhook.admission import keys as K
from webhook.admission.backends.dialect import Dialect, TaskGroup
from webhook.admission.cluster_fit import ClusterCapacity, check_gang
from webhook.admission.decision import cap
from webhook.admission.mutation import view
from webhook.admission.patch import Editor
from webhook.admission.quantities import resource_list
from webhook.admission.roles import ResolvedRole
from webhook.admission.validate import (
    InvalidValue,
    MinAvailable,
    check_checkpoint_interval,
    check_duration,
    check_gang_name,
    check_queue,
    parse_min_available,
    parse_network_topology,
)
from webhook.podgroup_intent import OwnerRef

if TYPE_CHECKING:
    from webhook.config import WebhookConfig

__all__ = [
    "GangShapes",
    "Invalid",
    "Values",
    "controller",
    "feasibility",
    "read_values",
    "shape",
]


def _merged(sources: Sequence[Mapping[str, str]]) -> Mapping[str, str]:
    """The values of ``sources`` as one map, the first source that has a key winning."""
    if len(sources) == 1:
        return sources[0]
    out: dict[str, str] = {}
    for values in reversed(sources):
        out.update(values)
    return out


@dataclass(slots=True)
class Values:
    gang: str | None
    min_available: MinAvailable | None
    queue: str | None
    timeout: int | None
    warnings: list[str]
    topology: dict[str, Any] | None = None


def read_values(
    sources: Sequence[Mapping[str, str]],
    size: int | None,
    config: WebhookConfig,
    backend: Dialect,
    namespace: str,
    *,
    check_min: bool,
) -> Values:
    """The user's corral.dev values (``sources``: :func:`keys.user_values` of each
    object, the first that has a key wins), checked, with the config's defaults; what
    ``backend`` cannot write is dropped with a warning. Raises InvalidValue with every
    problem found."""
    errors: list[InvalidValue] = []
    warnings: list[str] = []
    gang = minv = queue = timeout = None
    given = _merged(sources)
    if (raw := given.get(K.GANG)) is not None:
        try:
            gang = check_gang_name(K.GANG, raw)
        except InvalidValue as e:
            errors.append(e)
    if check_min and (raw := given.get(K.MIN_AVAILABLE)) is not None:
        try:
            minv = parse_min_available(K.MIN_AVAILABLE, raw, size)
        except InvalidValue as e:
            errors.append(e)
    raw_q = given.get(K.QUEUE)
    if raw_q is not None:
        try:
            queue = check_queue(K.QUEUE, raw_q)
        except InvalidValue as e:
            errors.append(e)
        if not backend.has_queues:
            warnings.append(
                f"corral: {K.QUEUE} is ignored: the {backend.name} backend has no queues"
            )
            queue = None
    elif backend.has_queues:
        queue = config.queue_for(namespace)
    if (raw := given.get(K.GANG_TIMEOUT)) is not None:
        try:
            timeout = check_duration(K.GANG_TIMEOUT, raw)
        except InvalidValue as e:
            errors.append(e)
        if backend.no_timeout is not None:
            warnings.append(f"corral: {K.GANG_TIMEOUT} is ignored: {backend.no_timeout}")
    else:
        timeout = config.timeout_seconds
    if (raw := given.get(K.CHECKPOINT_INTERVAL)) is not None:
        try:  # the descheduler reads it (gangplace.engine.checkpoints); refused here
            check_checkpoint_interval(K.CHECKPOINT_INTERVAL, raw)
        except InvalidValue as e:
            errors.append(e)
    topology = None
    if (raw := given.get(K.NETWORK_TOPOLOGY)) is not None:
        try:
            topology = parse_network_topology(K.NETWORK_TOPOLOGY, raw)
        except InvalidValue as e:
            errors.append(e)
        if not backend.writes_topology:
            warnings.append(
                f"corral: {K.NETWORK_TOPOLOGY} is ignored: only the volcano backend writes it"
            )
            topology = None
    if errors:
        raise Invalid(errors)
    return Values(gang, minv, queue, timeout, warnings, topology)


class Invalid(ValueError):
    def __init__(self, errors: list[InvalidValue]) -> None:
        super().__init__("; ".join(str(e) for e in errors))


# The engine's reading of a pod is pure, and every pod of a workload reads the same:
# memoise it on the fields it reads (resources and placement constraints only -- the
# rest of a pod, such as its per-pod volume names, does not matter).
_SHAPES: dict[bytes, PodShape | None] = {}
_SHAPES_MAX = 4096
_SHARE_KEYS = (GPU_SHARE_MILLI, GPU_SHARE_COUNT, GPU_SHARE_MODEL)


def _shape_key(view: Mapping[str, Any], config: WebhookConfig) -> bytes | None:
    spec, meta = view.get("spec"), view.get("metadata")
    if not isinstance(spec, dict):
        return None
    containers = spec.get("containers")
    inits = spec.get("initContainers")
    if not isinstance(containers, list) or not isinstance(inits, (list, type(None))):
        return None
    ann = meta.get("annotations") if isinstance(meta, dict) else None
    share = [ann.get(k) for k in _SHARE_KEYS] if isinstance(ann, dict) else None
    try:
        return orjson.dumps(
            (
                [c.get("resources") if isinstance(c, dict) else c for c in containers],
                [
                    (c.get("resources"), c.get("restartPolicy")) if isinstance(c, dict) else c
                    for c in inits or ()
                ],
                spec.get("overhead"),
                spec.get("nodeSelector"),
                spec.get("affinity"),
                spec.get("tolerations"),
                share,
                config.engine.gpu_resources,
            )
        )
    except TypeError:
        return None


def _read_shape(view: Mapping[str, Any], config: WebhookConfig) -> PodShape | None:
    try:
        return shape_from_pod(view, config.engine.gpu_resources)
    except ShapeError:
        return None


def shape(view: Mapping[str, Any], config: WebhookConfig) -> PodShape | None:
    """The engine's shape of a pod (None if it cannot read it)."""
    key = _shape_key(view, config)
    if key is None:
        return _read_shape(view, config)
    if key in _SHAPES:
        return _SHAPES[key]
    if len(_SHAPES) >= _SHAPES_MAX:
        _SHAPES.clear()
    shape = _SHAPES[key] = _read_shape(view, config)
    return shape


def controller(meta: Mapping[str, Any]) -> OwnerRef | None:
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for r in refs:
        if isinstance(r, dict) and r.get("controller") is True:
            kind, name = r.get("kind"), r.get("name")
            if isinstance(kind, str) and isinstance(name, str):
                return OwnerRef(str(r.get("apiVersion") or ""), kind, name, str(r.get("uid") or ""))
    return None


def feasibility(
    cluster: ClusterCapacity | None,
    config: WebhookConfig,
    gang: str,
    roles: Sequence[tuple[str, PodShape, int]],
    required: int,
) -> tuple[str | None, list[str]]:
    """(deny message or None, warnings) from the engine's verdict on this gang."""
    if cluster is None:
        return None, []
    v = check_gang(cluster, gang, roles, required, now=config.warn_when_full, policy=config.policy)
    if v.never:
        msg = (
            f"corral: gang {gang} can never start on this cluster (even if it were empty): "
            f"{v.never}"
        )
        if config.infeasible == "deny":
            return msg, []
        return None, [cap(msg)]
    if v.now:
        return None, [cap(f"corral: gang {gang} cannot start now: {v.now}")]
    return None, []


class GangShapes:
    """The engine's reading of a gang's pod templates, made on first use: on the request
    path only when a feasibility check or YuniKorn's task groups need it; otherwise when
    the reconciler renders the PodGroup, once per gang rather than once per review. The
    templates are read as they are after the edits (a node-pool pin included)."""

    __slots__ = (
        "_done",
        "_per_role",
        "_shapes",
        "_views",
        "config",
        "editor",
        "min_member",
        "name",
        "reserve",
        "roles",
    )

    def __init__(
        self,
        name: str,
        roles: Sequence[ResolvedRole],
        editor: Editor,
        config: WebhookConfig,
        min_member: int,
        reserve: int | None = None,
    ) -> None:
        self.name, self.roles, self.editor = name, roles, editor
        self.config, self.min_member = config, min_member
        # How many members minResources covers: the minimum, or every pod where the
        # first pod makes the rest (a Spark driver its executors).
        self.reserve = min_member if reserve is None else max(reserve, min_member)
        self._done = False
        self._views: list[dict[str, Any]] | None = None
        self._shapes: list[PodShape] | None = None
        self._per_role: list[int] | None = None

    @property
    def views(self) -> list[dict[str, Any]]:
        if self._views is None:
            self._views = [view(self.editor, r) for r in self.roles]
        return self._views

    def _compute(self) -> None:
        self._done = True
        shapes = []
        for v in self.views:
            s = shape(v, self.config)
            if s is None:
                return  # unreadable resources: no engine answers, no minResources
            shapes.append(s)
        self._shapes = shapes
        model = Gang(
            self.name,
            tuple(TaskRole(r.name, s, r.count) for r, s in zip(self.roles, shapes, strict=True)),
            self.reserve,
        )
        self._per_role = model.required_per_role()

    def shapes(self) -> list[PodShape] | None:
        if not self._done:
            self._compute()
        return self._shapes

    def roles_for_engine(self) -> list[tuple[str, PodShape, int]]:
        shapes = self.shapes()
        assert shapes is not None
        return [(r.name, s, r.count) for r, s in zip(self.roles, shapes, strict=True)]

    def required_per_role(self) -> list[int] | None:
        """How many members of each role the gang needs (None: resources unreadable)."""
        if self.shapes() is None:
            return None
        return self._per_role

    def min_resources(self) -> dict[str, str]:
        """The requests of the minimum members (minAvailable filled role by role)."""
        shapes = self.shapes()
        if shapes is None or self._per_role is None:
            return {}
        return resource_list(zip(shapes, self._per_role, strict=True))

    def priority_class(self) -> str | None:
        for v in self.views:
            pc = v["spec"].get("priorityClassName")
            if isinstance(pc, str) and pc:
                return pc
        return None

    def task_groups(self) -> list[TaskGroup] | None:
        shapes = self.shapes()
        if shapes is None or self._per_role is None:
            return None
        out = []
        for r, v, s, need in zip(self.roles, self.views, shapes, self._per_role, strict=True):
            spec = v["spec"]
            out.append(
                TaskGroup(
                    r.name,
                    need,
                    resource_list([(s, 1)]),
                    spec.get("nodeSelector") or None,
                    spec.get("tolerations") or None,
                    spec.get("affinity") or None,
                )
            )
        return out
