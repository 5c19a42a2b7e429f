"""Which suspensions corral made are due to end, and what to heal (pure).

corral marks each workload it suspends with ``corral.dev/suspended-by`` (JSON: the
plan, the time, the gang it made room for, and the PodGroup it removed). A workload is
resumed once that gang is bound (as many members running as it needs), once the gang
is gone, or after ``moves.resume_after``, whichever comes first. Only workloads that
carry the mark are ever resumed: one suspended by a person, Kueue or another controller
is left as it is. A run that crashed between a suspend and its resume is healed by the
next run: the mark is on the workload, not in the process.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from gangplace.engine.owners import ANNOTATION_SUSPENDED_BY, WorkloadRecord
from gangplace.engine.timeparse import TimeFormatError, format_duration, format_time, parse_time

from descheduler.config import DeschedulerConfig
from descheduler.planning.gang_views import build_views
from descheduler.planning.move_method import Owners
from descheduler.planning.state import ClusterState

__all__ = ["Mark", "Resumption", "due_resumptions", "mark_text", "read_mark"]


@dataclass(frozen=True, slots=True)
class Mark:
    """What ``corral.dev/suspended-by`` says. ``podgroup``: the PodGroup corral removed
    when it suspended the workload (made again on resume), trimmed to what creating it
    needs; None when it removed none or the mark is on another workload of the gang."""

    plan: str
    at: datetime | None
    for_gang: str | None
    podgroup: Mapping[str, Any] | None = None


def mark_text(
    plan: str, at: datetime, for_gang: str | None, podgroup: Mapping[str, Any] | None
) -> str:
    doc: dict[str, Any] = {"plan": plan, "at": format_time(at), "for": for_gang}
    if podgroup is not None:
        doc["podGroup"] = podgroup
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def read_mark(w: WorkloadRecord) -> Mark | None:
    """The mark of a workload corral suspended, or None when it carries none. A mark
    that cannot be read still says corral suspended it (only corral writes the key):
    it comes back with no time, and is resumed at once."""
    raw = w.annotations.get(ANNOTATION_SUSPENDED_BY)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return Mark("", None, None)
    if not isinstance(doc, dict):
        return Mark("", None, None)
    try:
        at = parse_time(str(doc.get("at"))) if doc.get("at") else None
    except TimeFormatError:
        at = None
    pg = doc.get("podGroup")
    gang = doc.get("for")
    return Mark(
        str(doc.get("plan") or ""),
        at,
        gang if isinstance(gang, str) and gang else None,
        pg if isinstance(pg, dict) else None,
    )


@dataclass(frozen=True, slots=True)
class Resumption:
    """One workload corral suspended, and what to do now: ``resume`` it (making its
    PodGroup again first), ``forget`` the mark of one resumed by someone else, or
    ``heal`` (still suspended and not due: remove the PodGroup a crash left behind)."""

    workload: WorkloadRecord
    mark: Mark
    action: Literal["resume", "forget", "heal"]
    reason: str


def _podgroup_key(mark: Mark) -> str | None:
    pg = mark.podgroup
    meta = pg.get("metadata") if pg else None
    if not isinstance(meta, dict) or not meta.get("name"):
        return None
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def _has_pods(state: ClusterState, w: WorkloadRecord) -> bool:
    """Whether pods the workload owns (directly or through its child workloads) remain."""
    owners = Owners(state.workloads, state.kinds)
    for p in state.snapshot.pods:
        if p.namespace != w.namespace:
            continue
        top, _ = owners.top_of_pod(p)
        if top is not None and top.key == w.key:
            return True
    return False


def due_resumptions(state: ClusterState, config: DeschedulerConfig) -> list[Resumption]:
    """What to do about every workload corral suspended, oldest first."""
    views = build_views(state, config.queue_default)
    out: list[Resumption] = []
    after = config.moves.resume_after
    for w in state.workloads.values():
        mark = read_mark(w)
        if mark is None:
            continue
        if not w.suspended:
            out.append(Resumption(w, mark, "forget", f"{w.describe()} was resumed by someone else"))
            continue
        reason = None
        gang = views.get(mark.for_gang) if mark.for_gang else None
        if mark.at is None:
            reason = "its corral.dev/suspended-by mark cannot be read"
        elif mark.for_gang is not None and gang is None:
            reason = f"gang {mark.for_gang}, which it made room for, is gone"
        elif (
            gang is not None
            and gang.min_available > 0
            and (len(gang.running) >= gang.min_available)
        ):
            reason = f"gang {mark.for_gang}, which it made room for, is bound"
        elif (state.now - mark.at).total_seconds() >= after:
            reason = (
                f"suspended {format_duration((state.now - mark.at).total_seconds())} ago "
                f"(moves.resume_after {format_duration(after)})"
            )
        elif mark.for_gang is None and not _has_pods(state, w):
            reason = "its pods are gone (a defragmenting move: it starts again at once)"
        if reason is not None:
            out.append(Resumption(w, mark, "resume", reason))
            continue
        key = _podgroup_key(mark)
        if key is not None and key in state.podgroups:
            out.append(
                Resumption(w, mark, "heal", f"PodGroup {key} of suspended {w.describe()} remains")
            )
    out.sort(key=lambda r: (r.mark.at or state.now, r.workload.key))
    return out
