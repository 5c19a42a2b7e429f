"""Admission of a pod: a member of its workload's gang (made consistent), a bare pod
with ``corral.dev/gang`` (joins that gang), a spark-submit driver or executor, or the
configured default for other pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gangplace.engine.kinds import kind_of

from webhook.admission import keys as K
from webhook.admission.backends.dialect import GangInfo, foreign_gang
from webhook.admission.backends.registry import dialect_for
from webhook.admission.decision import Decision, Denied, Patched, Unchanged, cap
from webhook.admission.gang_decision import (
    GangShapes,
    feasibility,
    read_values,
)
from webhook.admission.mutation import apply_keys, foreign_scheduler, pin_to_pool, set_scheduler
from webhook.admission.patch import Editor
from webhook.admission.review import Request
from webhook.admission.roles import ResolvedRole
from webhook.admission.spark import spark_pod
from webhook.admission.validate import derived_name
from webhook.podgroup_intent import OwnerRef

if TYPE_CHECKING:
    from webhook.admission.cluster_fit import ClusterCapacity
    from webhook.admission.native_gangs import Served
    from webhook.config import WebhookConfig

__all__ = ["admit_pod"]

_ROLE = "members"


def admit_pod(
    req: Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    given: Mapping[str, str],
    owner: OwnerRef | None,
    cluster: ClusterCapacity | None,
    config: WebhookConfig,
    served: Served | None = None,
) -> Decision:
    """``given``: the pod's corral.dev keys (:func:`keys.user_values`); ``owner``: its
    controller."""
    dialect = dialect_for(config.backend, served)
    by_workload = owner is not None and config.table.owns(owner.api_version, owner.kind)
    if by_workload and (why := dialect.left_to_parent(pod=True)) is not None:
        return Unchanged(why)
    chosen = foreign_scheduler(obj.get("spec"), config.effective_scheduler_name)
    if chosen is not None:
        return Unchanged(f"asks for scheduler {chosen}")
    existing = dialect.membership(meta)
    has_keys = not given.keys().isdisjoint(K.USER_KEYS)
    spark = None
    if existing is None:
        theirs = foreign_gang(meta, obj.get("spec"), dialect.name)
        if theirs is not None:
            return Unchanged(f"already in a gang ({theirs})")
    if existing is not None:
        mode = "consistent"
    elif has_keys:
        mode = "gang"
    elif by_workload:
        # Its workload was left alone (skipped, or made before corral): so is it.
        return Unchanged("pod of a workload that is not a gang")
    elif owner is not None and (step := kind_of(owner.api_version, owner.kind)) and step.steps:
        # Its owner's pods run one after another (workflow steps, the registry's
        # ``steps``), not as a gang: left alone unless they carry a corral.dev key.
        return Unchanged(
            f"a step of {owner.kind} {owner.name}: steps are not a gang unless their "
            f"template sets {K.GANG}",
        )
    elif (spark := spark_pod(meta)) is not None:
        if spark.app is not None:
            # The operator copies a ganged SparkApplication's keys to its pods.
            return Unchanged("pod of a SparkApplication that is not a gang")
        mode = "spark"
    elif config.non_gang_pods == "single-pod-gang":
        mode = "single"
    else:
        return Unchanged("not a gang member")
    if mode == "gang" and by_workload and owner is not None:
        raw_min = given.get(K.MIN_AVAILABLE, "").strip()
        if raw_min.endswith("%"):
            # Its workload was not made a gang (made before corral, or while the webhook
            # was away): a percentage needs the workload's size, which a pod cannot
            # know. Refusing would block the workload for good; it runs as it is.
            return Patched(
                None,
                [
                    f'{K.MIN_AVAILABLE}: "{raw_min}" left alone: this pod\'s '
                    f"{owner.kind} {owner.name} was not made a gang when it was created, and "
                    "a pod cannot resolve a percentage; recreate the workload to gang it"
                ],
            )

    values = read_values([given], None, config, dialect, req.namespace, check_min=mode == "gang")
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
    elif isinstance(pod_name := meta.get("name"), str) and pod_name:
        name = derived_name(pod_name)
    else:
        # generateName only: the request uid keeps the gang's name unique.
        prefix = str(meta.get("generateName") or "pod").rstrip("-")
        name = derived_name(prefix, req.uid[:8])
    min_member = (
        values.min_available.count if values.min_available and values.min_available.count else 1
    )
    gang = GangInfo(name, min_member, None, values.queue, values.timeout)
    extra_warnings: list[str] = []
    if mode != "consistent":
        gang.spec_extra, extra_warnings = dialect.gang_fields(values.topology, [], False)

    ed = Editor(obj)
    pin_to_pool(ed, ("spec",), config.node_pool)
    # A pod on its own: one role of min_member pods shaped like it.
    shaped = GangShapes(name, [ResolvedRole(_ROLE, (), obj, min_member)], ed, config, min_member)
    task_groups = None
    if dialect.uses_task_groups and mode != "consistent" and min_member > 1:
        task_groups = shaped.task_groups()
    apply_keys(
        ed,
        ("metadata",),
        dialect.member_keys(gang, role=_ROLE if task_groups else None, task_groups=task_groups),
        fill_only=mode == "consistent" and split is None,
    )
    set_scheduler(ed, ("spec",), config.effective_scheduler_name)
    dialect.edit_pod(ed, meta, name, existing or name)
    warnings = [*values.warnings, *extra_warnings]

    if mode == "consistent":
        hints = []
        if owner is not None and owner.uid:
            hints = dialect.hints(req.namespace, name, existing or name, owner)
        # Made from a template admitted before: its warnings were given then.
        return Patched(ed, hints=hints)
    if (why := dialect.unusable()) is not None:
        warnings.append(cap(f"corral: no native gang written for {name}: {why}"))

    if cluster is not None and shaped.shapes() is not None:
        refusal, more = feasibility(cluster, config, name, shaped.roles_for_engine(), min_member)
        if refusal is not None:
            return Denied(403, refusal)
        warnings.extend(more)

    intents = []
    if dialect.makes_objects:
        pod_owner: OwnerRef | None = owner
        if pod_owner is None:
            bare_name = meta.get("name")
            # A bare pod owns its gang's PodGroup. Without a name (generateName only)
            # there is no way to find it again, and a PodGroup nobody owns beats pods
            # that wait for one forever.
            pod_owner = (
                OwnerRef("v1", "Pod", bare_name)
                if isinstance(bare_name, str) and bare_name
                else None
            )
        intents = dialect.gang_intents(gang, req.namespace, pod_owner, shaped)
    return Patched(ed, warnings, intents)


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
