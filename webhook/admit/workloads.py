"""The pure admission function: an AdmissionReview in, a response (and the PodGroups
wanted) out. No I/O and no clock; the only module state memoises pure functions. The
same review, cluster view and config always give the same answer, and a second pass
over the patched object finds nothing left to patch (``reinvocationPolicy: IfNeeded``).

Workloads (a table entry in :mod:`webhook.workloads`) become gangs at CREATE: the gang
size is the sum of the pods their templates make, every template gets the backend's
keys, and the pods inherit them. Pods that already carry those keys are made
consistent; a bare pod with ``corral.dev/gang`` joins that gang; other pods follow the
configured default. At UPDATE a workload is never patched: its PodGroup follows its
replica counts, and a suspended workload has none (made when it is resumed, removed
when a person suspends it; the descheduler removes its own).
docs/annotations.md lists the keys.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from gangplace.engine import Gang, PodShape, ShapeError, TaskRole, gangs, shape_from_pod
from gangplace.engine.model import GPU_SHARE_COUNT, GPU_SHARE_MILLI, GPU_SHARE_MODEL

from .. import keys as K
from ..backends import Dialect, GangInfo, Keys, TaskGroup, dialect_for
from ..cluster import ClusterState, check_gang
from ..config import Backend, NodePool, WebhookConfig
from ..disruption import disruption_rule
from ..patch import Editor, PatchError, Pointer
from ..podgroups import OwnerHint, OwnerRef, PodGroupIntent
from ..quantities import resource_list
from ..spark import pod_view, spark_pod
from ..suspension import change, is_suspended, suspended_by_descheduler
from ..validate import (
    InvalidValue,
    MinAvailable,
    check_gang_name,
    check_queue,
    derived_name,
    parse_duration,
    parse_min_available,
)
from ..workloads import (
    ResolvedRole,
    WorkloadError,
    WorkloadKind,
    is_set,
    read_count,
    resolve_roles,
)


def _dotted(ptr: Pointer) -> str:
    return ".".join(str(p) for p in ptr)


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
    old: Any = None


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
    op, ns, sub = req.get("operation"), req.get("namespace"), req.get("subResource")
    group, version, kind = gvk.get("group"), gvk.get("version"), gvk.get("kind")
    if (
        op.__class__ is str
        and version.__class__ is str
        and kind.__class__ is str
        and (group is None or group.__class__ is str)
        and (ns is None or ns.__class__ is str)
        and (sub is None or sub.__class__ is str)
    ):
        # Every field well formed (the usual case): no per-field checks.
        return _Request(
            uid,
            op,
            group or "",
            version,
            kind,
            ns or "",
            obj,
            bool(dry),
            sub or "",
            req.get("oldObject"),
        )
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
        req.get("oldObject"),
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


def _apply(ed: Editor, meta_at: Pointer, keys: Keys, *, fill_only: bool) -> None:
    """Write ``keys`` on the metadata at ``meta_at``; touch a map only if it changes."""
    for fld, wanted in (("labels", keys.labels), ("annotations", keys.annotations)):
        if not wanted:
            continue
        path = (*meta_at, fld)
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


def _set_scheduler(ed: Editor, spec_at: Pointer, name: str | None) -> None:
    if name is None:
        return
    path = (*spec_at, "schedulerName")
    if ed.get(path) != name:
        ed.set(path, name)


def _pin(ed: Editor, spec_at: Pointer, pool: NodePool | None) -> None:
    """Required node affinity to the pool label, ANDed into every term (terms are
    ORed, so each must carry it)."""
    if pool is None:
        return
    req = {"key": pool.key, "operator": "In", "values": [pool.value]}
    path = (*spec_at, "affinity")
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


def _view(ed: Editor, role: ResolvedRole) -> dict[str, Any]:
    """A pod (or template) as it will be after the edits, for the engine to read.
    A spec or metadata that is not an object reads as empty (the patch will refuse it)."""
    base = role.pointer
    if role.format == "sparkPod":
        desc = ed.get(base)
        desc = dict(desc) if isinstance(desc, dict) else {}
        affinity = ed.get((*base, "affinity"))
        if affinity is not None:
            desc["affinity"] = affinity
        app = ed.get(base[:-1])
        return pod_view(desc, app if isinstance(app, dict) else {}, _dotted(base))
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
    job_rule: _JobRule | None = None,
) -> AdmitResult:
    ops = ed.ops()
    if job_rule is not None and job_rule[0] is not None:
        # Its own operation: the Editor's diff is not needed for a field set whole
        # ("add" replaces a podFailurePolicy that is there).
        ops.append({"op": "add", "path": "/spec/podFailurePolicy", "value": job_rule[0]})
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


def _role_meta(r: ResolvedRole) -> Mapping[str, Any] | None:
    m = r.template if r.format == "sparkPod" else r.template.get("metadata")
    return m if isinstance(m, dict) else None


def _role_spec(r: ResolvedRole) -> Any:
    return r.template if r.format == "sparkPod" else r.template.get("spec")


def _per_instance(
    entry: WorkloadKind, obj: Mapping[str, Any], roles: list[ResolvedRole]
) -> tuple[int | None, list[ResolvedRole]]:
    """For a kind with one gang per instance: (instances, one instance's roles)."""
    per = entry.gang_per
    if per is None:
        return None, roles
    n = read_count(obj, per.count)
    n = 1 if n is None else n
    if n == 0:
        return 0, []
    for r in roles:
        if r.count % n:
            raise WorkloadError(
                f"{per.count}: {n} {entry.kind} groups do not divide the {r.count} pods of "
                f"role {r.name}"
            )
    return n, [ResolvedRole(r.name, r.pointer, r.template, r.count // n, r.format) for r in roles]


@dataclass(slots=True)
class _Plan:
    """What admission decided about a workload's gang (one instance of it, for a kind
    with one gang per instance)."""

    name: str
    roles: list[ResolvedRole]
    size: int
    min_member: int
    reserve: int  # how many members minResources covers
    values: _Values
    instances: int | None
    warnings: list[str]


def _plan(
    req: _Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    entry: WorkloadKind,
    roles: list[ResolvedRole],
    existing: str | None,
    config: WebhookConfig,
) -> _Plan | None:
    """The gang a workload makes, from the object as it is (None: no pods to gang)."""
    instances, one = _per_instance(entry, obj, roles)
    size = sum(r.count for r in one)
    if existing is None and size < 1:
        return None
    templates = [_role_meta(r) for r in roles]
    sources = [K.user_values(m) for m in (meta, *templates)]
    rescale = req.operation == "UPDATE"
    values = _read_values(
        sources, size, config, req.namespace, check_min=existing is None or rescale
    )
    warnings = list(values.warnings)
    if existing is not None:
        name = existing
    elif values.gang is not None:
        name = values.gang
    elif entry.gang_per is not None:
        # Each instance's gang is named after it: <name>-<i>, as its first pod is.
        name = str(meta.get("name") or "") or _workload_gang_name(entry.kind, meta, req.uid)
    else:
        name = _workload_gang_name(entry.kind, meta, req.uid)
    if entry.min_member is not None:
        min_member = min(entry.min_member, max(size, 1))
        reserve = size
        if values.min_available is not None:
            warnings.append(
                f"corral: {K.MIN_AVAILABLE} is ignored on a {entry.kind}: its first pod "
                f"creates the others, so the gang starts with {min_member} (its minResources "
                "still reserve every pod)"
            )
    else:
        if values.min_available is not None:
            min_member = values.min_available.resolve(size)
        elif entry.min_available_from is not None and (
            (n := read_count(obj, entry.min_available_from)) is not None
        ):
            min_member = min(max(n, 1), size)
        else:
            min_member = _default_min(config.min_available_for(entry, entry.kind), size)
        reserve = min_member
    return _Plan(name, one, size, min_member, reserve, values, instances, warnings)


def _kueue_warnings(entry: WorkloadKind, plan: _Plan) -> list[str]:
    """What a Kueue workload cannot say: Kueue admits a workload whole."""
    if plan.min_member >= plan.size:
        return []
    given = plan.values.min_available
    if given is not None:
        shown = given.count if given.count is not None else f"{given.percent}%"
        key = f'{K.MIN_AVAILABLE} "{shown}"'
    else:
        key = f"the {entry.kind} minMember of {plan.min_member}"
    return [
        _cap(
            f"corral: {key} is not applied: Kueue admits a workload whole (all {plan.size} "
            "pods) and has no key for a smaller minimum"
        )
    ]


# A Job's podFailurePolicy with the disruption rule first (None: unchanged), warnings.
_JobRule = tuple[dict[str, Any] | None, list[str]]


def _admit_workload(
    req: _Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    entry: WorkloadKind,
    cluster: ClusterState | None,
    config: WebhookConfig,
    job_rule: _JobRule = (None, []),
) -> AdmitResult:
    dialect = _dialect(config)
    kind = entry.kind
    if config.backend is Backend.KUEUE and _controller(meta) is not None:
        # A child (a JobSet's Job): Kueue manages the parent, which carries the queue.
        return _pass(req, kind, "unchanged", "owned by a workload that Kueue manages")
    for path in entry.left_alone_when:
        if is_set(obj, path):
            return _pass(req, kind, "unchanged", f"{path} is set: left to that integration")
    roles = resolve_roles(entry, obj)
    if not roles:
        return _pass(req, kind, "unchanged", "no pod templates")
    for r in roles:
        if r.format == "sparkPod":
            pod_view(r.template, obj.get("spec") or {}, _dotted(r.pointer))  # checks it
        chosen = _foreign_scheduler(_role_spec(r), config.effective_scheduler_name)
        if chosen is not None:
            return _pass(req, kind, "unchanged", f"a pod template asks for scheduler {chosen}")
    existing = next((g for g in (dialect.membership(_role_meta(r)) for r in roles) if g), None)
    if req.operation == "UPDATE":
        return _rescale(req, obj, meta, entry, roles, existing, config)
    plan = _plan(req, obj, meta, entry, roles, existing, config)
    if plan is None:
        return _pass(req, kind, "unchanged", "no pods to gang (size 0)")
    # A workload whose templates already name a gang (made by a gang-forming parent)
    # is only made consistent: no new gang, no size checks, no PodGroup.
    ed = Editor(obj)
    fill_only = existing is not None
    name, min_member = plan.name, (1 if fill_only else plan.min_member)
    values = plan.values
    gang = GangInfo(name, min_member, plan.size, values.queue, values.timeout)

    # Pin first: the engine must see the pods as they will be.
    for r in roles:
        _pin(ed, r.spec_at, config.node_pool)
    shaped = _GangShapes(name, plan.roles, ed, config, min_member, plan.reserve)

    warnings = plan.warnings
    if dialect.templates_carry_keys:
        task_groups = (
            shaped.task_groups() if config.backend is Backend.YUNIKORN and not fill_only else None
        )
        split = entry.gang_per is not None and not fill_only
        for r in roles:
            keys = dialect.member_keys(gang, role=r.name, task_groups=task_groups)
            if split and entry.gang_per is not None:
                keys.annotations[K.SPLIT_GANG] = name
                keys.annotations[K.SPLIT_BY] = entry.gang_per.label
            _apply(ed, r.meta_at, keys, fill_only=fill_only)
            _set_scheduler(ed, r.spec_at, config.effective_scheduler_name)
    elif not fill_only:
        _apply(ed, ("metadata",), dialect.workload_keys(gang), fill_only=False)
        warnings.extend(_kueue_warnings(entry, plan))

    warnings.extend(job_rule[1])
    if fill_only:
        # The parent was told about its values already; its children stay quiet. A
        # child made by its parent's controller names the parent with its uid: the
        # PodGroup reconciler learns the owner's uid from it without a lookup.
        hints = []
        parent = _controller(meta)
        if parent is not None and parent.uid and dialect.podgroup is not None:
            hints.append(OwnerHint(dialect.podgroup.api_version, req.namespace, name, parent))
        return _finish(req, kind, ed, job_rule[1], hints=hints, job_rule=job_rule)

    if cluster is not None and shaped.shapes() is not None:
        deny, more = _feasibility(
            cluster, config, name, shaped.roles_for_engine(), max(min_member, plan.reserve)
        )
        if deny is not None:
            return _deny(req, kind, 403, "Forbidden", deny)
        warnings.extend(more)

    # A workload created suspended has no pods: its PodGroup is made when it is resumed.
    intents = (
        []
        if is_suspended(kind, obj)
        else _intents(req, obj, meta, entry, dialect, gang, plan, shaped, update=False)
    )
    return _finish(req, kind, ed, warnings, intents, job_rule=job_rule)


def _intents(
    req: _Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    entry: WorkloadKind,
    dialect: Dialect,
    gang: GangInfo,
    plan: _Plan,
    shaped: _GangShapes,
    *,
    update: bool,
) -> list[PodGroupIntent]:
    if dialect.podgroup is None:
        return []
    api_version = obj.get("apiVersion") if isinstance(obj.get("apiVersion"), str) else None
    owner = OwnerRef(
        api_version or f"{req.group}/{req.version}",
        entry.kind,
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
    )
    if plan.instances is None:
        return [_podgroup_intent(dialect, gang, req.namespace, shaped, owner, update=update)]
    out = []
    for i in range(plan.instances):
        one = GangInfo(
            derived_name(gang.name, str(i)),
            gang.min_member,
            gang.size,
            gang.queue,
            gang.timeout_seconds,
        )
        out.append(_podgroup_intent(dialect, one, req.namespace, shaped, owner, update=update))
    return out


def _same_gang(
    old: Any,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    entry: WorkloadKind,
    roles: list[ResolvedRole],
) -> bool:
    """Whether ``old`` (the object before an UPDATE) makes the same gang: the same
    roles, counts, templates, instances and corral.dev values. No engine, no patch."""
    if not isinstance(old, dict):
        return False
    try:
        before = resolve_roles(entry, old)
        for path in (entry.min_available_from, entry.gang_per and entry.gang_per.count):
            if path and read_count(old, path) != read_count(obj, path):
                return False
    except WorkloadError:
        return False
    if [(r.name, r.count, r.template) for r in before] != [
        (r.name, r.count, r.template) for r in roles
    ]:
        return False
    old_meta = old.get("metadata")
    return K.user_values(old_meta if isinstance(old_meta, dict) else None) == K.user_values(meta)


def _rescale(
    req: _Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    entry: WorkloadKind,
    roles: list[ResolvedRole],
    existing: str | None,
    config: WebhookConfig,
) -> AdmitResult:
    """An UPDATE of a workload: when its replica counts (or templates or corral.dev
    values) changed, its PodGroup's minMember and minResources follow, through the
    reconciler. The object itself is never patched on UPDATE (a Job's template and
    podFailurePolicy cannot change once made)."""
    kind = entry.kind
    dialect = _dialect(config)
    if existing is None:
        return _pass(req, kind, "unchanged", "not a gang (it was not made one when created)")
    if meta.get("deletionTimestamp"):
        return _pass(req, kind, "unchanged", "being deleted")
    parent = _controller(meta)
    if parent is not None and config.table.owns(parent.api_version, parent.kind):
        return _pass(req, kind, "unchanged", "its gang is its parent's")
    if dialect.podgroup is None:
        return _pass(req, kind, "unchanged", "the backend has no gang object to update")
    turned = change(kind, req.old, obj)
    if turned == "suspended":
        if suspended_by_descheduler(meta):
            return _pass(req, kind, "unchanged", "the descheduler removes its PodGroup itself")
        removals = _removals(req, obj, meta, entry, roles, dialect, existing)
        return _finish(req, kind, Editor(obj), [], removals)
    if turned is None and is_suspended(kind, obj):
        return _pass(req, kind, "unchanged", "suspended: no PodGroup until it is resumed")
    if turned is None and _same_gang(req.old, obj, meta, entry, roles):
        return _pass(req, kind, "unchanged", "the gang did not change")
    plan = _plan(req, obj, meta, entry, roles, existing, config)
    if plan is None:
        return _pass(req, kind, "unchanged", "no pods to gang (size 0)")
    values = plan.values
    name = existing
    gang = GangInfo(name, plan.min_member, plan.size, values.queue, values.timeout)
    shaped = _GangShapes(name, plan.roles, Editor(obj), config, plan.min_member, plan.reserve)
    intents = _intents(req, obj, meta, entry, dialect, gang, plan, shaped, update=True)
    return _finish(req, kind, Editor(obj), [], intents)


def _removals(
    req: _Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    entry: WorkloadKind,
    roles: list[ResolvedRole],
    dialect: Dialect,
    name: str,
) -> list[PodGroupIntent]:
    """The removal of a suspended workload's PodGroups (one per instance, for a kind
    with one gang per instance), made by corral and owned by this workload."""
    assert dialect.podgroup is not None
    try:
        instances = _per_instance(entry, obj, roles)[0]
    except WorkloadError:
        instances = None
    names = [name] if instances is None else [derived_name(name, str(i)) for i in range(instances)]
    owner = OwnerRef(
        str(obj.get("apiVersion") or f"{req.group}/{req.version}"),
        entry.kind,
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
    )
    pg = dialect.podgroup
    return [
        PodGroupIntent(pg.api_version, pg.plural, req.namespace, n, {}, owner, remove=True)
        for n in names
    ]


def _podgroup_intent(
    dialect: Dialect,
    gang: GangInfo,
    namespace: str,
    shaped: _GangShapes,
    owner: OwnerRef | None,
    *,
    update: bool = False,
) -> PodGroupIntent:
    """The gang's PodGroup for the reconciler; its body is rendered when it is made.
    ``update``: a workload was scaled; an existing PodGroup of this owner follows."""
    assert dialect.podgroup is not None

    def body() -> dict[str, Any]:
        out = dialect.podgroup_body(
            gang, namespace, shaped.priority_class(), shaped.min_resources()
        )
        assert out is not None
        return out

    kind = dialect.podgroup
    return PodGroupIntent(
        kind.api_version, kind.plural, namespace, gang.name, body, owner, update=update
    )


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
            self._views = [_view(self.editor, r) for r in self.roles]
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
    spark = None
    if existing is None:
        theirs = _foreign_gang(meta)
        if theirs is not None:
            return _pass(req, "Pod", "unchanged", f"already in a gang ({theirs})")
    if existing is not None:
        mode = "consistent"
    elif has_keys:
        mode = "gang"
    elif by_workload:
        # Its workload was left alone (skipped, or made before corral): so is it.
        return _pass(req, "Pod", "unchanged", "pod of a workload that is not a gang")
    elif owner is not None and (owner.api_version.partition("/")[0], owner.kind) in _STEP_OWNERS:
        return _pass(
            req,
            "Pod",
            "unchanged",
            f"a step of {owner.kind} {owner.name}: steps are not a gang unless their "
            f"template sets {K.GANG}",
        )
    elif (spark := spark_pod(meta)) is not None:
        if spark.app is not None:
            # The operator copies a ganged SparkApplication's keys to its pods.
            return _pass(req, "Pod", "unchanged", "pod of a SparkApplication that is not a gang")
        mode = "spark"
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
    split = None
    if existing is not None:
        name = existing
        # Someone else's gang keeps its queue and timeout: only what is given is added.
        if K.QUEUE not in given:
            values.queue = None
        if K.GANG_TIMEOUT not in given:
            values.timeout = None
        split = _split_name(meta, existing)
        if split is not None:
            name = split
    elif values.gang is not None:
        name = values.gang
    elif spark is not None:
        # spark-submit's driver and the executors it makes share one application id.
        name = derived_name(spark.selector)
    elif owner is not None:
        name = derived_name(owner.kind, owner.name)
    else:
        name = _pod_gang_name(meta, req.uid)
    min_member = (
        values.min_available.count if values.min_available and values.min_available.count else 1
    )
    gang = GangInfo(name, min_member, None, values.queue, values.timeout)

    ed = Editor(obj)
    _pin(ed, ("spec",), config.node_pool)
    # A pod on its own: one role of min_member pods shaped like it.
    shaped = _GangShapes(name, [ResolvedRole(_ROLE, (), obj, min_member)], ed, config, min_member)
    task_groups = None
    if config.backend is Backend.YUNIKORN and mode != "consistent" and min_member > 1:
        task_groups = shaped.task_groups()
    _apply(
        ed,
        ("metadata",),
        dialect.member_keys(gang, role=_ROLE if task_groups else None, task_groups=task_groups),
        fill_only=mode == "consistent" and split is None,
    )
    _set_scheduler(ed, ("spec",), config.effective_scheduler_name)
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


# Owners whose pods run one after another (workflow steps), not as a gang: their pods
# are left alone unless they carry a corral.dev key (set on the step's template).
_STEP_OWNERS: Final = frozenset({("argoproj.io", "Workflow")})

# Every backend's gang key on a pod: a pod in another scheduler's gang is left alone.
_GANG_KEYS: Final = (
    ("annotations", gangs.VOLCANO_GROUP_NAME),
    ("labels", gangs.COSCHED_POD_GROUP_LABEL),
    ("labels", gangs.YUNIKORN_APP_ID_LABEL),
    ("annotations", gangs.YUNIKORN_TASK_GROUP_NAME),
    ("labels", gangs.KUEUE_POD_GROUP_LABEL),
)


def _foreign_gang(meta: Mapping[str, Any]) -> str | None:
    """The key of another backend's gang the pod is in, if any."""
    by_field = {"annotations": meta.get("annotations"), "labels": meta.get("labels")}
    for fld, key in _GANG_KEYS:
        m = by_field[fld]
        if isinstance(m, dict) and m.get(key):
            return key
    return None


def _split_name(meta: Mapping[str, Any], gang: str) -> str | None:
    """A pod of a kind with one gang per instance still in the workload's gang: the
    gang of its instance, ``<gang>-<instance>``."""
    ann = meta.get("annotations")
    labels = meta.get("labels")
    if not isinstance(ann, dict) or not isinstance(labels, dict):
        return None
    if ann.get(K.SPLIT_GANG) != gang:
        return None
    by = ann.get(K.SPLIT_BY)
    value = labels.get(by) if isinstance(by, str) else None
    if not isinstance(value, str) or not value:
        return None
    return derived_name(gang, value)


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
    rescale = req.operation == "UPDATE" and entry is not None
    if (req.operation != "CREATE" and not rescale) or req.sub_resource:
        return _pass(req, kind_label, "unchanged", "not a CREATE")
    obj = req.obj
    if obj is None:
        raise ReviewError(f"request.object: missing on a {req.operation}")
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
        job_rule: _JobRule = (None, [])
        if (
            config.jobs_ignore_disruptions
            and req.operation == "CREATE"
            and req.group == "batch"
            and req.kind == "Job"
            and not _chose_other_scheduler(obj, config)
        ):
            job_rule = disruption_rule(obj)
        result = _admit_workload(req, obj, meta, entry, cluster, config, job_rule)
        if result.outcome == "unchanged" and (job_rule[0] is not None or job_rule[1]):
            # A Job that is no gang (size 0, a Kueue child): it still gets the rule.
            return _finish(req, result.kind, Editor(obj), job_rule[1], (), result.hints, job_rule)
        return result
    except (_Invalid, InvalidValue, WorkloadError, PatchError) as e:
        return _deny(req, kind_label, 400, "BadRequest", str(e))


def _chose_other_scheduler(job: Mapping[str, Any], config: WebhookConfig) -> bool:
    """A Job whose pods asked for another scheduler is left alone entirely."""
    spec = job.get("spec")
    tmpl = spec.get("template") if isinstance(spec, dict) else None
    pod_spec = tmpl.get("spec") if isinstance(tmpl, dict) else None
    return _foreign_scheduler(pod_spec, config.effective_scheduler_name) is not None
