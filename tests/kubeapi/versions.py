"""Which release of each component the in-memory cluster plays.

Behaviours that differ across the versions users run (``../shared/VERSIONS.md``) ask
:class:`Versions` rather than a flag of their own, so that one server is one coherent
stack: ``ApiServer(versions=Versions.of(kube="1.31", volcano="1.10"))``. The default is
the stack the recordings were made on: kube-apiserver v1.28.7 and Volcano v1.7 without
its admission webhook.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "KUBE_VERSIONS",
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


@dataclass(frozen=True, slots=True)
class Versions:
    """The stack: the Kubernetes control plane's release, Volcano's (None: no Volcano),
    and whether Volcano's admission webhook (``/pods/validate``) runs. Left None it
    follows the Volcano release's Helm chart: on by default through 1.11.

    ``native_gangs``: the cluster was started with the native gang API switched on (the
    alpha gates GenericWorkload, GangScheduling and, from 1.37, CompositePodGroup, and
    ``--runtime-config`` for the version's ``scheduling.k8s.io`` group version); a
    release before 1.35 has no such API, so the flag changes nothing there
    (:mod:`.native_gangs`). ``kai``: KAI-Scheduler's CRDs are installed (PodGroup
    ``scheduling.run.ai/v2alpha2``, Queue ``v2``)."""

    kube: Release = Release(1, 28)
    volcano: Release | None = Release(1, 7)
    volcano_pod_validation: bool | None = False
    native_gangs: bool = False
    kai: bool = False

    @classmethod
    def of(
        cls,
        kube: str = "1.28",
        volcano: str | None = "1.7",
        volcano_pod_validation: bool | None = None,
        *,
        native_gangs: bool = False,
        kai: bool = False,
    ) -> Versions:
        """From text; ``volcano_pod_validation`` None follows the chart's default."""
        return cls(
            Release.parse(kube),
            Release.parse(volcano) if volcano is not None else None,
            volcano_pod_validation,
            native_gangs,
            kai,
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
        extra = "".join(
            (", native gangs" if self.native_gangs else "", ", KAI" if self.kai else "")
        )
        return f"Kubernetes {self.kube}, {volcano}{extra}"
