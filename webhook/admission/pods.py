"""Admission of a pod: a member of its workload's gang (made consistent), a bare pod
with ``corral.dev/gang`` (joins that gang), a spark-submit driver or executor, or the
configured default for other pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangplace.engine.kinds import kind_of

from webhook.admission import keys as K
from webhook.admission.cluster_fit import ClusterCapacity
from webhook.admission.dialects import GangInfo, dialect_for, foreign_gang
from webhook.admission.gang_decision import (
    GangShapes,
    controller,
    feasibility,
    podgroup_intent,
    read_values,
)
from webhook.admission.mutation import apply_keys, foreign_scheduler, pin_to_pool, set_scheduler
from webhook.admission.native_backend import native_gang_of
from webhook.admission.native_gangs import Served
from webhook.admission.patch import Editor
from webhook.admission.responses import allow, cap, deny, finish
from webhook.admission.review import AdmitResult, Request
from webhook.admission.roles import ResolvedRole
from webhook.admission.spark import spark_pod
from webhook.admission.validate import derived_name
from webhook.admission.volcano_fields import spec_fields
from webhook.config import Backend, WebhookConfig
from webhook.podgroup_intent import OwnerRef

__all__ = ["admit_pod"]

_ROLE = "members"


def admit_pod(
    req: Request,
    obj: Mapping[str, Any],
    meta: Mapping[str, Any],
    given: Mapping[str, str],
    cluster: ClusterCapacity | None,
    config: WebhookConfig,
    served: Served | None = None,
) -> AdmitResult:
    """``given``: the pod's corral.dev keys (:func:`keys.user_values`)."""
    dialect = dialect_for(config, served)
    owner = controller(meta)
    by_workload = owner is not None and config.table.owns(owner.api_version, owner.kind)
    if config.backend is Backend.KUEUE and by_workload:
        return allow(req, "Pod", "unchanged", "pod of a workload that Kueue manages")
    chosen = foreign_scheduler(obj.get("spec"), config.effective_scheduler_name)
    if chosen is not None:
        return allow(req, "Pod", "unchanged", f"asks for scheduler {chosen}")
    existing = dialect.membership(meta)
    has_keys = not given.keys().isdisjoint(K.USER_KEYS)
    spark = None
    if existing is None:
        theirs = foreign_gang(meta, config.backend) or native_gang_of(obj.get("spec"))
        if theirs is not None:
            return allow(req, "Pod", "unchanged", f"already in a gang ({theirs})")
    if existing is not None:
        mode = "consistent"
    elif has_keys:
        mode = "gang"
    elif by_workload:
        # Its workload was left alone (skipped, or made before corral): so is it.
        return allow(req, "Pod", "unchanged", "pod of a workload that is not a gang")
    elif owner is not None and _runs_steps(owner.api_version, owner.kind):
        return allow(
            req,
            "Pod",
            "unchanged",
            f"a step of {owner.kind} {owner.name}: steps are not a gang unless their "
            f"template sets {K.GANG}",
        )
    elif (spark := spark_pod(meta)) is not None:
        if spark.app is not None:
            # The operator copies a ganged SparkApplication's keys to its pods.
            return allow(req, "Pod", "unchanged", "pod of a SparkApplication that is not a gang")
        mode = "spark"
    elif config.non_gang_pods == "single-pod-gang":
        mode = "single"
    else:
        return allow(req, "Pod", "unchanged", "not a gang member")
    if mode == "gang" and by_workload and owner is not None:
        raw_min = given.get(K.MIN_AVAILABLE, "").strip()
        if raw_min.endswith("%"):
            # Its workload was not made a gang (made before corral, or while the webhook
            # was away): a percentage needs the workload's size, which a pod cannot
            # know. Refusing would block the workload for good; it runs as it is.
            return finish(
                req,
                "Pod",
                Editor(obj),
                [
                    f'{K.MIN_AVAILABLE}: "{raw_min}" left alone: this pod\'s '
                    f"{owner.kind} {owner.name} was not made a gang when it was created, and "
                    "a pod cannot resolve a percentage; recreate the workload to gang it"
                ],
            )

    values = read_values([given], None, config, req.namespace, check_min=mode == "gang")
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
    extra_warnings: list[str] = []
    if config.backend is Backend.VOLCANO and mode != "consistent":
        gang.spec_extra, extra_warnings = spec_fields(served, values.topology, [], False)

    ed = Editor(obj)
    pin_to_pool(ed, ("spec",), config.node_pool)
    # A pod on its own: one role of min_member pods shaped like it.
    shaped = GangShapes(name, [ResolvedRole(_ROLE, (), obj, min_member)], ed, config, min_member)
    task_groups = None
    if config.backend is Backend.YUNIKORN and mode != "consistent" and min_member > 1:
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
        return finish(req, "Pod", ed, [], hints=hints)
    if (why := dialect.unusable()) is not None:
        warnings.append(cap(f"corral: no native gang written for {name}: {why}"))

    if cluster is not None and shaped.shapes() is not None:
        refusal, more = feasibility(cluster, config, name, shaped.roles_for_engine(), min_member)
        if refusal is not None:
            return deny(req, "Pod", 403, "Forbidden", refusal)
        warnings.extend(more)

    intents = []
    if dialect.makes_objects:
        pod_owner: OwnerRef | None = owner
        if pod_owner is None:
            pod_name = meta.get("name")
            # A bare pod owns its gang's PodGroup. Without a name (generateName only)
            # there is no way to find it again, and a PodGroup nobody owns beats pods
            # that wait for one forever.
            pod_owner = (
                OwnerRef("v1", "Pod", pod_name) if isinstance(pod_name, str) and pod_name else None
            )
        if dialect.podgroup is not None:
            intents.append(podgroup_intent(dialect, gang, req.namespace, shaped, pod_owner))
        else:
            intents.extend(
                dialect.gang_intents(gang, req.namespace, pod_owner, None, shaped.priority_class())
            )
    return finish(req, "Pod", ed, warnings, intents)


def _runs_steps(api_version: str, kind: str) -> bool:
    """Whether the owner's pods run one after another (workflow steps, the registry's
    ``steps``), not as a gang: they are left alone unless they carry a corral.dev key
    (set on the step's template)."""
    record = kind_of(api_version, kind)
    return record is not None and record.steps


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
