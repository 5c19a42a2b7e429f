"""Moves tried on the snapshot with the engine: remove a victim's pods, place the
waiting gang, place every victim again (all-or-nothing, with the scheduler's scoring),
and keep or revert the lot."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt
from gangplace.engine import GangPlacement, PodRecord, Snapshot, place_gang

from descheduler.planning.context import PlanContext, Victim
from descheduler.planning.gang_demand import Demand, gang_of_pods, role_pods

__all__ = [
    "Trial",
    "evaluate_waiting",
    "freed",
    "place_again",
    "remove_pods",
    "try_move",
]

IntArray = npt.NDArray[np.int64]


def remove_pods(snap: Snapshot, pods: Sequence[PodRecord]) -> None:
    for p in pods:
        if p.node >= 0:
            snap.remove(p)


def place_again(ctx: PlanContext, victims: Sequence[Victim]) -> Victim | None:
    """Place each victim's pods again, whole, binding the pods where the engine puts
    them (largest first, as a scheduler serves big gangs best that way). Returns the
    first victim that fits nowhere, having placed the ones before it; None when all fit."""
    snap = ctx.snap
    opts = replace(ctx.options, dry_run=True, best_effort=False)
    for v in sorted(victims, key=lambda v: (-v.gpu_milli, -len(v.pods), v.view.key)):
        res = place_gang(snap, gang_of_pods(v.view.key, v.pods), ctx.scorer, opts)
        if not res.ok:
            return v
        _bind(snap, v.pods, res)
    return None


def _bind(snap: Snapshot, pods: Sequence[PodRecord], res: GangPlacement) -> None:
    by_role = role_pods(pods)
    for a in res.assignments:
        pod = by_role[a.role][a.index]
        snap.place(pod.shape, a.node, a.gpus, pod=pod)


@dataclass(slots=True)
class Trial:
    """An open what-if: the caller must :meth:`keep` or :meth:`drop` it."""

    snap: Snapshot
    token: int
    placement: GangPlacement | None = None
    targets: dict[int, tuple[str, tuple[int, ...]]] = field(default_factory=dict)

    def keep(self) -> None:
        self.snap.commit(self.token)

    def drop(self) -> None:
        self.snap.revert(self.token)


def try_move(
    ctx: PlanContext, victims: Sequence[Victim], demand: Demand | None
) -> tuple[Trial | None, Victim | None, str]:
    """Evict ``victims``, start ``demand`` (if given), then place every victim again.

    Returns ``(trial, None, "")`` on success (an open trial), or ``(None, victim, why)``
    with the victim that could not be placed again (None when the demand itself did
    not fit). The snapshot is unchanged on failure.
    """
    snap = ctx.snap
    token = snap.fork()
    try:
        for v in victims:
            remove_pods(snap, v.pods)
        placement = None
        if demand is not None:
            placement = place_gang(snap, demand.gang, ctx.scorer, ctx.options)
            if not placement.ok:
                snap.revert(token)
                return None, None, placement.reason
        failed = place_again(ctx, victims)
        if failed is not None:
            snap.revert(token)
            return None, failed, f"{failed.view.describe()} would fit nowhere else"
    except BaseException:
        snap.revert(token)
        raise
    targets = {
        id(p): (snap.node_names[p.node], p.gpus) for v in victims for p in v.pods if p.node >= 0
    }
    return Trial(snap, token, placement, targets), None, ""


def evaluate_waiting(ctx: PlanContext, demands: Sequence[Demand]) -> tuple[list[str], list[str]]:
    """Which waiting gangs start and which cannot, served one by one in the given (DRF)
    order on the current snapshot, which is left unchanged."""
    snap = ctx.snap
    started: list[str] = []
    blocked: list[str] = []
    with snap.what_if():
        for d in demands:
            res = place_gang(snap, d.gang, ctx.scorer, ctx.options)
            (started if res.ok else blocked).append(d.key)
    return started, blocked


@contextmanager
def freed(snap: Snapshot, used_delta: IntArray, gpu_delta: IntArray) -> Iterator[None]:
    """The snapshot as if some pods were gone (their requests in ``used_delta``, their
    devices' thousandths in ``gpu_delta``), for vectorised shortlists only: the engine's
    feasibility functions read these arrays. Restored on exit."""
    used, gpu_free = snap.used, snap.gpu_free
    snap.used = used - used_delta
    snap.gpu_free = gpu_free + gpu_delta
    try:
        yield
    finally:
        snap.used, snap.gpu_free = used, gpu_free
