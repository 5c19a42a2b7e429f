"""Which suspensions corral made are due to end, and what to heal (pure).

corral marks each workload it suspends with ``corral.dev/suspended-by`` (JSON: the
plan, the time, the gang it made room for, and the PodGroup it removed). A workload is
resumed once that gang is bound (as many members running as it needs), once the gang
is gone, or after ``moves.resume_after``, whichever comes first. A workload suspended
for a capacity room (its mark says until when the room is held) is resumed when its gang
is bound or gone, or when the hold ends -- not after ``moves.resume_after`` -- and
before every other workload: what was suspended for a room comes back first. While a
hold lasts, no workload of lower priority than the held gang is resumed (it could take
the room); the hold's end bounds the wait. Only workloads that
carry the mark are ever resumed: one suspended by a person, Kueue or another controller
is left as it is. A run that crashed between a suspend and its resume is healed by the
next run: the mark is on the workload, not in the process.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from gangplace.engine.owners import ANNOTATION_SUSPENDED_BY, WorkloadRecord
from gangplace.engine.timeparse import TimeFormatError, format_duration, format_time, parse_time

from descheduler.config import DeschedulerConfig
from descheduler.planning.gang_demand import Demand
from descheduler.planning.gang_views import GangView, build_views
from descheduler.planning.move_method import Owners
from descheduler.planning.state import ClusterState

__all__ = [
    "Mark",
    "Resumption",
    "due_resumptions",
    "held_first",
    "held_rooms",
    "mark_text",
    "read_mark",
]


@dataclass(frozen=True, slots=True)
class Mark:
    """What ``corral.dev/suspended-by`` says. ``podgroup``: the PodGroup corral removed
    when it suspended the workload (made again on resume), trimmed to what creating it
    needs; None when it removed none or the mark is on another workload of the gang."""

    plan: str
    at: datetime | None
    for_gang: str | None
    podgroup: Mapping[str, Any] | None = None
    # the workload's priority when it was suspended (None: a mark that does not say)
    priority: int | None = None
    # capacity room: when the room held for ``for_gang`` is released (None: not held)
    until: datetime | None = None
    # capacity_room.nominate: pod name -> node, the nominations corral holds the room with
    nominate: Mapping[str, str] = field(default_factory=dict)


def mark_text(
    plan: str,
    at: datetime,
    for_gang: str | None,
    podgroup: Mapping[str, Any] | None,
    *,
    priority: int | None = None,
    until: datetime | None = None,
    nominate: Mapping[str, str] | None = None,
) -> str:
    doc: dict[str, Any] = {"plan": plan, "at": format_time(at), "for": for_gang}
    if podgroup is not None:
        doc["podGroup"] = podgroup
    if priority is not None:
        doc["priority"] = priority
    if until is not None:
        doc["holdUntil"] = format_time(until)
    if nominate:
        doc["nominate"] = dict(nominate)
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
    try:
        # a hold that cannot be read ends at once: the workload is never kept by mistake
        until = parse_time(str(doc["holdUntil"])) if "holdUntil" in doc else None
    except TimeFormatError:
        until = at
    pg = doc.get("podGroup")
    gang = doc.get("for")
    prio = doc.get("priority")
    raw_nom = doc.get("nominate")
    nominate = (
        {str(k): v for k, v in raw_nom.items() if isinstance(v, str) and v}
        if isinstance(raw_nom, dict)
        else {}
    )
    return Mark(
        str(doc.get("plan") or ""),
        at,
        gang if isinstance(gang, str) and gang else None,
        pg if isinstance(pg, dict) else None,
        prio if isinstance(prio, int) and not isinstance(prio, bool) else None,
        until if at is not None else None,
        nominate,
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


def held_rooms(
    state: ClusterState, views: Mapping[str, GangView]
) -> dict[str, tuple[int, datetime]]:
    """The rooms held now: the waiting gang's key -> its priority and when the hold
    ends. A hold lasts while a workload suspended for it is still suspended, its gang
    waits (neither bound nor gone) and its time has not passed."""
    out: dict[str, tuple[int, datetime]] = {}
    for w in state.workloads.values():
        mark = read_mark(w)
        if mark is None or not w.suspended or mark.until is None or mark.for_gang is None:
            continue
        gang = views.get(mark.for_gang)
        if gang is None or _bound(gang) or state.now >= mark.until:
            continue
        _, end = out.get(gang.key, (0, mark.until))
        out[gang.key] = (gang.priority, max(end, mark.until))
    return out


def held_first(
    demands: Sequence[Demand], holds: Mapping[str, tuple[int, datetime]]
) -> list[Demand]:
    """The waiting gangs in the order the planner serves them: each gang whose room is
    held (``holds``, :func:`held_rooms`) moved ahead of the gangs before it that are
    not held and of its priority or lower, so that the planner counts the held room as
    its own and gives it to no such gang while the hold lasts. A gang of higher priority
    keeps its place, and a held gang never goes behind where it was."""
    out = list(demands)
    for i in range(len(out)):
        if out[i].key not in holds:
            continue
        mine = holds[out[i].key][0]
        j = i
        while j > 0 and out[j - 1].key not in holds and out[j - 1].view.priority <= mine:
            out[j - 1], out[j] = out[j], out[j - 1]
            j -= 1
    return out


def _bound(gang: GangView) -> bool:
    return gang.min_available > 0 and len(gang.running) >= gang.min_available


def _due(
    state: ClusterState,
    config: DeschedulerConfig,
    w: WorkloadRecord,
    mark: Mark,
    gang: GangView | None,
) -> str | None:
    """Why the suspension ``mark`` tells of ends now, or None."""
    if mark.at is None:
        return "its corral.dev/suspended-by mark cannot be read"
    if mark.for_gang is not None and gang is None:
        return f"gang {mark.for_gang}, which it made room for, is gone"
    if gang is not None and _bound(gang):
        return f"gang {mark.for_gang}, which it made room for, is bound"
    ago = format_duration((state.now - mark.at).total_seconds())
    if mark.until is not None:
        if state.now >= mark.until:
            return (
                f"the room held for gang {mark.for_gang} since {ago} ago was released at "
                f"{format_time(mark.until)} (capacity_room.hold_for): it is not bound"
            )
        return None
    after = config.moves.resume_after
    if (state.now - mark.at).total_seconds() >= after:
        return f"suspended {ago} ago (moves.resume_after {format_duration(after)})"
    if mark.for_gang is None and not _has_pods(state, w):
        return "its pods are gone (a defragmenting move: it starts again at once)"
    return None


def due_resumptions(state: ClusterState, config: DeschedulerConfig) -> list[Resumption]:
    """What to do about every workload corral suspended: what was suspended for a
    capacity room first, then oldest first."""
    views = build_views(state, config.queue_default)
    holds = held_rooms(state, views)
    out: list[Resumption] = []
    for w in state.workloads.values():
        mark = read_mark(w)
        if mark is None:
            continue
        if not w.suspended:
            out.append(Resumption(w, mark, "forget", f"{w.describe()} was resumed by someone else"))
            continue
        gang = views.get(mark.for_gang) if mark.for_gang else None
        reason = _due(state, config, w, mark, gang)
        low = mark.priority
        if reason is not None and mark.at is not None and low is not None:
            # a room held for a gang of higher priority is not given to this workload
            reason = None if any(p > low for p, _ in holds.values()) else reason
        if reason is not None:
            out.append(Resumption(w, mark, "resume", reason))
            continue
        key = _podgroup_key(mark)
        if key is not None and key in state.podgroups:
            out.append(
                Resumption(w, mark, "heal", f"PodGroup {key} of suspended {w.describe()} remains")
            )
    out.sort(key=lambda r: (r.mark.until is None, r.mark.at or state.now, r.workload.key))
    return out
