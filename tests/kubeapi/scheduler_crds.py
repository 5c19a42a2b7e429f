"""The schemas of the gang schedulers' custom resources as each release installs them, so
that the in-memory API server prunes (and, under Strict, refuses) a field the installed
CRD does not declare, as the real server does (:func:`.crds.prune`).

- Volcano ``scheduling.volcano.sh/v1beta1`` PodGroup, from volcano-sh/apis
  ``pkg/apis/scheduling/v1beta1/types.go`` (``PodGroupSpec``) and the CRD the chart
  installs (``installer/helm/chart/volcano/crd/bases/scheduling.volcano.sh_podgroups.yaml``):
  ``minMember``, ``minTaskMember``, ``queue``, ``priorityClassName``, ``minResources`` in
  every release modelled; ``networkTopology{mode, highestTierAllowed}`` from v1.12 (the
  HyperNode release); ``subGroupPolicy[{name, subGroupSize, minSubGroups, labelSelector,
  matchLabelKeys, networkTopology}]`` from v1.14 (volcano-sh/apis#195, released with
  v1.14.0), with ``networkTopology.highestTierName`` taken to arrive with it (not
  checked at its tag).
- KAI-Scheduler ``scheduling.run.ai/v2alpha2`` PodGroup (``pkg/apis/scheduling/v2alpha2/
  podgroup_types.go``: minMember, queue, priorityClassName, preemptibility, parallelism,
  completions, backoffLimit, markUnschedulable, schedulingBackoff, topologyConstraint,
  subGroups[{name, minMember, parent}]) and ``scheduling.run.ai/v2`` Queue (``spec:
  displayName, parentQueue, priority, resources{gpu, cpu, memory: {quota, limit,
  overQuotaWeight}}``).

Statuses are kept whole (``x-kubernetes-preserve-unknown-fields``): the schedulers
write them, and what they hold is not what is checked here.
"""

from __future__ import annotations

from typing import Any, Final

from tests.kubeapi.resources import ResourceType
from tests.kubeapi.versions import Release

Json = dict[str, Any]

__all__ = ["KAI_TYPES", "kai_schemas", "volcano_podgroup_schema"]

KAI_TYPES: Final[tuple[ResourceType, ...]] = (
    ResourceType(
        "scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", True, True, builtin=False
    ),
    ResourceType("scheduling.run.ai", "v2", "queues", "Queue", False, True, builtin=False),
)

_STRING: Final[Json] = {"type": "string"}
_INT: Final[Json] = {"type": "integer", "format": "int32"}
_QUANTITY: Final[Json] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
}
_STATUS: Final[Json] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_SELECTOR: Final[Json] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _root(spec: Json) -> Json:
    return {
        "type": "object",
        "properties": {
            "apiVersion": _STRING,
            "kind": _STRING,
            "metadata": {"type": "object"},
            "spec": spec,
            "status": _STATUS,
        },
    }


def _object(**props: Json) -> Json:
    return {"type": "object", "properties": props}


def volcano_podgroup_schema(volcano: Release) -> Json:
    """The ``openAPIV3Schema`` of Volcano's PodGroup at ``volcano``."""
    props: Json = {
        "minMember": _INT,
        "minTaskMember": {"type": "object", "additionalProperties": _INT},
        "queue": _STRING,
        "priorityClassName": _STRING,
        "minResources": {"type": "object", "additionalProperties": _QUANTITY},
    }
    topology = {"mode": {"type": "string", "enum": ["hard", "soft"]}, "highestTierAllowed": _INT}
    if volcano >= Release(1, 14):
        topology["highestTierName"] = _STRING
    if volcano >= Release(1, 12):
        props["networkTopology"] = _object(**topology)
    if volcano >= Release(1, 14):
        props["subGroupPolicy"] = {
            "type": "array",
            "items": _object(
                name=_STRING,
                subGroupSize=_INT,
                minSubGroups=_INT,
                labelSelector=_SELECTOR,
                matchLabelKeys={"type": "array", "items": _STRING},
                networkTopology=_object(**topology),
            ),
        }
    return _root(_object(**props))


def kai_schemas() -> dict[tuple[str, str, str], Json]:
    """KAI's PodGroup and Queue schemas by (group, version, plural)."""
    topology = _object(
        preferredTopologyLevel=_STRING, requiredTopologyLevel=_STRING, topology=_STRING
    )
    pod_group = _object(
        minMember=_INT,
        queue=_STRING,
        priorityClassName=_STRING,
        preemptibility={"type": "string", "enum": ["preemptible", "non-preemptible"]},
        parallelism=_INT,
        completions=_INT,
        backoffLimit=_INT,
        markUnschedulable={"type": "boolean"},
        schedulingBackoff=_INT,
        topologyConstraint=topology,
        subGroups={
            "type": "array",
            "items": _object(name=_STRING, minMember=_INT, parent=_STRING),
        },
    )
    resource = _object(
        quota={"type": "number"}, limit={"type": "number"}, overQuotaWeight={"type": "number"}
    )
    queue = _object(
        displayName=_STRING,
        parentQueue=_STRING,
        priority=_INT,
        resources=_object(gpu=resource, cpu=resource, memory=resource),
    )
    return {
        ("scheduling.run.ai", "v2alpha2", "podgroups"): _root(pod_group),
        ("scheduling.run.ai", "v2", "queues"): _root(queue),
    }
