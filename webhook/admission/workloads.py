"""Admission of a workload (a kind in :mod:`webhook.admission.roles`' table): at CREATE its
gang (size, minimum, values) and the keys on every pod template; at UPDATE its
PodGroup follows its replica counts, or goes when a person suspends it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webhook.admission import keys as K
from webhook.admission.backends.dialect import Dialect, GangInfo
from webhook.admission.backends.registry import dialect_for
from webhook.admission.decision import Decision, Denied, JobRule, Patched, Unchanged, cap
from webhook.admission.gang_decision import (
    GangShapes,
    Values,
    feasibility,
    read_values,
)
from webhook.admission.mutation import (
    apply_keys,
    dotted,
    foreign_scheduler,
    pin_to_pool,
    set_scheduler,
)
from webhook.admission.patch import Editor
from webhook.admission.review import Request
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
from webhook.admission.validate import derived_name, parse_min_available
from webhook.podgroup_intent import OwnerRef

if TYPE_CHECKING:
    from webhook.admission.cluster_fit import ClusterCapacity
    from webhook.admission.native_gangs import Served
    from webhook.config import WebhookConfig

__all__ = ["admit_workload"]


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
    dialect: Dialect,
) -> _Plan | None:
    """The gang a workload makes, from the object as it is (None: no pods to gang)."""
    instances, one = _per_instance(entry, obj, roles)
    size = sum(r.count for r in one)
    if existing is None and size < 1:
        return None
    templates = [r.meta for r in roles]
    sources = [K.user_values(m) for m in (meta, *templates)]
    rescale = req.operation == "UPDATE"
    values = read_values(
        sources, size, config, dialect, req.namespace, check_min=existing is None or rescale
    )
    warnings = list(values.warnings)
    if existing is not None:
        name = existing
    elif values.gang is not None:
        name = values.gang
    elif entry.gang_per is not None and meta.get("name"):
        # Each instance's gang is named after it: <name>-<i>, as its first pod is.
        name = str(meta["name"])
    elif isinstance(own := meta.get("name"), str) and own:
        name = derived_name(entry.kind, own)
    else:
        # generateName only: the final name is not known yet; the request uid keeps it
        # unique, and reinvocation reads the name back from the keys written now.
        prefix = str(meta.get("generateName") or "").rstrip("-")
        name = derived_name(entry.kind, prefix, req.uid[:8])
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
            # The configured default, clamped to the gang: "8" on a gang of 4 means all 4
            # (the config was checked at load, so it parses).
            default = config.min_available_for(entry, entry.kind)
            min_member = min(
                size, parse_min_available("defaultMinAvailable", default, 2**62).resolve(size)
            )
        reserve = min_member
    return _Plan(name, one, size, min_member, reserve, values, instances, warnings)


def admit_workload(
    req: Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    parent: OwnerRef | None,
    entry: WorkloadKind,
    cluster: ClusterCapacity | None,
    config: WebhookConfig,
    job_rule: JobRule = (None, []),
    served: Served | None = None,
) -> Decision:
    """``parent``: the workload's controller (the JobSet of its Jobs), if any."""
    dialect = dialect_for(config.backend, served)
    # The workload as the owner of its gang objects.
    me = _owner_ref(req, obj, meta, entry)
    kind = entry.kind
    # What the backend leaves to another controller's gang, then what the kind hands to
    # another integration (no kind is both).
    if parent is not None and (why := dialect.left_to_parent(pod=False)) is not None:
        return Unchanged(why)
    if (why := dialect.left_alone(entry, obj)) is not None:
        return Unchanged(why)
    for path in entry.left_alone_when:
        if is_set(obj, path):
            return Unchanged(f"{path} is set: left to that integration")
    roles = resolve_roles(entry, obj)
    if not roles:
        return Unchanged("no pod templates")
    for r in roles:
        if r.format == "sparkPod":
            pod_view(r.template, obj.get("spec") or {}, dotted(r.pointer))  # checks it
        chosen = foreign_scheduler(r.spec, config.effective_scheduler_name)
        if chosen is not None:
            return Unchanged(f"a pod template asks for scheduler {chosen}")
    if K.templates_skipped(roles, strict=req.operation == "CREATE"):
        return Unchanged(f"{K.SKIP} is set on its pod templates", "skipped")
    existing = next((g for g in (dialect.membership(r.meta) for r in roles) if g), None)
    if req.operation == "UPDATE":
        return _rescale(req, obj, meta, me, entry, roles, existing, parent, config, dialect)
    dialect.check_templates([r.spec for r in roles], entry.gang_per is not None)
    plan = _plan(req, obj, meta, entry, roles, existing, config, dialect)
    if plan is None:
        return Unchanged("no pods to gang (size 0)")
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
    if not fill_only:
        gang.spec_extra, more = dialect.gang_fields(
            values.topology, entry.hooks.subgroups(obj), min_member >= plan.size
        )
        warnings.extend(more)
    if dialect.templates_carry_keys:
        task_groups = shaped.task_groups() if dialect.uses_task_groups and not fill_only else None
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
        warnings.extend(
            dialect.unapplied_minimum(kind, plan.min_member, plan.size, values.min_available)
        )

    warnings.extend(job_rule[1])
    if fill_only:
        # The parent was told about its values already; its children stay quiet. A
        # child made by its parent's controller names the parent with its uid: the
        # PodGroup reconciler learns the owner's uid from it without a lookup.
        hints = []
        if parent is not None and parent.uid:
            hints = dialect.hints(req.namespace, name, name, parent)
        return Patched(ed, job_rule[1], hints=hints, job_rule=job_rule)
    if (why := dialect.unusable()) is not None:
        warnings.append(cap(f"corral: no native gang written for {name}: {why}"))

    if cluster is not None and shaped.shapes() is not None:
        refusal, more = feasibility(
            cluster, config, name, shaped.roles_for_engine(), max(min_member, plan.reserve)
        )
        if refusal is not None:
            return Denied(403, refusal)
        warnings.extend(more)

    # A workload created suspended has no pods: its PodGroup is made when it is resumed.
    intents = (
        []
        if is_suspended(entry.group, kind, obj, config.kinds)
        else dialect.gang_intents(gang, req.namespace, me, shaped, instances=plan.instances)
    )
    return Patched(ed, warnings, intents, job_rule=job_rule)


