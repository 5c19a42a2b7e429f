"""What Volcano 1.12+ PodGroups say beyond minMember, written only where the served
PodGroup schema has the field (:class:`~webhook.admission.native_gangs.Served`): pure.

- ``spec.networkTopology{mode, highestTierAllowed}`` (Volcano 1.12+) from the user's
  ``corral.dev/network-topology`` (``"hard"``, ``"soft"``, ``"hard:2"``, read by
  :func:`webhook.admission.validate.parse_network_topology`): the gang stays within one
  HyperNode of at most that tier.
- ``spec.subGroupPolicy[{name, subGroupSize, minSubGroups, labelSelector,
  matchLabelKeys}]`` (Volcano 1.14+, volcano-sh/apis#195) for a gang made of repeated
  groups, as its kind's ``subgroups`` hook finds them (a JobSet's replicated jobs:
  ``gangplace.engine.quirks.jobset_subgroups``); the gang needs all of them when it
  needs all its pods.

Shapes from volcano-sh/apis ``pkg/apis/scheduling/types.go`` (``PodGroupSpec``,
``SubGroupPolicySpec``, ``NetworkTopologySpec``; release-1.12 and newer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.admission.keys import NETWORK_TOPOLOGY
from webhook.admission.native_gangs import Served

__all__ = ["spec_fields"]


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
