"""Gangs as the planner sees them: every pod in one *unit*, with who runs and who waits.

Every pod belongs to exactly one *unit*: its gang (read with the engine's one table of
gang keys, joined with the gang's PodGroup if the List has one, or with its group of the
native gang API), or, for a pod without gang keys, the pod alone. A unit is what the
planner moves: whole, or -- for a gang -- only the members above its minAvailable. A
native group whose disruption mode is ``all`` is moved whole or not at all, the groups
under one CompositePodGroup are one gang moved whole, and a group of the ``basic``
policy is no gang: its pods are lone pods. What a waiting unit still needs to start is
worked out from its view in :mod:`descheduler.planning.gang_demand`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from gangplace.engine import PodRecord
from gangplace.engine.membership import (
    ANNOTATION_GANG_TIMEOUT,
    ANNOTATION_QUEUE,
    VOLCANO_QUEUE_NAME,
    VOLCANO_SLA_WAITING_TIME,
    GangMembers,
    group_pods,
)
from gangplace.engine.native_groups import NativeGroupRecord
from gangplace.engine.objects import PodGroupRecord
from gangplace.engine.timeparse import TimeFormatError, parse_duration, parse_time

from descheduler.planning.state import (
    ANNOTATION_LAST_MOVED,
    ANNOTATION_ROOM_MADE,
    ClusterState,
    MoveLedger,
    drf_resources,
)

__all__ = ["GangView", "build_views", "cooldown_key"]


def _time(text: str) -> datetime | None:
    try:
        return parse_time(text) if text else None
    except TimeFormatError:
        return None


@dataclass(slots=True)
class GangView:
    """One unit. ``pods`` are its live pods in the snapshot, bound or not; ``bound``
    counts those the API shows on a node (also nodes missing from the List)."""

    key: str
    namespace: str
    name: str
    is_gang: bool
    pods: list[PodRecord]
    min_available: int
    queue: str
    priority: int = 0
    created: datetime | None = None
    podgroup: PodGroupRecord | None = None
    timeout: float | None = None
    last_moved: datetime | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    room_made: datetime | None = None  # when a run last started making room for it
    # The PodGroup's minResources in the units queue shares use (``gpu`` in thousandths).
    min_resources: Mapping[str, int] = field(default_factory=dict)
    # Its groups of the native gang API, when its pods name one and the group was read
    # (several: the PodGroups under one CompositePodGroup, which are one gang).
    native: tuple[NativeGroupRecord, ...] = ()
    # Disrupted only all together (a native group's ``disruptionMode: {all: {}}``, or a
    # CompositePodGroup): no member moves without the rest.
    whole: bool = False

    @property
    def gang_name(self) -> str | None:
        return self.name if self.is_gang else None

    @property
    def running(self) -> list[PodRecord]:
        return [p for p in self.pods if p.node_name]

    @property
    def placed(self) -> list[PodRecord]:
        """Members bound to a node of the snapshot: the ones that can be moved."""
        return [p for p in self.pods if p.node >= 0]

    @property
    def pending(self) -> list[PodRecord]:
        return [p for p in self.pods if not p.node_name]

    @property
    def extras(self) -> int:
        """Running members above minAvailable: the most that may move without the rest
        (none for a gang moved only whole)."""
        if self.whole:
            return 0
        return max(0, len(self.running) - self.min_available)

    def describe(self) -> str:
        return f"gang {self.key}" if self.is_gang else f"pod {self.namespace}/{self.name}"


def _pod_queue(p: PodRecord) -> str | None:
    return p.annotations.get(VOLCANO_QUEUE_NAME) or p.annotations.get(ANNOTATION_QUEUE)


def _timeout(pg: PodGroupRecord | None, pods: Sequence[PodRecord]) -> float | None:
    if pg is not None and pg.timeout is not None:
        return pg.timeout
    for p in pods:
        for key in (ANNOTATION_GANG_TIMEOUT, VOLCANO_SLA_WAITING_TIME):
            raw = p.annotations.get(key)
            if raw:
                try:
                    return parse_duration(raw, numbers=False)
                except TimeFormatError:
                    continue  # the webhook refuses bad values; an old pod is not a reason to stop
    return None


def cooldown_key(namespace: str, gang: str | None, pod: PodRecord | None = None) -> str:
    """What the move ledger remembers a unit by: ``ns/gang`` for a gang; for a pod
    without one, its controller (``ns/owner:Kind/name``), which outlives the pod and
    makes its replacement; the pod itself (``ns/pod:name``) when it has none."""
    if gang is not None:
        return f"{namespace}/{gang}"
    assert pod is not None
    if pod.owner_kind and pod.owner_name:
        return f"{namespace}/owner:{pod.owner_kind}/{pod.owner_name}"
    return f"{namespace}/pod:{pod.name}"


def _latest(stamps: Sequence[str], also: datetime | None = None) -> datetime | None:
    times = [t for t in (_time(s) for s in stamps) if t is not None]
    if also is not None:
        times.append(also)
    return max(times) if times else None


def _last_moved(
    pg: PodGroupRecord | None, pods: Sequence[PodRecord], ledger: datetime | None = None
) -> datetime | None:
    key = ANNOTATION_LAST_MOVED
    stamps = [p.annotations[key] for p in pods if key in p.annotations]
    if pg is not None and key in pg.annotations:
        stamps.append(pg.annotations[key])
    return _latest(stamps, ledger)


def _room_made(pg: PodGroupRecord | None, ledger: MoveLedger, key: str) -> datetime | None:
    stamps = (
        [pg.annotations[ANNOTATION_ROOM_MADE]]
        if pg and ANNOTATION_ROOM_MADE in pg.annotations
        else []
    )
    return _latest(stamps, ledger.room_made.get(key))


def _native_priority(ng: NativeGroupRecord, classes: Mapping[str, int]) -> int:
    if ng.priority is not None:
        return ng.priority
    return classes.get(ng.priority_class, 0)


def _native_units(
    grouped: Mapping[str, GangMembers], groups: Mapping[str, NativeGroupRecord]
) -> dict[str, tuple[GangMembers, tuple[NativeGroupRecord, ...]]]:
    """The gangs of :func:`group_pods` with their native groups: the pods of a group of
    the basic policy left out (lone pods), and the groups under one CompositePodGroup
    joined into one gang named after it (its members start, and move, together)."""
    out: dict[str, tuple[GangMembers, tuple[NativeGroupRecord, ...]]] = {}
    for key, g in grouped.items():
        ng = (
            groups.get(f"{g.namespace}/{g.pods[0].native_group}")
            if g.dialect == "kubernetes"
            else None
        )
        if ng is None:
            out[key] = (g, ())
        elif ng.parent:
            joined = f"{g.namespace}/{ng.parent}"
            prev = out.get(joined)
            if prev is None:
                gm = GangMembers(g.namespace, ng.parent, g.dialect, list(g.pods))
                gm.queue, gm.timeout = g.queue, g.timeout
                out[joined] = (gm, (ng,))
            else:
                prev[0].pods.extend(g.pods)
                out[joined] = (prev[0], (*prev[1], ng))
        elif ng.min_count is not None:
            out[key] = (g, (ng,))
    return out


def build_views(state: ClusterState, default_queue: str) -> dict[str, GangView]:
    """Every unit of the cluster, by key: ``ns/gang`` for gangs (PodGroups without pods
    too), ``ns/pod:name`` for a pod without gang keys (``:`` cannot occur in names)."""
    snap = state.snapshot
    ledger = state.ledger
    views: dict[str, GangView] = {}
    grouped = group_pods(snap.pods)
    in_gang: set[int] = set()
    for key, (g, ngs) in _native_units(grouped, state.native_groups).items():
        pg = state.podgroups.get(key) if not ngs else None
        pods = sorted(g.pods, key=lambda p: p.name)
        in_gang.update(id(p) for p in pods)
        if ngs:
            min_av = sum(n.min_count or 0 for n in ngs)
        elif pg is not None:
            min_av = pg.min_member
        elif g.min_available is not None:
            min_av = g.min_available
        else:
            min_av = len(pods)
        prio = max((p.priority for p in pods), default=0)
        if pg is not None and pg.priority_class in state.priority_classes:
            prio = max(prio, state.priority_classes[pg.priority_class])
        annotations = dict(pg.annotations) if pg is not None else {}
        for n in ngs:
            prio = max(prio, _native_priority(n, state.priority_classes))
            annotations.update(n.annotations)
        created = [t for t in (_time(p.created) for p in pods) if t is not None]
        created += [n.created for n in ngs if n.created is not None]
        views[key] = GangView(
            key=key,
            namespace=g.namespace,
            name=g.name,
            is_gang=True,
            pods=pods,
            min_available=max(min_av, 0),
            queue=(pg.queue if pg is not None and pg.queue else None) or g.queue or default_queue,
            priority=prio,
            created=(pg.created if pg is not None and pg.created else None)
            or (min(created) if created else None),
            podgroup=pg,
            timeout=_timeout(pg, pods),
            last_moved=_last_moved(pg, pods, ledger.last_moved.get(key)),
            annotations=annotations,
            room_made=_room_made(pg, ledger, key),
            min_resources=drf_resources(pg.min_resources, snap.config) if pg is not None else {},
            native=ngs,
            whole=any(n.whole or n.parent for n in ngs),
        )
    for key, pg in state.podgroups.items():
        if key not in views:
            views[key] = GangView(
                key=key,
                namespace=pg.namespace,
                name=pg.name,
                is_gang=True,
                pods=[],
                min_available=pg.min_member,
                queue=pg.queue or default_queue,
                priority=state.priority_classes.get(pg.priority_class, 0),
                created=pg.created,
                podgroup=pg,
                timeout=pg.timeout,
                last_moved=_last_moved(pg, (), ledger.last_moved.get(key)),
                annotations=dict(pg.annotations),
                room_made=_room_made(pg, ledger, key),
                min_resources=drf_resources(pg.min_resources, snap.config),
            )
    for p in snap.pods:
        if id(p) in in_gang:
            continue
        key = f"{p.namespace}/pod:{p.name}"
        views[key] = GangView(
            key=key,
            namespace=p.namespace,
            name=p.name,
            is_gang=False,
            pods=[p],
            min_available=1,
            queue=_pod_queue(p) or default_queue,
            priority=p.priority,
            created=_time(p.created),
            last_moved=_last_moved(
                None, (p,), ledger.last_moved.get(cooldown_key(p.namespace, None, p))
            ),
        )
    return views
