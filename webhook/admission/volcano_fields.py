"""What Volcano 1.12+ PodGroups say beyond minMember, written only where the served
PodGroup schema has the field (:class:`~webhook.admission.native_gangs.Served`): pure.

- ``spec.networkTopology{mode, highestTierAllowed}`` (Volcano 1.12+) from the user's
  ``corral.dev/network-topology`` (``"hard"``, ``"soft"``, ``"hard:2"``, read by
  :func:`webhook.admission.validate.parse_network_topology`): the gang stays within one
  HyperNode of at most that tier.
- ``spec.subGroupPolicy[{name, subGroupSize, minSubGroups, labelSelector,
  matchLabelKeys}]`` (Volcano 1.14+, volcano-sh/apis#195) for a gang made of repeated
  groups: each replicated job of a JobSet
  (its Jobs told apart by their ``jobset.sigs.k8s.io/job-index`` label) is a subgroup of
  its Job's parallelism; the gang needs all of them when it needs all its pods.

Shapes from volcano-sh/apis ``pkg/apis/scheduling/types.go`` (``PodGroupSpec``,
``SubGroupPolicySpec``, ``NetworkTopologySpec``; release-1.12 and newer), JobSet's pod
labels from kubernetes-sigs/jobset ``api/jobset/v1alpha2/jobset_types.go``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from webhook.admission.keys import NETWORK_TOPOLOGY
from webhook.admission.native_gangs import Served

__all__ = ["repeated_groups", "spec_fields"]

_JOBSET_RJOB: Final = "jobset.sigs.k8s.io/replicatedjob-name"
_JOBSET_INDEX: Final = "jobset.sigs.k8s.io/job-index"


def repeated_groups(group: str, kind: str, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The subgroups of a workload made of repeated groups (a JobSet's replicated jobs
    with more than one replica), without ``minSubGroups``."""
    if (group, kind) != ("jobset.x-k8s.io", "JobSet"):
        return []
    spec = obj.get("spec")
    rjobs = spec.get("replicatedJobs") if isinstance(spec, dict) else None
    out: list[dict[str, Any]] = []
    for rj in rjobs if isinstance(rjobs, list) else ():
        if not isinstance(rj, dict):
            continue
        name, replicas = rj.get("name"), rj.get("replicas", 1)
        template = rj.get("template")
        job_spec = template.get("spec") if isinstance(template, dict) else None
        size = job_spec.get("parallelism", 1) if isinstance(job_spec, dict) else 1
        if not isinstance(name, str) or not isinstance(replicas, int) or replicas < 2:
            continue
        if not isinstance(size, int) or size < 1:
            continue
        out.append(
            {
                "name": name,
                "subGroupSize": size,
                "replicas": replicas,
                "labelSelector": {"matchLabels": {_JOBSET_RJOB: name}},
                "matchLabelKeys": [_JOBSET_INDEX],
            }
        )
    return out


def spec_fields(
    served: Served | None,
    topology: Mapping[str, Any] | None,
    subgroups: list[dict[str, Any]],
    whole: bool,
) -> tuple[dict[str, Any], list[str]]:
    """The PodGroup ``spec`` fields to add, and the warnings for what the served schema
    cannot hold. ``whole``: the gang needs every pod (then every subgroup too)."""
    fields = served.volcano_podgroup_fields if served is not None else frozenset()
    out: dict[str, Any] = {}
    warnings: list[str] = []
    if topology is not None:
        if "networkTopology" in fields:
            out["networkTopology"] = dict(topology)
        else:
            warnings.append(
                f"corral: {NETWORK_TOPOLOGY} is not applied: the served Volcano PodGroup has "
                "no networkTopology (Volcano 1.12+)"
            )
    if subgroups and "subGroupPolicy" in fields:
        policy = []
        for sg in subgroups:
            one = {k: v for k, v in sg.items() if k != "replicas"}
            if whole:
                one["minSubGroups"] = sg["replicas"]
            policy.append(one)
        out["subGroupPolicy"] = policy
    return out, warnings
