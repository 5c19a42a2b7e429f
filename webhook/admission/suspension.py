"""A suspended workload has no PodGroup (docs/safe-moves.md, "The PodGroup of a
suspended workload").

A workload with its suspend switch on (its registry entry's ``suspend_path``,
:data:`gangplace.engine.kinds.KINDS`)
has no pods, and Volcano holds a PodGroup without pods ``Inqueue`` with a Warning Event
every second. So admission makes no PodGroup for a workload created suspended, makes
it when an UPDATE resumes the workload, and removes it when an UPDATE suspends it --
unless corral's descheduler suspended it (``corral.dev/suspended-by``): the descheduler
removes that PodGroup itself, keeping a copy it makes again on resume. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from gangplace.engine.kinds import KINDS, Kinds
from gangplace.engine.owners import ANNOTATION_SUSPENDED_BY

__all__ = ["Change", "change", "is_suspended", "suspended_by_descheduler"]

Change = Literal["suspended", "resumed"]


def is_suspended(group: str, kind: str, obj: Any, kinds: Kinds = KINDS) -> bool:
    """Whether ``obj`` (a workload of ``group``/``kind``) has its suspend switch on;
    ``kinds``: the registry the config extends (an added kind's ``suspendPath``)."""
    record = kinds.get((group, kind))
    path = record.suspend_path if record is not None else ()
    if not path or not isinstance(obj, Mapping):
        return False
    cur: Any = obj
    for part in path:
        if not isinstance(cur, Mapping):
            return False
        cur = cur.get(part)
    return cur is True


def change(
    group: str, kind: str, old: Any, new: Mapping[str, Any], kinds: Kinds = KINDS
) -> Change | None:
    """What an UPDATE from ``old`` to ``new`` did to the suspend switch (None: nothing).
    An UPDATE without the old object cannot say: None."""
    if not isinstance(old, Mapping):
        return None
    before, after = is_suspended(group, kind, old, kinds), is_suspended(group, kind, new, kinds)
    if before == after:
        return None
    return "suspended" if after else "resumed"


def suspended_by_descheduler(meta: Mapping[str, Any]) -> bool:
    """Whether corral's descheduler suspended the workload (its mark is on it)."""
    ann = meta.get("annotations")
    return isinstance(ann, Mapping) and ANNOTATION_SUSPENDED_BY in ann
