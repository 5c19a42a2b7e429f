"""The ``kubernetes`` backend: gangs in the native gang API (KEP-4671), in the version
the API server serves (:class:`~webhook.admission.native_gangs.Served`).

A gang is one ``Workload`` (and, from v1alpha2, one runtime ``PodGroup`` per gang) made
off the request path like the other backends' PodGroups, owned by the workload (or the
bare pod). Every pod names its group at CREATE (``spec.workloadRef`` or
``spec.schedulingGroup``, immutable afterwards); the pod is never refused because the
group is not there yet: the scheduler holds it until it is. The templates carry
:data:`NATIVE_GANG`, so a pod of a ganged workload knows its gang without a lookup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from gangplace.engine.membership import NATIVE_GANG

from webhook.admission import keys as K
from webhook.admission.backends.dialect import (
    POD_FIELDS,
    Dialect,
    GangInfo,
    GangReading,
    Keys,
    TaskGroup,
)
from webhook.admission.native_gangs import (
    MAX_TEMPLATES,
    TEMPLATE,
    NativeApi,
    Served,
    composite_objects,
    gang_objects,
    pod_reference,
    scheduler_names,
)
from webhook.admission.patch import Editor
from webhook.admission.validate import InvalidValue, derived_name
from webhook.podgroup_intent import OwnerHint, OwnerRef, PodGroupIntent

if TYPE_CHECKING:
    from gangplace.engine.kinds import WorkloadKind

__all__ = ["NATIVE_GANG", "NATIVE_GROUP", "POD_FIELDS", "Kubernetes"]

# On the pod templates (and pods) of a native gang: the gang's name (NATIVE_GANG, read
# by the one membership reader, gangplace.engine.membership).
# On the pod templates of a gang of several roles under a CompositePodGroup (1.37): the
# role's pod group template; its pods join the PodGroup ``<gang>-<template>``.
NATIVE_GROUP: Final = "corral.dev/native-group"


class Kubernetes(Dialect):
    name = "kubernetes"
    has_queues = False
    no_timeout = "the native gang API has no per-gang timeout (the scheduler's Permit wait applies)"

    def __init__(self, served: Served | None = None) -> None:
        super().__init__(served)
        self.api: NativeApi | None = served.native if served is not None else None

    @property
    def makes_objects(self) -> bool:
        return True

    def member_keys(
        self, gang: GangInfo, *, role: str | None, task_groups: Sequence[TaskGroup] | None
    ) -> Keys:
        return Keys(annotations={NATIVE_GANG: gang.name})

    # --- what only this backend does -------------------------------------------------

    def unusable(self) -> str | None:
        """Why no gang can be written (the server serves no gang API), else None."""
        if self.api is not None:
            return None
        if self.served is None:
            return "the served scheduling.k8s.io versions are not known (no API server)"
        return (
            "the API server serves no scheduling.k8s.io Workload (Kubernetes 1.35+, with "
            "the GenericWorkload and GangScheduling feature gates)"
        )

    def left_alone(self, entry: WorkloadKind, obj: Mapping[str, Any]) -> str | None:
        """A workload its own controller gangs where the runtime PodGroup is served (its
        kind's ``self_ganged`` hook: the Job controller's Indexed Jobs, KEP-5547)."""
        if self.api is None or not self.api.runtime_groups:
            return None
        return entry.hooks.self_ganged(obj)

    def composite_for(self, roles: int, per_instance: bool) -> bool:
        """Whether a gang of ``roles`` roles is a CompositePodGroup over one PodGroup per
        role (1.37 with CompositePodGroup served; not for a kind with one gang per
        instance, whose instances are its gangs)."""
        return self.api is not None and self.api.composite and roles > 1 and not per_instance

    def check_templates(self, specs: Sequence[Any], per_instance: bool) -> None:
        """All pods of a native gang share one schedulerName (the API refuses others); a
        composite gang has at most 8 roles (the API's templates per level)."""
        if self.composite_for(len(specs), per_instance) and len(specs) > MAX_TEMPLATES:
            raise InvalidValue(
                "pod templates",
                str(len(specs)),
                f"are more than the {MAX_TEMPLATES} pod group templates a "
                "CompositePodGroup may hold",
                f"at most {MAX_TEMPLATES} roles in one gang, or split the workload",
            )
        names = scheduler_names(specs)
        if len(names) > 1:
            shown = ", ".join(sorted(n or "default-scheduler" for n in names))
            raise InvalidValue(
                "spec.schedulerName",
                shown,
                "differs between the pod templates of one gang",
                "one schedulerName for every pod template (the native gang API places a "
                "group with one scheduler)",
            )

    def edit_pod(self, ed: Editor, meta: Mapping[str, Any], gang: str, workload: str) -> None:
        """Name the pod's group in its spec (set at CREATE: the field is immutable)."""
        if self.api is None:
            return
        ann = meta.get("annotations")
        split = ann.get(K.SPLIT_GANG) if isinstance(ann, dict) else None
        if isinstance(split, str) and split and gang != split:
            workload = split  # a pod of one instance: the Workload is its workload's gang
        instance = _instance(meta) if gang != workload else None
        template = TEMPLATE
        role = ann.get(NATIVE_GROUP) if isinstance(ann, dict) else None
        if isinstance(role, str) and role and self.api.composite:
            template, gang = role, derived_name(workload, role)
        field, value = pod_reference(self.api, gang, workload, template, instance)
        if ed.get(("spec", field)) != value:
            ed.set(("spec", field), value)

    def role_keys(self, keys: Keys, role: str, roles: int, per_instance: bool) -> None:
        if self.composite_for(roles, per_instance):
            keys.annotations[NATIVE_GROUP] = derived_name(role)

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
        """The gang's Workload and runtime PodGroups (and, for a gang of several roles
        on 1.37, its CompositePodGroup), made where missing: a Workload's template does
        not follow a scaled workload (it is immutable, minCount changes from v1beta1
        only), so ``update`` changes nothing."""
        api = self.api
        if api is None:
            return []
        ctrl = None
        if owner is not None and owner.kind != "Pod":
            ctrl = {
                "apiGroup": owner.api_version.rpartition("/")[0],
                "kind": owner.kind,
                "name": owner.name,
            }
        priority_class = shaped.priority_class()
        if self.composite_for(len(shaped.roles), instances is not None):
            # Each role and how many of it the gang needs.
            per_role = shaped.required_per_role()
            roles = [
                (r.name, per_role[i] if per_role is not None else r.count)
                for i, r in enumerate(shaped.roles)
            ]
            objects = composite_objects(api, gang.name, namespace, ctrl, priority_class, roles)
        else:
            objects = gang_objects(
                api, gang.name, gang.min_member, namespace, ctrl, instances, priority_class
            )
        return [
            PodGroupIntent(api_version, plural, namespace, name, body, owner)
            for api_version, plural, name, body in objects
        ]

    def hints(self, namespace: str, gang: str, workload: str, owner: OwnerRef) -> list[OwnerHint]:
        """The owner (with its uid) of the gang objects a pod of a workload belongs to."""
        api = self.api
        if api is None:
            return []
        out = [OwnerHint(api.api_version, namespace, workload, owner, "workloads")]
        if api.runtime_groups and not api.composite:
            out.append(OwnerHint(api.api_version, namespace, gang, owner, "podgroups"))
        return out


def _instance(meta: Mapping[str, Any]) -> str | None:
    """The instance of a pod of a kind with one gang per instance (its split label)."""
    ann, labels = meta.get("annotations"), meta.get("labels")
    if not isinstance(ann, dict) or not isinstance(labels, dict):
        return None
    by = ann.get(K.SPLIT_BY)
    v = labels.get(by) if isinstance(by, str) else None
    return v if isinstance(v, str) and v else None
