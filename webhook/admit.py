"""The pure admission function: an AdmissionReview in, a response (and the PodGroups
wanted) out. No I/O and no clock; the only module state memoises pure functions. The
same review, cluster view and config always give the same answer, and a second pass
over the patched object finds nothing left to patch (``reinvocationPolicy: IfNeeded``).

Workloads (a table entry in :mod:`webhook.workloads`) become gangs at CREATE: the gang
size is the sum of the pods their templates make, every template gets the backend's
keys, and the pods inherit them. Pods that already carry those keys are made
consistent; a bare pod with ``corral.dev/gang`` joins that gang; other pods follow the
configured default. docs/annotations.md lists the keys.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from gangplace.engine import Gang, PodShape, ShapeError, TaskRole, shape_from_pod
from gangplace.engine.model import GPU_SHARE_COUNT, GPU_SHARE_MILLI, GPU_SHARE_MODEL

from . import keys as K
from .backends import Dialect, GangInfo, Keys, TaskGroup, dialect_for
from .cluster import ClusterState, check_gang
from .config import Backend, NodePool, WebhookConfig
from .patch import Editor, PatchError, Pointer
from .podgroups import OwnerHint, OwnerRef, PodGroupIntent
from .quantities import resource_list
from .validate import (
    InvalidValue,
    MinAvailable,
    check_gang_name,
    check_queue,
    derived_name,
    parse_duration,
    parse_min_available,
)
from .workloads import ResolvedRole, WorkloadError, WorkloadKind, resolve_roles

__all__ = ["API_VERSION", "AdmitResult", "ReviewError", "admit", "decode_patch"]

API_VERSION: Final = "admission.k8s.io/v1"
# Warnings longer than this may be cut by the API server.
_WARNING_MAX = 250


class ReviewError(ValueError):
    """The body is not an AdmissionReview this webhook can answer (HTTP 400)."""


@dataclass(slots=True)
class AdmitResult:
    """The answer to one review. ``review`` is the AdmissionReview to send back."""

    review: dict[str, Any]
    uid: str
    operation: str
    kind: str
    outcome: str  # patched | unchanged | skipped | unhandled | denied
    patch: list[dict[str, Any]] = field(default_factory=list)
    warnings: tuple[str, ...] = ()
    intents: tuple[PodGroupIntent, ...] = ()
    hints: tuple[OwnerHint, ...] = ()
    dry_run: bool = False
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return bool(self.review["response"]["allowed"])


def decode_patch(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch in an AdmissionResponse (``[]`` if none)."""
    raw = response.get("patch")
    if not raw:
        return []
    ops: list[dict[str, Any]] = orjson.loads(base64.b64decode(raw))
    return ops


# --- the request envelope ---------------------------------------------------------------


@dataclass(slots=True)
class _Request:
    uid: str
    operation: str
    group: str
    version: str
    kind: str
    namespace: str
    obj: Mapping[str, Any] | None
    dry_run: bool
    sub_resource: str


