"""What admission asks of the PodGroup reconciler, as plain data: the PodGroup it wants
(:class:`PodGroupIntent`, with its :class:`OwnerRef`), the owner a later admission names
(:class:`OwnerHint`), and what a PodGroup already there is to an intent
(:class:`Existing`, :data:`Removed`). :func:`webhook.admission.entry.admit` makes them; the
reconciler (:mod:`webhook.podgroups.reconciler`) acts on them. Outside both packages:
the controller calls admission, so admission must not import the controller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, Literal, NamedTuple

__all__ = ["Existing", "OwnerHint", "OwnerRef", "PodGroupIntent", "Removed"]


class OwnerRef(NamedTuple):
    """A reference to the object whose deletion should delete the PodGroup."""

    api_version: str
    kind: str
    name: str
    uid: str = ""

    def to_json(self) -> dict[str, Any]:
        # Neither controller nor blockOwnerDeletion: the workload's own controller may
        # want to adopt things, and blocking deletion needs rights on the owner.
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
        }


class PodGroupIntent:
    """A PodGroup admission wants to exist. ``body`` is the whole object except
    ``metadata.ownerReferences``; ``owner`` is None for a gang nobody owns.

    ``body`` may be given as a function: it is then called on first use and its result
    kept, so the work of describing a gang (the engine's minResources) happens once,
    in the reconciler, rather than on every review of the gang's pods."""

    __slots__ = (
        "_body",
        "_build",
        "api_version",
        "name",
        "namespace",
        "owner",
        "plural",
        "remove",
        "update",
    )

    def __init__(
        self,
        api_version: str,
        plural: str,
        namespace: str,
        name: str,
        body: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
        owner: OwnerRef | None,
        *,
        update: bool = False,
        remove: bool = False,
    ) -> None:
        self.api_version, self.plural = api_version, plural
        self.namespace, self.name, self.owner = namespace, name, owner
        self.update = update
        self.remove = remove
        self._body: Mapping[str, Any] | None = None
        self._build: Callable[[], Mapping[str, Any]] | None = None
        if callable(body):
            self._build = body
        else:
            self._body = body

    def __repr__(self) -> str:
        what = ", update" if self.update else ", remove" if self.remove else ""
        return (
            f"PodGroupIntent({self.api_version} {self.namespace}/{self.name}, "
            f"owner={self.owner}{what})"
        )

    @property
    def body(self) -> Mapping[str, Any]:
        if self._body is None:
            assert self._build is not None
            self._body, self._build = self._build(), None
        return self._body

    @property
    def key(self) -> tuple[str, str, str, str]:
        # The kind too: the native gang API has a Workload and a PodGroup of one name.
        return (self.api_version, self.namespace, self.name, self.plural)

    @property
    def group(self) -> str:
        return self.api_version.partition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.partition("/")[2]

    def render(self, owner: OwnerRef | None) -> dict[str, Any]:
        """The object to POST, with the owner (whose uid is known by now) attached."""
        body = dict(self.body)
        meta = dict(body.get("metadata") or {})
        if owner is not None and owner.uid:
            meta["ownerReferences"] = [owner.to_json()]
        body["metadata"] = meta
        return body


class OwnerHint(NamedTuple):
    """A pod admitted into gang ``name`` whose controller (with uid) is ``owner``."""

    api_version: str  # of the PodGroup
    namespace: str
    name: str
    owner: OwnerRef
    plural: str = "podgroups"

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.api_version, self.namespace, self.name, self.plural)


class Existing(StrEnum):
    """What a PodGroup that made ``create`` answer 409 is to the intent."""

    OURS = "ours"  # owned by this owner (or the gang has no owner): nothing to do
    JOINED = "joined"  # a bare-pod gang's: this pod was added as one more owner
    OTHER = "other"  # someone else's, or nobody's: left alone
    STALE = "stale"  # an earlier owner's of the same kind and name, being deleted
    GONE = "gone"  # deleted since the 409: create it again
    UPDATED = "updated"  # ours, and brought to the scaled workload's minMember


# What ``remove`` did: deleted the PodGroup; found none; found one that is not this
# owner's or that corral did not make (left alone).
Removed = Literal["removed", "absent", "foreign"]
