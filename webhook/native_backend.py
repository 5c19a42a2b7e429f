"""The ``kubernetes`` backend: gangs in the native gang API (KEP-4671), in the version
the API server serves (:class:`~webhook.native_gangs.Served`).

A gang is one ``Workload`` (and, from v1alpha2, one runtime ``PodGroup`` per gang) made
off the request path like the other backends' PodGroups, owned by the workload (or the
bare pod). Every pod names its group at CREATE (``spec.workloadRef`` or
``spec.schedulingGroup``, immutable afterwards); the pod is never refused because the
group is not there yet: the scheduler holds it until it is. The templates carry
:data:`NATIVE_GANG`, so a pod of a ganged workload knows its gang without a lookup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from . import keys as K
from .backends import Dialect, GangInfo, Keys, TaskGroup
from .config import Backend, WebhookConfig
from .native_gangs import (
    NativeApi,
    Served,
    pod_reference,
    podgroup_object,
    scheduler_names,
    workload_object,
)
from .patch import Editor
from .podgroups.intent import OwnerHint, OwnerRef, PodGroupIntent
from .validate import InvalidValue, derived_name

__all__ = ["NATIVE_GANG", "POD_FIELDS", "Kubernetes", "native_gang_of"]

# On the pod templates (and pods) of a native gang: the gang's name.
NATIVE_GANG: Final = "corral.dev/native-gang"
# The pod fields that name a native gang, in every version.
POD_FIELDS: Final = ("workloadRef", "schedulingGroup")


class Kubernetes(Dialect):
    backend = Backend.KUBERNETES

    def __init__(self, config: WebhookConfig, served: Served | None) -> None:
        super().__init__(config)
        self.served = served
        self.api: NativeApi | None = served.native if served is not None else None

    @property
    def makes_objects(self) -> bool:
        return True

    def membership(self, meta: Mapping[str, Any] | None) -> str | None:
        ann = meta.get("annotations") if meta else None
        v = ann.get(NATIVE_GANG) if isinstance(ann, dict) else None
        return v if isinstance(v, str) and v else None

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
        return "the API server serves no scheduling.k8s.io Workload (Kubernetes 1.35+, with "
        "the GenericWorkload and GangScheduling feature gates)"

    def left_alone(self, group: str, kind: str, obj: Mapping[str, Any]) -> str | None:
        """A Job the Job controller gangs itself (KEP-5547, WorkloadWithJob: Indexed, with
        parallelism equal to completions, where the runtime PodGroup is served)."""
        if (group, kind) != ("batch", "Job") or self.api is None or not self.api.runtime_groups:
            return None
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get("completionMode") != "Indexed":
            return None
        par, comp = spec.get("parallelism", 1), spec.get("completions")
        if isinstance(comp, int) and par == comp:
            return (
                "an Indexed Job with parallelism == completions: the Job controller makes its gang"
            )
        return None

    def check_templates(self, specs: Sequence[Any]) -> None:
        """All pods of a native gang share one schedulerName (the API refuses others)."""
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
        field, value = pod_reference(self.api, gang, workload, instance)
        if ed.get(("spec", field)) != value:
            ed.set(("spec", field), value)

    def gang_intents(
        self,
        gang: GangInfo,
        namespace: str,
        owner: OwnerRef | None,
        instances: int | None,
        priority_class: str | None,
    ) -> list[PodGroupIntent]:
        """The gang's Workload and runtime PodGroups, for the reconciler."""
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
        out = [
            PodGroupIntent(
                api.api_version,
                "workloads",
                namespace,
                gang.name,
                workload_object(api, gang.name, namespace, gang.min_member, ctrl),
                owner,
            )
        ]
        if not api.runtime_groups:
            return out
        names = (
            [gang.name]
            if instances is None
            else [derived_name(gang.name, str(i)) for i in range(instances)]
        )
        for n in names:
            body = podgroup_object(api, n, gang.name, namespace, gang.min_member, priority_class)
            out.append(PodGroupIntent(api.api_version, "podgroups", namespace, n, body, owner))
        return out

    def hints(self, namespace: str, gang: str, workload: str, owner: OwnerRef) -> list[OwnerHint]:
        """The owner (with its uid) of the gang objects a pod of a workload belongs to."""
        api = self.api
        if api is None:
            return []
        out = [OwnerHint(api.api_version, namespace, workload, owner, "workloads")]
        if api.runtime_groups:
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


def native_gang_of(spec: Any) -> str | None:
    """The pod field naming a native gang someone else set (the Job controller's)."""
    if not isinstance(spec, dict):
        return None
    return next((f for f in POD_FIELDS if spec.get(f)), None)
