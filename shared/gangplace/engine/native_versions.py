"""Which version of Kubernetes' own gang API (KEP-4671, ``scheduling.k8s.io``) corral
writes and reads: the one table the webhook, the descheduler and ``kubectl corral`` share.

What each release serves, read from kubernetes/api ``scheduling/*/types.go`` at v0.35.0,
v0.36.0 and v0.37.0-beta.0 and from the released OpenAPI schemas (kubernetes-validate
1.35.0-1.37.0, ``workload-scheduling-*.json``, ``podgroup-scheduling-*.json``,
``compositepodgroup-scheduling-v1alpha3.json``):

- 1.35: ``v1alpha1`` Workload (the pod groups live in it; pods name it by
  ``spec.workloadRef``).
- 1.36: ``v1alpha2`` Workload (templates) and PodGroup (pods name it by
  ``spec.schedulingGroup``).
- 1.37: ``v1alpha3`` Workload, PodGroup and CompositePodGroup, and ``v1beta1`` Workload and
  PodGroup of the same shape (no CompositePodGroup). Each is off by default: a cluster
  turns on v1alpha3, v1beta1 or both. Both versions are one stored object: the names a
  v1beta1 PodGroup gives (``parentCompositePodGroupName``, ``workloadRef``) resolve to a
  v1alpha3 CompositePodGroup and the same Workload, so a composite gang on a cluster
  serving both is a v1beta1 Workload and PodGroups under a v1alpha3 CompositePodGroup.

A v1beta1-only 1.37 cluster has no CompositePodGroup: a gang of several roles is then
one PodGroup holding every role's pods (all or nothing over the gang's minimum, as on
1.36), not one PodGroup per role.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

__all__ = [
    "COMPOSITE_VERSIONS",
    "NATIVE_API_GROUP",
    "NATIVE_VERSIONS",
    "NativeApi",
    "native_api",
    "preferred_version",
]

NATIVE_API_GROUP: Final = "scheduling.k8s.io"
# The versions of Workload and PodGroup, preferred first: the beta, then the newest alpha.
NATIVE_VERSIONS: Final = ("v1beta1", "v1alpha3", "v1alpha2", "v1alpha1")
# The versions serving CompositePodGroup (1.37: v1alpha3 only; v1beta1 has none).
COMPOSITE_VERSIONS: Final = ("v1alpha3",)
# The version whose Workload holds the groups itself (no runtime PodGroup object).
_NO_RUNTIME_GROUPS: Final = frozenset({"v1alpha1"})


@dataclass(frozen=True, slots=True)
class NativeApi:
    """The gang API corral uses on one cluster: ``version`` of Workload and PodGroup,
    ``runtime_groups`` when the PodGroup object exists there (pods name it; else they
    name the Workload), ``composite_version`` the CompositePodGroup's (None: not served,
    a gang of several roles is one PodGroup)."""

    version: str
    runtime_groups: bool
    composite_version: str | None = None

    @property
    def composite(self) -> bool:
        return self.composite_version is not None

    @property
    def api_version(self) -> str:
        return f"{NATIVE_API_GROUP}/{self.version}"

    @property
    def composite_api_version(self) -> str:
        return f"{NATIVE_API_GROUP}/{self.composite_version or COMPOSITE_VERSIONS[0]}"


def preferred_version(
    served: Collection[str], order: tuple[str, ...] = NATIVE_VERSIONS
) -> str | None:
    """The first of ``order`` in ``served`` (None: none served)."""
    return next((v for v in order if v in served), None)


def native_api(
    workloads: Collection[str], podgroups: Collection[str], composites: Collection[str] = ()
) -> NativeApi | None:
    """What corral writes, from the versions serving ``workloads``, ``podgroups`` and
    ``compositepodgroups`` (None: no gang API). A version with runtime PodGroups is used
    only where it serves both kinds."""
    for v in NATIVE_VERSIONS:
        if v not in workloads:
            continue
        runtime = v not in _NO_RUNTIME_GROUPS
        if runtime and v not in podgroups:
            continue
        composite = preferred_version(composites, COMPOSITE_VERSIONS) if runtime else None
        # v1alpha2 (1.36) PodGroups have no parent to name: no composite gang there.
        if v == "v1alpha2":
            composite = None
        return NativeApi(v, runtime, composite)
    return None
