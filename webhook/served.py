"""What the API server serves that admission writes for, found by discovery once at the
webhook's start: the native gang API's versions (``/apis/scheduling.k8s.io``) and the
fields of Volcano's served PodGroup schema (its CRD). A feature gate turned on later
needs a restart of the webhook (as the API server itself needs one to serve it).

The answer is plain data (:class:`~webhook.admission.native_gangs.Served`) handed to ``admit()``,
which stays pure.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from gangplace.kube import ApiError, KubeClient
from gangplace.kube.resources import CRDS

from webhook.admission.native_gangs import GROUP, Served

__all__ = ["discover", "served_from"]

log = logging.getLogger(__name__)

_VOLCANO_PODGROUPS_CRD = "podgroups.scheduling.volcano.sh"
_VOLCANO_VERSION = "v1beta1"


async def _get(kube: KubeClient, path: str) -> dict[str, Any] | None:
    try:
        return await kube.request("GET", path)
    except ApiError as e:
        if e.status in (403, 404):
            return None
        raise


def served_from(
    group: Mapping[str, Any] | None,
    versions: Mapping[str, Mapping[str, Any]],
    volcano_crd: Mapping[str, Any] | None,
) -> Served:
    """:class:`Served` from the discovery documents: ``group`` (``/apis/scheduling.k8s.io``),
    ``versions`` (each ``/apis/scheduling.k8s.io/VERSION`` resource list) and Volcano's
    PodGroup CRD."""
    found: dict[str, set[str]] = {
        "workloads": set(),
        "podgroups": set(),
        "compositepodgroups": set(),
    }
    for version, doc in versions.items():
        names = {r.get("name") for r in doc.get("resources") or () if isinstance(r, dict)}
        for plural, where in found.items():
            if plural in names:
                where.add(version)
    return Served(
        frozenset(found["workloads"]),
        frozenset(found["podgroups"]),
        _volcano_fields(volcano_crd),
        frozenset(found["compositepodgroups"]),
    )


def _volcano_fields(crd: Mapping[str, Any] | None) -> frozenset[str]:
    """The ``spec`` properties of the served v1beta1 PodGroup schema."""
    if not crd:
        return frozenset()
    for v in (crd.get("spec") or {}).get("versions") or ():
        if not isinstance(v, dict) or v.get("name") != _VOLCANO_VERSION or not v.get("served"):
            continue
        props = (
            (((v.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {})
            .get("spec", {})
            .get("properties")
        )
        if isinstance(props, dict):
            return frozenset(props)
    return frozenset()


async def discover(kube: KubeClient) -> Served:
    """Ask the API server (discovery, and the CRD of Volcano's PodGroup)."""
    group = await _get(kube, f"/apis/{GROUP}")
    versions: dict[str, Mapping[str, Any]] = {}
    for v in (group or {}).get("versions") or ():
        name = v.get("version") if isinstance(v, dict) else None
        if isinstance(name, str) and name != "v1":
            doc = await _get(kube, f"/apis/{GROUP}/{name}")
            if doc is not None:
                versions[name] = doc
    try:
        crd: Mapping[str, Any] | None = await kube.get(CRDS, _VOLCANO_PODGROUPS_CRD)
    except ApiError as e:
        if e.status not in (403, 404):
            raise
        crd = None
    served = served_from(group, versions, crd)
    native = served.native
    log.info(
        "served APIs found",
        extra={
            "fields": {
                "native_gangs": native.api_version if native else None,
                "volcano_podgroup_fields": sorted(served.volcano_podgroup_fields),
            }
        },
    )
    return served
