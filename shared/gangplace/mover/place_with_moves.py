"""The mover: room for pods that fit nowhere, made with the fewest moves the exact
neighbourhood model finds, within the rules of whoever asks.

The trace replay's moves on failure (:class:`~gangplace.sim.limit.MovesHook`) and the
descheduler's planner (where its own search finds no move) both come here, so the
product plans with the same moves the replay measures. The caller says which pods move
together and which may move at all (:class:`MoveRules`; the planner passes its safety
rules: whole gangs, priority, move method, protection), and whether a set of moved pods
stays within its limits and disruption budgets; the mover never decides that itself.

Pods are placed one after another, each by
:func:`~gangplace.mover.hood_moves.fit_in_neighbourhood` (no move when it fits as things
stand): all of them or none, and the moves of all of them together must pass the
caller's check. The solver is limited in branch-and-bound nodes, never in seconds: the
same request gives the same room on a busy machine and a quiet one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.snapshot import Snapshot
from gangplace.mover.hood_moves import DEFAULT_NODE_LIMIT, DEFAULT_SIZES, HoodStats, Movable, UnitOf
from gangplace.mover.hood_moves import fit_in_neighbourhood as _fit

__all__ = ["MoveRules", "MoverLimits", "RoomFound", "place_with_moves"]

# Why a set of moved pods may not move together (None: it may).
Allows = Callable[[Sequence[PodRecord]], "str | None"]


@dataclass(frozen=True, slots=True)
class MoverLimits:
    """How hard the mover tries: at most ``max_pods`` pods moved for one pod placed,
    neighbourhoods of ``sizes`` nodes, ``node_limit`` branch-and-bound nodes a solve."""

    max_pods: int = 8
    sizes: tuple[int, ...] = DEFAULT_SIZES
    node_limit: int = DEFAULT_NODE_LIMIT

    def __post_init__(self) -> None:
        if self.max_pods < 0:
            raise ValueError(f"max_pods {self.max_pods}: must be >= 0")
        if self.node_limit < 1:
            raise ValueError(f"node_limit {self.node_limit}: must be >= 1")
        if not self.sizes or min(self.sizes) < 1:
            raise ValueError(f"sizes {self.sizes}: expected node counts >= 1")


@dataclass(frozen=True, slots=True)
class MoveRules:
    """The caller's rules. ``unit_of``: pods that move together (default: each alone; a
    unit moves whole or not at all). ``movable``: pods that may move. ``allows``: why
    the pods moved so far may not all move (a limit, a disruption budget), or None."""

    unit_of: UnitOf | None = None
    movable: Movable | None = None
    allows: Allows | None = None


@dataclass(slots=True)
class RoomFound:
    """What the mover did: ``placed`` are the new pods, where they landed; ``moved``
    the pods already running that changed node or GPU, each once, in the order moved."""

    placed: list[PodRecord]
    moved: list[PodRecord] = field(default_factory=list)


def place_with_moves(
    snap: Snapshot,
    pods: Sequence[PodRecord],
    rules: MoveRules | None = None,
    limits: MoverLimits | None = None,
    *,
    max_total: int | None = None,
    stats: HoodStats | None = None,
) -> RoomFound | None:
    """Place every pod of ``pods`` (unbound records: a waiting gang's members, or one
    arrival), moving at most ``max_total`` running pods in all; None, with ``snap``
    unchanged, when the mover finds no way that the rules allow. On success the pods
    are bound and the moves made on ``snap``."""
    r = rules or MoveRules()
    lim = limits or MoverLimits()
    own = {id(p) for p in pods}
    base = r.movable or (lambda p: True)

    def movable(p: PodRecord) -> bool:  # the pods being placed stay where they land
        return id(p) not in own and base(p)

    token = snap.fork()
    moved: dict[int, PodRecord] = {}
    try:
        for p in pods:
            left = lim.max_pods if max_total is None else min(lim.max_pods, max_total - len(moved))
            rep = _fit(
                snap,
                p.shape,
                p,
                max_pods=max(left, 0),
                sizes=lim.sizes,
                node_limit=lim.node_limit,
                unit_of=r.unit_of,
                movable=movable,
                stats=stats,
            )
            if rep is None:
                snap.revert(token)
                return None
            for q in rep.moved:
                moved.setdefault(id(q), q)
            if max_total is not None and len(moved) > max_total:
                snap.revert(token)
                return None
        if r.allows is not None and moved and r.allows(list(moved.values())) is not None:
            snap.revert(token)
            return None
    except BaseException:
        snap.revert(token)
        raise
    snap.commit(token)
    return RoomFound(placed=list(pods), moved=list(moved.values()))
