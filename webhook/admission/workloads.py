"""Admission of a workload (a kind in :mod:`webhook.admission.roles`' table): at CREATE its
gang (size, minimum, values) and the keys on every pod template; at UPDATE its
PodGroup follows its replica counts, or goes when a person suspends it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.admission import keys as K
from webhook.admission.cluster_fit import ClusterCapacity
from webhook.admission.dialects import Dialect, GangInfo, dialect_for
from webhook.admission.gang_decision import (
    GangShapes,
    Values,
    controller,
    feasibility,
    podgroup_intent,
    read_values,
)
from webhook.admission.mutation import (
    apply_keys,
    dotted,
    foreign_scheduler,
    pin_to_pool,
    set_scheduler,
)
from webhook.admission.native_gangs import Served
from webhook.admission.patch import Editor
from webhook.admission.responses import JobRule, allow, cap, deny, finish
from webhook.admission.review import AdmitResult, Request
from webhook.admission.roles import (
    ResolvedRole,
    WorkloadError,
    WorkloadKind,
    is_set,
    read_count,
    resolve_roles,
)
from webhook.admission.spark import pod_view
from webhook.admission.suspension import change, is_suspended, suspended_by_descheduler
from webhook.admission.validate import InvalidValue, derived_name, parse_min_available
from webhook.admission.volcano_fields import repeated_groups, spec_fields
from webhook.config import Backend, WebhookConfig
from webhook.podgroup_intent import OwnerRef, PodGroupIntent

__all__ = ["admit_workload"]


def _role_meta(r: ResolvedRole) -> Mapping[str, Any] | None:
    m = r.template if r.format == "sparkPod" else r.template.get("metadata")
    return m if isinstance(m, dict) else None


def _role_spec(r: ResolvedRole) -> Any:
    return r.template if r.format == "sparkPod" else r.template.get("spec")


def _templates_skipped(roles: list[ResolvedRole], strict: bool) -> bool:
    """``corral.dev/skip: "true"`` on every pod template skips the workload too: its
    pods are left alone, so a gang made of it would wait for members that never join.
    On some templates only, it is refused (InvalidValue) for the same reason, as is a
    value other than "true"/"false" -- when ``strict`` (at CREATE); an UPDATE of a
    workload made before is not refused for what it was created with."""
    marks: list[bool] = []
    for r in roles:
        try:
            marks.append(K.is_skipped(K.user_values(_role_meta(r)), f"{r.name} template: "))
        except InvalidValue:
            if strict:
                raise
            marks.append(False)
    if all(marks):
        return True
    if any(marks) and strict:
        on = ", ".join(r.name for r, m in zip(roles, marks, strict=True) if m)
        raise InvalidValue(
            K.SKIP,
            "true",
            f"is on some pod templates only ({on}): a gang cannot leave some of its members out",
            "on every pod template, or on the workload, to leave the whole workload alone",
        )
    return False


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
    values: Values
    instances: int | None
    warnings: list[str]


def _plan(
    req: Request,
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
    values = read_values(
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
        cap(
            f"corral: {key} is not applied: Kueue admits a workload whole (all {plan.size} "
            "pods) and has no key for a smaller minimum"
        )
    ]


def admit_workload(
    req: Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    entry: WorkloadKind,
    cluster: ClusterCapacity | None,
    config: WebhookConfig,
    job_rule: JobRule = (None, []),
    served: Served | None = None,
) -> AdmitResult:
    dialect = dialect_for(config, served)
    kind = entry.kind
    if config.backend is Backend.KUEUE and controller(meta) is not None:
        # A child (a JobSet's Job): Kueue manages the parent, which carries the queue.
        return allow(req, kind, "unchanged", "owned by a workload that Kueue manages")
    for path in entry.left_alone_when:
        if is_set(obj, path):
            return allow(req, kind, "unchanged", f"{path} is set: left to that integration")
    if (why := dialect.left_alone(req.group, kind, obj)) is not None:
        return allow(req, kind, "unchanged", why)
    roles = resolve_roles(entry, obj)
    if not roles:
        return allow(req, kind, "unchanged", "no pod templates")
    for r in roles:
        if r.format == "sparkPod":
            pod_view(r.template, obj.get("spec") or {}, dotted(r.pointer))  # checks it
        chosen = foreign_scheduler(_role_spec(r), config.effective_scheduler_name)
        if chosen is not None:
            return allow(req, kind, "unchanged", f"a pod template asks for scheduler {chosen}")
    if _templates_skipped(roles, strict=req.operation == "CREATE"):
        return allow(req, kind, "skipped", f"{K.SKIP} is set on its pod templates")
    existing = next((g for g in (dialect.membership(_role_meta(r)) for r in roles) if g), None)
    if req.operation == "UPDATE":
        return _rescale(req, obj, meta, entry, roles, existing, config, dialect)
    dialect.check_templates([_role_spec(r) for r in roles], entry.gang_per is not None)
    plan = _plan(req, obj, meta, entry, roles, existing, config)
    if plan is None:
        return allow(req, kind, "unchanged", "no pods to gang (size 0)")
    # A workload whose templates already name a gang (made by a gang-forming parent)
    # is only made consistent: no new gang, no size checks, no PodGroup.
    ed = Editor(obj)
    fill_only = existing is not None
    name, min_member = plan.name, (1 if fill_only else plan.min_member)
    values = plan.values
    gang = GangInfo(name, min_member, plan.size, values.queue, values.timeout)

    # Pin first: the engine must see the pods as they will be.
    for r in roles:
        pin_to_pool(ed, r.spec_at, config.node_pool)
    shaped = GangShapes(name, plan.roles, ed, config, min_member, plan.reserve)

    warnings = plan.warnings
    if config.backend is Backend.VOLCANO and not fill_only:
        groups = repeated_groups(req.group, kind, obj)
        gang.spec_extra, more = spec_fields(
            served, values.topology, groups, min_member >= plan.size
        )
        warnings.extend(more)
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
            if not fill_only:
                dialect.role_keys(keys, r.name, len(roles), entry.gang_per is not None)
            apply_keys(ed, r.meta_at, keys, fill_only=fill_only)
            set_scheduler(ed, r.spec_at, config.effective_scheduler_name)
        if not fill_only:
            # What the backend reads from the workload itself (KAI: its top owner).
            apply_keys(ed, ("metadata",), dialect.workload_keys(gang), fill_only=False)
    elif not fill_only:
        apply_keys(ed, ("metadata",), dialect.workload_keys(gang), fill_only=False)
        warnings.extend(_kueue_warnings(entry, plan))

    warnings.extend(job_rule[1])
    if fill_only:
        # The parent was told about its values already; its children stay quiet. A
        # child made by its parent's controller names the parent with its uid: the
        # PodGroup reconciler learns the owner's uid from it without a lookup.
        hints = []
        parent = controller(meta)
        if parent is not None and parent.uid:
            hints = dialect.hints(req.namespace, name, name, parent)
        return finish(req, kind, ed, job_rule[1], hints=hints, job_rule=job_rule)
    if (why := dialect.unusable()) is not None:
        warnings.append(cap(f"corral: no native gang written for {name}: {why}"))

    if cluster is not None and shaped.shapes() is not None:
        refusal, more = feasibility(
            cluster, config, name, shaped.roles_for_engine(), max(min_member, plan.reserve)
        )
        if refusal is not None:
            return deny(req, kind, 403, "Forbidden", refusal)
        warnings.extend(more)

    # A workload created suspended has no pods: its PodGroup is made when it is resumed.
    intents = (
        []
        if is_suspended(entry.group, kind, obj, config.kinds)
        else _intents(req, obj, meta, entry, dialect, gang, plan, shaped, update=False)
    )
    return finish(req, kind, ed, warnings, intents, job_rule=job_rule)


def _intents(
    req: Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    entry: WorkloadKind,
    dialect: Dialect,
    gang: GangInfo,
    plan: _Plan,
    shaped: GangShapes,
    *,
    update: bool,
) -> list[PodGroupIntent]:
    if not dialect.makes_objects:
        return []
    api_version = obj.get("apiVersion") if isinstance(obj.get("apiVersion"), str) else None
    owner = OwnerRef(
        api_version or f"{req.group}/{req.version}",
        entry.kind,
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
    )
    if dialect.podgroup is None:
        # The native gang objects, made where missing (a Workload's template does not
        # follow a scaled workload: it is immutable, minCount changes from v1beta1 only).
        per_role = shaped.required_per_role()
        roles = [
            (r.name, per_role[i] if per_role is not None else r.count)
            for i, r in enumerate(plan.roles)
        ]
        return dialect.gang_intents(
            gang, req.namespace, owner, plan.instances, shaped.priority_class(), roles
        )
    if plan.instances is None:
        return [podgroup_intent(dialect, gang, req.namespace, shaped, owner, update=update)]
    out = []
    for i in range(plan.instances):
        one = GangInfo(
            derived_name(gang.name, str(i)),
            gang.min_member,
            gang.size,
            gang.queue,
            gang.timeout_seconds,
            gang.spec_extra,
        )
        out.append(podgroup_intent(dialect, one, req.namespace, shaped, owner, update=update))
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
    req: Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    entry: WorkloadKind,
    roles: list[ResolvedRole],
    existing: str | None,
    config: WebhookConfig,
    dialect: Dialect,
) -> AdmitResult:
    """An UPDATE of a workload: when its replica counts (or templates or corral.dev
    values) changed, its PodGroup's minMember and minResources follow, through the
    reconciler. The object itself is never patched on UPDATE (a Job's template and
    podFailurePolicy cannot change once made)."""
    kind = entry.kind
    if existing is None:
        return allow(req, kind, "unchanged", "not a gang (it was not made one when created)")
    if meta.get("deletionTimestamp"):
        return allow(req, kind, "unchanged", "being deleted")
    parent = controller(meta)
    if parent is not None and config.table.owns(parent.api_version, parent.kind):
        return allow(req, kind, "unchanged", "its gang is its parent's")
    if not dialect.makes_objects:
        return allow(req, kind, "unchanged", "the backend has no gang object to update")
    turned = change(entry.group, kind, req.old, obj, config.kinds)
    if turned == "suspended" and dialect.podgroup is None:
        # A native gang's objects wait without pods; nothing to hold them off.
        return allow(req, kind, "unchanged", "a native gang's objects stay while suspended")
    if turned == "suspended":
        if suspended_by_descheduler(meta):
            return allow(req, kind, "unchanged", "the descheduler removes its PodGroup itself")
        removals = _removals(req, obj, meta, entry, roles, dialect, existing)
        return finish(req, kind, Editor(obj), [], removals)
    if turned is None and is_suspended(entry.group, kind, obj, config.kinds):
        return allow(req, kind, "unchanged", "suspended: no PodGroup until it is resumed")
    if turned is None and _same_gang(req.old, obj, meta, entry, roles):
        return allow(req, kind, "unchanged", "the gang did not change")
    plan = _plan(req, obj, meta, entry, roles, existing, config)
    if plan is None:
        return allow(req, kind, "unchanged", "no pods to gang (size 0)")
    values = plan.values
    name = existing
    gang = GangInfo(name, plan.min_member, plan.size, values.queue, values.timeout)
    shaped = GangShapes(name, plan.roles, Editor(obj), config, plan.min_member, plan.reserve)
    intents = _intents(req, obj, meta, entry, dialect, gang, plan, shaped, update=True)
    return finish(req, kind, Editor(obj), [], intents)


def _removals(
    req: Request,
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