def _str_field(m: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    v = m.get(key)
    if v.__class__ is str:
        return v
    if v is None and not required:
        return ""
    raise ReviewError(f"{where}.{key}: expected a string, got {type(v).__name__}")


def _parse(review: Any) -> _Request:
    if review.__class__ is not dict:
        raise ReviewError("expected a JSON object: an AdmissionReview")
    kind, api = review.get("kind"), review.get("apiVersion")
    if kind != "AdmissionReview":
        raise ReviewError(f"kind {kind!r}: expected AdmissionReview")
    if api != API_VERSION:
        raise ReviewError(f"apiVersion {api!r}: only {API_VERSION} is served")
    req = review.get("request")
    if req.__class__ is not dict:
        raise ReviewError("request: expected an object")
    uid = _str_field(req, "uid", "request")
    if not uid:
        raise ReviewError("request.uid: must not be empty")
    gvk = req.get("kind")
    if gvk.__class__ is not dict:
        raise ReviewError("request.kind: expected an object with group, version and kind")
    obj = req.get("object")
    if obj is not None and obj.__class__ is not dict:
        raise ReviewError("request.object: expected an object")
    dry = req.get("dryRun")
    if dry is not None and dry.__class__ is not bool:
        raise ReviewError("request.dryRun: expected true or false")
    return _Request(
        uid,
        _str_field(req, "operation", "request"),
        _str_field(gvk, "group", "request.kind", required=False),
        _str_field(gvk, "version", "request.kind"),
        _str_field(gvk, "kind", "request.kind"),
        _str_field(req, "namespace", "request", required=False),
        obj,
        bool(dry),
        _str_field(req, "subResource", "request", required=False),
    )


# --- responses --------------------------------------------------------------------------


def _review(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def _pass(req: _Request, kind: str, outcome: str, reason: str = "") -> AdmitResult:
    return AdmitResult(
        _review({"uid": req.uid, "allowed": True}),
        req.uid,
        req.operation,
        kind,
        outcome,
        dry_run=req.dry_run,
        reason=reason,
    )


def _deny(req: _Request, kind: str, code: int, reason: str, message: str) -> AdmitResult:
    response = {
        "uid": req.uid,
        "allowed": False,
        "status": {"code": code, "reason": reason, "message": message},
    }
    return AdmitResult(
        _review(response),
        req.uid,
        req.operation,
        kind,
        "denied",
        dry_run=req.dry_run,
        reason=message,
    )


def _cap(text: str) -> str:
    return text if len(text) <= _WARNING_MAX else text[: _WARNING_MAX - 3] + "..."


# --- shared helpers ---------------------------------------------------------------------

_DIALECTS: dict[int, tuple[WebhookConfig, Dialect]] = {}


def _dialect(config: WebhookConfig) -> Dialect:
    hit = _DIALECTS.get(id(config))
    if hit is None or hit[0] is not config:
        if len(_DIALECTS) > 16:
            _DIALECTS.clear()
        hit = (config, dialect_for(config))
        _DIALECTS[id(config)] = hit
    return hit[1]


def _first(sources: Sequence[Mapping[str, str]], key: str) -> str | None:
    for values in sources:
        v = values.get(key)
        if v is not None:
            return v
    return None


@dataclass(slots=True)
class _Values:
    gang: str | None
    min_available: MinAvailable | None
    queue: str | None
    timeout: int | None
    warnings: list[str]


def _read_values(
    sources: Sequence[Mapping[str, str]],
    size: int | None,
    config: WebhookConfig,
    namespace: str,
    *,
    check_min: bool,
) -> _Values:
    """The user's corral.dev values (``sources``: :func:`keys.user_values` of each
    object, the first that has a key wins), checked, with
    the config's defaults. Raises InvalidValue with every problem found."""
    errors: list[InvalidValue] = []
    warnings: list[str] = []
    gang = minv = queue = timeout = None
    if (raw := _first(sources, K.GANG)) is not None:
        try:
            gang = check_gang_name(K.GANG, raw)
        except InvalidValue as e:
            errors.append(e)
    if check_min and (raw := _first(sources, K.MIN_AVAILABLE)) is not None:
        try:
            minv = parse_min_available(K.MIN_AVAILABLE, raw, size)
        except InvalidValue as e:
            errors.append(e)
    raw_q = _first(sources, K.QUEUE)
    if raw_q is not None:
        try:
            queue = check_queue(K.QUEUE, raw_q)
        except InvalidValue as e:
            errors.append(e)
        if config.backend is Backend.COSCHEDULING:
            warnings.append(f"corral: {K.QUEUE} is ignored: the coscheduling backend has no queues")
            queue = None
    elif config.backend is not Backend.COSCHEDULING:
        queue = config.queue_for(namespace)
    if (raw := _first(sources, K.GANG_TIMEOUT)) is not None:
        try:
            timeout = parse_duration(K.GANG_TIMEOUT, raw)
        except InvalidValue as e:
            errors.append(e)
        if config.backend is Backend.KUEUE:
            warnings.append(
                f"corral: {K.GANG_TIMEOUT} is ignored: Kueue has no per-gang timeout key"
            )
    else:
        timeout = config.timeout_seconds
    if errors:
        raise _Invalid(errors)
    return _Values(gang, minv, queue, timeout, warnings)


class _Invalid(ValueError):
    def __init__(self, errors: list[InvalidValue]) -> None:
        super().__init__("; ".join(str(e) for e in errors))


def _apply(ed: Editor, base: Pointer, keys: Keys, *, fill_only: bool) -> None:
    """Write ``keys`` on the metadata at ``base``; touch a map only if it changes."""
    for fld, wanted in (("labels", keys.labels), ("annotations", keys.annotations)):
        if not wanted:
            continue
        path = (*base, "metadata", fld)
        current = ed.get(path) or {}
        if not isinstance(current, dict):
            raise PatchError(f"{'.'.join(map(str, path))}: expected a map of strings")
        if fill_only:
            changes = {k: v for k, v in wanted.items() if k not in current}
        else:
            changes = {k: v for k, v in wanted.items() if current.get(k) != v}
        if changes:
            ed.map(path).update(changes)


# What the API server writes when a pod names no scheduler: ours to replace.
_DEFAULT_SCHEDULER = "default-scheduler"


def _foreign_scheduler(spec: Any, ours: str | None) -> str | None:
    """The scheduler a pod (template) chose itself, if it is neither the default nor
    ours: such a pod is left alone rather than taken from the scheduler it asked for."""
    if ours is None or not isinstance(spec, dict):
        return None
    name = spec.get("schedulerName")
    if isinstance(name, str) and name not in ("", _DEFAULT_SCHEDULER, ours):
        return name
    return None


def _set_scheduler(ed: Editor, base: Pointer, name: str | None) -> None:
    if name is None:
        return
    path = (*base, "spec", "schedulerName")
    if ed.get(path) != name:
        ed.set(path, name)


def _pin(ed: Editor, base: Pointer, pool: NodePool | None) -> None:
    """Required node affinity to the pool label, ANDed into every term (terms are
    ORed, so each must carry it)."""
    if pool is None:
        return
    req = {"key": pool.key, "operator": "In", "values": [pool.value]}
    path = (*base, "spec", "affinity")
    current = ed.get(path)
    terms = _terms(current)
    if terms and all(
        isinstance(t, dict) and req in (t.get("matchExpressions") or ()) for t in terms
    ):
        return
    new = ed.tree(path)
    if not isinstance(new, dict):
        new = {}
    where = ".".join(str(p) for p in path)
    node = new
    for field_ in ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        node = node.setdefault(field_, {})
        if not isinstance(node, dict):
            raise PatchError(f"{where}.{field_}: expected an object")
        where = f"{where}.{field_}"
    new_terms = node.setdefault("nodeSelectorTerms", [])
    if not isinstance(new_terms, list) or not all(isinstance(t, dict) for t in new_terms):
        raise PatchError(f"{where}.nodeSelectorTerms: expected a list of objects")
    if not new_terms:
        new_terms.append({"matchExpressions": [req]})
    for t in new_terms:
        exprs = t.setdefault("matchExpressions", [])
        if not isinstance(exprs, list):
            raise PatchError(f"{where}.nodeSelectorTerms: matchExpressions must be a list")
        if req not in exprs:
            exprs.append(req)
    ed.set(path, new)


def _terms(affinity: Any) -> list[Any]:
    try:
        terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
    except (KeyError, TypeError):
        return []
    return terms if isinstance(terms, list) else []


def _view(ed: Editor, base: Pointer) -> dict[str, Any]:
    """A pod (or template) as it will be after the edits, for the engine to read.
    A spec or metadata that is not an object reads as empty (the patch will refuse it)."""
    spec = ed.get((*base, "spec"))
    if not isinstance(spec, dict):
        spec = {}
    affinity = ed.get((*base, "spec", "affinity"))
    if affinity is not spec.get("affinity"):
        spec = {**spec, "affinity": affinity}
    meta = ed.get((*base, "metadata"))
    return {"metadata": meta if isinstance(meta, dict) else {}, "spec": spec}


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


def _shape(view: Mapping[str, Any], config: WebhookConfig) -> PodShape | None:
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


def _controller(meta: Mapping[str, Any]) -> OwnerRef | None:
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for r in refs:
        if isinstance(r, dict) and r.get("controller") is True:
            kind, name = r.get("kind"), r.get("name")
            if isinstance(kind, str) and isinstance(name, str):
                return OwnerRef(str(r.get("apiVersion") or ""), kind, name, str(r.get("uid") or ""))
    return None


def _feasibility(
    cluster: ClusterState | None,
    config: WebhookConfig,
    gang: str,
    roles: Sequence[tuple[str, PodShape, int]],
    required: int,
) -> tuple[str | None, list[str]]:
    """(deny message or None, warnings) from the engine's verdict on this gang."""
    if cluster is None:
        return None, []
    v = check_gang(cluster, gang, roles, required, now=config.warn_when_full)
    if v.never:
        msg = (
            f"corral: gang {gang} can never start on this cluster (even if it were empty): "
            f"{v.never}"
        )
        if config.infeasible == "deny":
            return msg, []
        return None, [_cap(msg)]
    if v.now:
        return None, [_cap(f"corral: gang {gang} cannot start now: {v.now}")]
    return None, []


def _finish(
    req: _Request,
    kind: str,
    ed: Editor,
    warnings: Sequence[str],
    intents: Sequence[PodGroupIntent] = (),
    hints: Sequence[OwnerHint] = (),
) -> AdmitResult:
    ops = ed.ops()
    response: dict[str, Any] = {"uid": req.uid, "allowed": True}
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(ops)).decode()
    if warnings:
        response["warnings"] = list(warnings)
    return AdmitResult(
        _review(response),
        req.uid,
        req.operation,
        kind,
        "patched" if ops else "unchanged",
        ops,
        tuple(warnings),
        () if req.dry_run else tuple(intents),
        () if req.dry_run else tuple(hints),
        req.dry_run,
    )


# --- workloads --------------------------------------------------------------------------


def _admit_workload(
    req: _Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    entry: WorkloadKind,
    cluster: ClusterState | None,
    config: WebhookConfig,
) -> AdmitResult:
    dialect = _dialect(config)
    kind = entry.kind
    if config.backend is Backend.KUEUE and _controller(meta) is not None:
        # A child (a JobSet's Job): Kueue manages the parent, which carries the queue.
        return _pass(req, kind, "unchanged", "owned by a workload that Kueue manages")
    roles = resolve_roles(entry, obj)
    if not roles:
        return _pass(req, kind, "unchanged", "no pod templates")
    for r in roles:
        chosen = _foreign_scheduler(r.template.get("spec"), config.effective_scheduler_name)
        if chosen is not None:
            return _pass(req, kind, "unchanged", f"a pod template asks for scheduler {chosen}")
    templates = [
        r.template.get("metadata") if isinstance(r.template.get("metadata"), dict) else None
        for r in roles
    ]
    existing = next((g for g in (dialect.membership(m) for m in templates) if g), None)
    size = sum(r.count for r in roles)
    if existing is None and size < 1:
        return _pass(req, kind, "unchanged", "no pods to gang (size 0)")
    sources = [K.user_values(m) for m in (meta, *templates)]
    # A workload whose templates already name a gang (made by a gang-forming parent)
    # is only made consistent: no new gang, no size checks, no PodGroup.
    values = _read_values(sources, size, config, req.namespace, check_min=existing is None)
    ed = Editor(obj)
    fill_only = existing is not None
    if existing is not None:
        name = existing
    elif values.gang is not None:
        name = values.gang
    else:
        name = _workload_gang_name(kind, meta, req.uid)
    if fill_only:
        min_member = 1  # the parent's PodGroup holds the real one; unused here
    elif values.min_available is not None:
        min_member = values.min_available.resolve(size)
    else:
        min_member = _default_min(config.min_available_for(entry, kind), size)
    gang = GangInfo(name, min_member, size, values.queue, values.timeout)

    # Pin first: the engine must see the pods as they will be.
    for r in roles:
        _pin(ed, r.pointer, config.node_pool)
    shaped = _GangShapes(name, roles, ed, config, min_member)

    warnings = list(values.warnings)
    if dialect.templates_carry_keys:
        task_groups = (
            shaped.task_groups() if config.backend is Backend.YUNIKORN and not fill_only else None
        )
        for r in roles:
            _apply(
                ed,
                r.pointer,
                dialect.member_keys(gang, role=r.name, task_groups=task_groups),
                fill_only=fill_only,
            )
            _set_scheduler(ed, r.pointer, config.effective_scheduler_name)
    elif not fill_only:
        _apply(ed, (), dialect.workload_keys(gang), fill_only=False)

    if fill_only:
        # The parent was told about its values already; its children stay quiet. A
        # child made by its parent's controller names the parent with its uid: the
        # PodGroup reconciler learns the owner's uid from it without a lookup.
        hints = []
        parent = _controller(meta)
        if parent is not None and parent.uid and dialect.podgroup is not None:
            hints.append(OwnerHint(dialect.podgroup.api_version, req.namespace, name, parent))
        return _finish(req, kind, ed, [], hints=hints)

    if cluster is not None and shaped.shapes() is not None:
        deny, more = _feasibility(cluster, config, name, shaped.roles_for_engine(), min_member)
        if deny is not None:
            return _deny(req, kind, 403, "Forbidden", deny)
        warnings.extend(more)

    intents: list[PodGroupIntent] = []
    if dialect.podgroup is not None:
        api_version = obj.get("apiVersion") if isinstance(obj.get("apiVersion"), str) else None
        owner = OwnerRef(
            api_version or f"{req.group}/{req.version}",
            kind,
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
        )
        intents.append(_podgroup_intent(dialect, gang, req.namespace, shaped, owner))
    return _finish(req, kind, ed, warnings, intents)


def _podgroup_intent(
    dialect: Dialect,
    gang: GangInfo,
    namespace: str,
    shaped: _GangShapes,
    owner: OwnerRef | None,
) -> PodGroupIntent:
    """The gang's PodGroup for the reconciler; its body is rendered when it is made."""
    assert dialect.podgroup is not None

    def body() -> dict[str, Any]:
        out = dialect.podgroup_body(
            gang, namespace, shaped.priority_class(), shaped.min_resources()
        )
        assert out is not None
        return out

    kind = dialect.podgroup
    return PodGroupIntent(kind.api_version, kind.plural, namespace, gang.name, body, owner)


class _GangShapes:
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
        "roles",
    )

    def __init__(
        self,
        name: str,
        roles: Sequence[ResolvedRole],
        editor: Editor,
        config: WebhookConfig,
        min_member: int,
    ) -> None:
        self.name, self.roles, self.editor = name, roles, editor
        self.config, self.min_member = config, min_member
        self._done = False
        self._views: list[dict[str, Any]] | None = None
        self._shapes: list[PodShape] | None = None
        self._per_role: list[int] | None = None

    @property
    def views(self) -> list[dict[str, Any]]:
        if self._views is None:
            self._views = [_view(self.editor, r.pointer) for r in self.roles]
        return self._views

    def _compute(self) -> None:
        self._done = True
        shapes = []
        for v in self.views:
            s = _shape(v, self.config)
            if s is None:
                return  # unreadable resources: no engine answers, no minResources
            shapes.append(s)
        self._shapes = shapes
        model = Gang(
            self.name,
            tuple(TaskRole(r.name, s, r.count) for r, s in zip(self.roles, shapes, strict=True)),
            self.min_member,
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


def _default_min(raw: str, size: int) -> int:
    """A configured default, clamped to the gang: a default of "8" on a gang of 4 means
    all 4 (the config was checked at load, so it parses)."""
    return min(size, parse_min_available("defaultMinAvailable", raw, 2**62).resolve(size))


def _workload_gang_name(kind: str, meta: Mapping[str, Any], uid: str) -> str:
    name = meta.get("name")
    if isinstance(name, str) and name:
        return derived_name(kind, name)
    # generateName only: the final name is not known yet; the request uid keeps it
    # unique, and reinvocation reads the name back from the keys written now.
    prefix = str(meta.get("generateName") or "").rstrip("-")
    return derived_name(kind, prefix, uid[:8])


# --- pods -------------------------------------------------------------------------------

_ROLE = "members"


def _admit_pod(
    req: _Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    cluster: ClusterState | None,
    config: WebhookConfig,
) -> AdmitResult:
    dialect = _dialect(config)
    owner = _controller(meta)
    by_workload = owner is not None and config.table.owns(owner.api_version, owner.kind)
    if config.backend is Backend.KUEUE and by_workload:
        return _pass(req, "Pod", "unchanged", "pod of a workload that Kueue manages")
    chosen = _foreign_scheduler(obj.get("spec"), config.effective_scheduler_name)
    if chosen is not None:
        return _pass(req, "Pod", "unchanged", f"asks for scheduler {chosen}")
    existing = dialect.membership(meta)
    given = K.user_values(meta)
    has_keys = any(k in given for k in K.USER_KEYS)
    if existing is not None:
        mode = "consistent"
    elif has_keys:
        mode = "gang"
    elif by_workload:
        # Its workload was left alone (skipped, or made before corral): so is it.
        return _pass(req, "Pod", "unchanged", "pod of a workload that is not a gang")
    elif config.non_gang_pods == "single-pod-gang":
        mode = "single"
    else:
        return _pass(req, "Pod", "unchanged", "not a gang member")
    if mode == "gang" and by_workload and owner is not None:
        raw_min = given.get(K.MIN_AVAILABLE, "").strip()
        if raw_min.endswith("%"):
            # Its workload was not made a gang (made before corral, or while the webhook
            # was away): a percentage needs the workload's size, which a pod cannot
            # know. Refusing would block the workload for good; it runs as it is.
            return _finish(
                req,
                "Pod",
                Editor(obj),
                [
                    f'{K.MIN_AVAILABLE}: "{raw_min}" left alone: this pod\'s '
                    f"{owner.kind} {owner.name} was not made a gang when it was created, and "
                    "a pod cannot resolve a percentage; recreate the workload to gang it"
                ],
            )

    values = _read_values([given], None, config, req.namespace, check_min=mode == "gang")
    if existing is not None:
        name = existing
    elif values.gang is not None:
        name = values.gang
    elif owner is not None:
        name = derived_name(owner.kind, owner.name)
    else:
        name = _pod_gang_name(meta, req.uid)
    min_member = (
        values.min_available.count if values.min_available and values.min_available.count else 1
    )
    gang = GangInfo(name, min_member, None, values.queue, values.timeout)

    ed = Editor(obj)
    _pin(ed, (), config.node_pool)
    # A pod on its own: one role of min_member pods shaped like it.
    shaped = _GangShapes(name, [ResolvedRole(_ROLE, (), obj, min_member)], ed, config, min_member)
    task_groups = None
    if config.backend is Backend.YUNIKORN and mode != "consistent" and min_member > 1:
        task_groups = shaped.task_groups()
    _apply(
        ed,
        (),
        dialect.member_keys(gang, role=_ROLE if task_groups else None, task_groups=task_groups),
        fill_only=mode == "consistent",
    )
    _set_scheduler(ed, (), config.effective_scheduler_name)
    warnings = list(values.warnings)

    if mode == "consistent":
        hints = []
        if owner is not None and owner.uid and dialect.podgroup is not None:
            hints.append(OwnerHint(dialect.podgroup.api_version, req.namespace, name, owner))
        # Made from a template admitted before: its warnings were given then.
        return _finish(req, "Pod", ed, [], hints=hints)

    if cluster is not None and shaped.shapes() is not None:
        deny, more = _feasibility(cluster, config, name, shaped.roles_for_engine(), min_member)
        if deny is not None:
            return _deny(req, "Pod", 403, "Forbidden", deny)
        warnings.extend(more)

    intents = []
    if dialect.podgroup is not None:
        pod_owner: OwnerRef | None = owner
        if pod_owner is None:
            pod_name = meta.get("name")
            # A bare pod owns its gang's PodGroup. Without a name (generateName only)
            # there is no way to find it again, and a PodGroup nobody owns beats pods
            # that wait for one forever.
            pod_owner = (
                OwnerRef("v1", "Pod", pod_name) if isinstance(pod_name, str) and pod_name else None
            )
        intents.append(_podgroup_intent(dialect, gang, req.namespace, shaped, pod_owner))
    return _finish(req, "Pod", ed, warnings, intents)


def _pod_gang_name(meta: Mapping[str, Any], uid: str) -> str:
    name = meta.get("name")
    if isinstance(name, str) and name:
        return derived_name(name)
    prefix = str(meta.get("generateName") or "pod").rstrip("-")
    return derived_name(prefix, uid[:8])


# --- the entry point --------------------------------------------------------------------


def admit(review: Any, cluster: ClusterState | None, config: WebhookConfig) -> AdmitResult:
    """Answer one AdmissionReview (admission.k8s.io/v1).

    ``cluster`` is the current view (None: no feasibility checks). Raises ReviewError
    when ``review`` is not an AdmissionReview (the server answers HTTP 400); every
    other problem is an answer: ``allowed: false`` with a message for bad user values.
    """
    req = _parse(review)
    is_pod = req.group == "" and req.kind == "Pod"
    entry = None if is_pod else config.table.get(req.group, req.version, req.kind)
    # Metric label: only kinds we know, so junk requests cannot grow the label set.
    kind_label = "Pod" if is_pod else entry.kind if entry is not None else "other"
    if req.operation != "CREATE" or req.sub_resource:
        return _pass(req, kind_label, "unchanged", "not a CREATE")
    obj = req.obj
    if obj is None:
        raise ReviewError("request.object: missing on a CREATE")
    meta = obj.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ReviewError("request.object.metadata: expected an object")
    if req.namespace in config.skipped_namespaces:
        return _pass(req, kind_label, "skipped", f"namespace {req.namespace} is excluded")
    if K.is_skipped(meta):
        return _pass(req, kind_label, "skipped", f"{K.SKIP} is set")
    if not is_pod and entry is None:
        return _pass(
            req,
            "other",
            "unhandled",
            f"kind {req.group}/{req.version} {req.kind} is not in the table",
        )
    try:
        if is_pod:
            return _admit_pod(req, obj, meta, cluster, config)
        assert entry is not None
        return _admit_workload(req, obj, meta, entry, cluster, config)
    except (_Invalid, InvalidValue, WorkloadError, PatchError) as e:
        return _deny(req, kind_label, 400, "BadRequest", str(e))
