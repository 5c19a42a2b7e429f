"""The native gang API's objects (KEP-4671), per served version: pure data in, data out.

Kubernetes schedules gangs itself from 1.35. What a pod names and which objects hold the
gang's policy differ by version (docs/backends.md, "kubernetes"):

- ``scheduling.k8s.io/v1alpha1`` (1.35): a ``Workload`` with ``spec.podGroups[{name,
  policy: {gang: {minCount}}}]``; a pod points at it by ``spec.workloadRef{name, podGroup,
  podGroupReplicaKey}``, the replica key splitting one group into independent gangs.
- ``v1alpha2`` (1.36) and ``v1beta1`` (1.37): the ``Workload`` is an immutable template
  (``spec.podGroupTemplates``, at most 8); each gang is a runtime ``PodGroup``
  (``spec.podGroupTemplateRef``, ``spec.schedulingPolicy``, ``priorityClassName``) that
  pods name in ``spec.schedulingGroup.podGroupName``, set at CREATE and immutable.

Shapes from KEP-4671 (kubernetes/enhancements ``keps/sig-scheduling/4671-gang-scheduling``)
and the kubernetes.io pages "workload-reference", "scheduling-group" and
"podgroup-scheduling" as summarised in the handout's VERSIONS.md. What the API server
serves is found once by :mod:`webhook.served` and handed to admission as
:class:`Served`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .keys import MANAGED_BY

__all__ = [
    "GROUP",
    "MAX_TEMPLATES",
    "TEMPLATE",
    "NativeApi",
    "Served",
    "pod_reference",
    "podgroup_object",
    "workload_object",
]

GROUP: Final = "scheduling.k8s.io"
# The name of the one pod group (template) a corral gang is: every role of the gang in
# it, so the gang starts all or nothing as corral's other backends start it.
TEMPLATE: Final = "gang"
# The API's limit on a Workload's pod group templates (v1alpha2+).
MAX_TEMPLATES: Final = 8

# The versions of the gang API, newest first: the newest the server serves is written.
_VERSIONS: Final = ("v1beta1", "v1alpha2", "v1alpha1")


@dataclass(frozen=True, slots=True)
class Served:
    """What the API server serves that admission writes for, found by discovery at the
    webhook's start (:mod:`webhook.served`): the ``scheduling.k8s.io`` versions serving
    ``workloads`` and ``podgroups``, and the ``spec`` fields of Volcano's served
    PodGroup schema (empty: not installed, or not known)."""

    workload_versions: frozenset[str] = frozenset()
    podgroup_versions: frozenset[str] = frozenset()
    volcano_podgroup_fields: frozenset[str] = frozenset()

    @property
    def native(self) -> NativeApi | None:
        """The gang API version to write (None: the server serves none)."""
        for v in _VERSIONS:
            if v in self.workload_versions:
                return NativeApi(v, v in self.podgroup_versions and v != "v1alpha1")
        return None


@dataclass(frozen=True, slots=True)
class NativeApi:
    """One served version of the gang API: ``runtime_groups`` when it has the runtime
    PodGroup object (v1alpha2+), which pods name; else pods name the Workload."""

    version: str
    runtime_groups: bool

    @property
    def api_version(self) -> str:
        return f"{GROUP}/{self.version}"


def _meta(name: str, namespace: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": {MANAGED_BY[0]: MANAGED_BY[1]}}


def _gang_policy(min_count: int) -> dict[str, Any]:
    return {"gang": {"minCount": min_count}}


def workload_object(
    api: NativeApi,
    name: str,
    namespace: str,
    min_count: int,
    controller: Mapping[str, str] | None,
) -> dict[str, Any]:
    """The gang's ``Workload``. ``controller``: the workload it stands for (``apiGroup``,
    ``kind``, ``name``), None for a bare pod's gang."""
    spec: dict[str, Any] = {}
    if controller is not None:
        spec["controllerRef"] = dict(controller)
    if api.runtime_groups:
        spec["podGroupTemplates"] = [
            {"name": TEMPLATE, "schedulingPolicy": _gang_policy(min_count)}
        ]
    else:
        spec["podGroups"] = [{"name": TEMPLATE, "policy": _gang_policy(min_count)}]
    return {
        "apiVersion": api.api_version,
        "kind": "Workload",
        "metadata": _meta(name, namespace),
        "spec": spec,
    }


def podgroup_object(
    api: NativeApi,
    name: str,
    workload: str,
    namespace: str,
    min_count: int,
    priority_class: str | None,
) -> dict[str, Any]:
    """One runtime ``PodGroup`` (v1alpha2+): one gang, made from the Workload's template."""
    assert api.runtime_groups
    spec: dict[str, Any] = {
        "podGroupTemplateRef": {"workloadName": workload, "template": TEMPLATE},
        "schedulingPolicy": _gang_policy(min_count),
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": api.api_version,
        "kind": "PodGroup",
        "metadata": _meta(name, namespace),
        "spec": spec,
    }


def pod_reference(
    api: NativeApi, gang: str, workload: str, instance: str | None
) -> tuple[str, dict[str, Any]]:
    """The pod ``spec`` field naming its gang and its value: ``schedulingGroup`` (the
    runtime PodGroup ``gang``), else ``workloadRef`` (the Workload, the replica key
    ``instance`` for a workload with one gang per instance)."""
    if api.runtime_groups:
        return "schedulingGroup", {"podGroupName": gang}
    ref: dict[str, Any] = {"name": workload, "podGroup": TEMPLATE}
    if instance is not None:
        ref["podGroupReplicaKey"] = instance
    return "workloadRef", ref


def scheduler_names(specs: Sequence[Any]) -> set[str]:
    """The schedulerNames a gang's pod templates ask for ("" where none is set)."""
    out: set[str] = set()
    for s in specs:
        name = s.get("schedulerName") if isinstance(s, dict) else None
        out.add(name if isinstance(name, str) and name != "default-scheduler" else "")
    return out
