"""Which release of each component the in-memory cluster plays.

Behaviours that differ across the versions users run (``../shared/VERSIONS.md``) ask
:class:`Versions` rather than a flag of their own, so that one server is one coherent
stack: ``ApiServer(versions=Versions.of(kube="1.31", volcano="1.10"))``. The default is
the stack the recordings were made on: kube-apiserver v1.28.7 and Volcano v1.7 without
its admission webhook.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "KUBE_VERSIONS",
    "NATIVE_API_WINDOWS",
    "VOLCANO_VERSIONS",
    "Release",
    "Versions",
]

_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?$")


@dataclass(frozen=True, slots=True, order=True)
class Release:
    """A minor release, ``1.29``; patch levels do not change what is modelled."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> Release:
        m = _RELEASE.match(text.strip())
        if m is None:
            raise ValueError(f"version {text!r}: expected MAJOR.MINOR such as '1.30'")
        return cls(int(m.group(1)), int(m.group(2)))

    def at_least(self, text: str) -> bool:
        return self >= Release.parse(text)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


# The support matrix (docs/support-matrix.md, from tests/played.py): every minor release
# the contract tests cover.
KUBE_VERSIONS: tuple[Release, ...] = tuple(Release(1, m) for m in range(28, 38))
VOLCANO_VERSIONS: tuple[Release, ...] = tuple(Release(1, m) for m in range(7, 16))

# The group versions of the native gang API (``scheduling.k8s.io``) and the releases that
# have them (first, last or None): kubernetes/api ``scheduling/`` at v0.35.0 (v1alpha1),
# v0.36.0 (v1alpha2) and v0.37.0-beta.0 (v1alpha3), and the released 1.37.0 OpenAPI
# (kubernetes-validate 1.37.0: v1beta1 Workload and PodGroup). Each is off unless the
# cluster's ``--runtime-config`` turns it on.
NATIVE_API_WINDOWS: dict[str, tuple[Release, Release | None]] = {
    "v1alpha1": (Release(1, 35), Release(1, 35)),
    "v1alpha2": (Release(1, 36), Release(1, 36)),
    "v1alpha3": (Release(1, 37), None),
    "v1beta1": (Release(1, 37), None),
}


def _has(version: str, kube: Release) -> bool:
    first, last = NATIVE_API_WINDOWS[version]
    return kube >= first and (last is None or kube <= last)


@dataclass(frozen=True, slots=True)
class Versions:
    """The stack: the Kubernetes control plane's release, Volcano's (None: no Volcano),
    and whether Volcano's admission webhook (``/pods/validate``) runs. Left None it
    follows the Volcano release's Helm chart: on by default through 1.11.

    ``native_gangs``: the cluster was started with the native gang API switched on (the
    alpha gates GenericWorkload, GangScheduling and, from 1.37, CompositePodGroup, and
    ``--runtime-config`` for the version's ``scheduling.k8s.io`` group version); a
    release before 1.35 has no such API, so the flag changes nothing there
    (:mod:`.native_gangs`). ``native_apis``: the ``scheduling.k8s.io`` versions of the
    gang API ``--runtime-config`` turned on, where the release has several (1.37:
    ``v1alpha3``, ``v1beta1`` or both); None: every version the release has.
    ``gates``: alpha feature gates switched on beyond the release's defaults (such as
    1.36's WorkloadAwarePreemption). ``kai``: KAI-Scheduler's CRDs are installed (PodGroup
    ``scheduling.run.ai/v2alpha2``, Queue ``v2``)."""

    kube: Release = Release(1, 28)
    volcano: Release | None = Release(1, 7)
    volcano_pod_validation: bool | None = False
    native_gangs: bool = False
    kai: bool = False
    native_apis: frozenset[str] | None = None
    gates: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.native_apis is None:
            return
        has = [v for v in NATIVE_API_WINDOWS if _has(v, self.kube)]
        wrong = sorted(set(self.native_apis) - set(has))
        if wrong or not self.native_apis:
            raise ValueError(
                f"native_apis {sorted(self.native_apis)}: Kubernetes {self.kube} has the "
                f"native gang API at {', '.join(has) or 'no version'}"
            )

    @classmethod
    def of(
        cls,
        kube: str = "1.28",
        volcano: str | None = "1.7",
        volcano_pod_validation: bool | None = None,
        *,
        native_gangs: bool = False,
        kai: bool = False,
        native_apis: Iterable[str] | None = None,
        gates: Iterable[str] = (),
    ) -> Versions:
        """From text; ``volcano_pod_validation`` None follows the chart's default."""
        return cls(
            Release.parse(kube),
            Release.parse(volcano) if volcano is not None else None,
            volcano_pod_validation,
            native_gangs,
            kai,
            frozenset(native_apis) if native_apis is not None else None,
            frozenset(gates),
        )

    def native_api_on(self, version: str) -> bool:
        """Whether the cluster serves the gang API's ``version`` (the release has it,
        the API is switched on, and ``--runtime-config`` names it)."""
        return (
            self.native_gangs
            and version in NATIVE_API_WINDOWS
            and _has(version, self.kube)
            and (self.native_apis is None or version in self.native_apis)
        )

    @property
    def validates_volcano_pods(self) -> bool:
        """Whether Volcano's ``/pods/validate`` admission runs on this stack."""
        if self.volcano is None:
            return False
        if self.volcano_pod_validation is not None:
            return self.volcano_pod_validation
        return not self.volcano.at_least("1.12")

    def __str__(self) -> str:
        volcano = "no Volcano" if self.volcano is None else f"Volcano {self.volcano}"
        if self.validates_volcano_pods:
            volcano += " with /pods/validate"
        native = ""
        if self.native_gangs:
            native = ", native gangs"
            if self.native_apis is not None:
                native += f" ({', '.join(sorted(self.native_apis))})"
        gates = f", gates {','.join(sorted(self.gates))}" if self.gates else ""
        extra = "".join((native, gates, ", KAI" if self.kai else ""))
        return f"Kubernetes {self.kube}, {volcano}{extra}"