def _owner_ref(
    req: Request, obj: Mapping[str, Any], meta: Mapping[str, Any], entry: WorkloadKind
) -> OwnerRef:
    """The workload as the owner of its gang objects."""
    api_version = obj.get("apiVersion")
    return OwnerRef(
        api_version
        if isinstance(api_version, str) and api_version
        else f"{req.group}/{req.version}",
        entry.kind,
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
    )


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
    me: OwnerRef,
    entry: WorkloadKind,
    roles: list[ResolvedRole],
    existing: str | None,
    parent: OwnerRef | None,
    config: WebhookConfig,
    dialect: Dialect,
) -> Decision:
    """An UPDATE of a workload: when its replica counts (or templates or corral.dev
    values) changed, its PodGroup's minMember and minResources follow, through the
    reconciler. The object itself is never patched on UPDATE (a Job's template and
    podFailurePolicy cannot change once made)."""
    kind = entry.kind
    if existing is None:
        return Unchanged("not a gang (it was not made one when created)")
    if meta.get("deletionTimestamp"):
        return Unchanged("being deleted")
    if parent is not None and config.table.owns(parent.api_version, parent.kind):
        return Unchanged("its gang is its parent's")
    if not dialect.makes_objects:
        return Unchanged("the backend has no gang object to update")
    turned = change(entry.group, kind, req.old, obj, config.kinds)
    suspended = is_suspended(entry.group, kind, obj, config.kinds)
    if turned == "suspended" and dialect.podgroup is None:
        # A native gang's objects wait without pods; nothing to hold them off.
        return Unchanged("a native gang's objects stay while suspended")
    if turned == "suspended":
        if suspended_by_descheduler(meta):
            return Unchanged("the descheduler removes its PodGroup itself")
        try:
            instances = _per_instance(entry, obj, roles)[0]
        except WorkloadError:
            instances = None
        removals = dialect.removals(req.namespace, existing, instances, me)
        return Patched(None, (), removals)
    if turned is None and suspended:
        return Unchanged("suspended: no PodGroup until it is resumed")
    if turned is None and _same_gang(req.old, obj, meta, entry, roles):
        return Unchanged("the gang did not change")
    plan = _plan(req, obj, meta, entry, roles, existing, config, dialect)
    if plan is None:
        return Unchanged("no pods to gang (size 0)")
    values = plan.values
    name = existing
    gang = GangInfo(name, plan.min_member, plan.size, values.queue, values.timeout)
    shaped = GangShapes(name, plan.roles, Editor(obj), config, plan.min_member, plan.reserve)
    intents = dialect.gang_intents(
        gang, req.namespace, me, shaped, instances=plan.instances, update=True
    )
    return Patched(None, (), intents)
