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


# The support matrix (docs/install.md): every minor release the contract tests cover.
KUBE_VERSIONS: tuple[Release, ...] = tuple(Release(1, m) for m in range(28, 38))
VOLCANO_VERSIONS: tuple[Release, ...] = tuple(Release(1, m) for m in range(7, 16))


@dataclass(frozen=True, slots=True)
class Versions:
    """The stack: the Kubernetes control plane's release, Volcano's (None: no Volcano),
    and whether Volcano's admission webhook (``/pods/validate``) runs. Left None it
    follows the Volcano release's Helm chart: on by default through 1.11."""

    kube: Release = Release(1, 28)
    volcano: Release | None = Release(1, 7)
    volcano_pod_validation: bool | None = False

    @classmethod
    def of(
        cls,
        kube: str = "1.28",
        volcano: str | None = "1.7",
        volcano_pod_validation: bool | None = None,
    ) -> Versions:
        """From text; ``volcano_pod_validation`` None follows the chart's default."""
        return cls(
            Release.parse(kube),
            Release.parse(volcano) if volcano is not None else None,
            volcano_pod_validation,
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
        return f"Kubernetes {self.kube}, {volcano}"
