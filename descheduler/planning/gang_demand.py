"""What a waiting gang still needs to start (its :class:`Demand`), and the engine gang
that stands for a set of pods when the planner places them on the simulated cluster.

Requests are summed in the units queue shares use (``gpu`` in thousandths of a GPU).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gangplace.engine import Gang, PodRecord, PodShape, TaskRole
from gangplace.engine.objects import PodGroupRecord

from descheduler.planning.gang_views import GangView
from descheduler.planning.state import GPU

__all__ = ["Demand", "demand_of", "gang_of_pods", "request_of", "role_pods"]


def request_of(shapes: Sequence[PodShape]) -> dict[str, int]:
    """Summed requests in the units queue shares use (``gpu`` in thousandths)."""
    out: dict[str, int] = {}
    for s in shapes:
        for r, v in s.requests:
            if r != "pods":
                out[r] = out.get(r, 0) + v
        if s.is_gpu:
            out[GPU] = out.get(GPU, 0) + s.gpu_demand_milli
    return out


def gang_of_pods(name: str, pods: Sequence[PodRecord], required: int | None = None) -> Gang:
    """An engine gang of these pods: one role per distinct shape, in first-seen order,
    so ``Assignment(role, index)`` names ``pods`` back (see :func:`role_pods`)."""
    roles: dict[PodShape, int] = {}
    for p in pods:
        roles[p.shape] = roles.get(p.shape, 0) + 1
    return Gang(
        name,
        tuple(TaskRole(f"r{i}", s, n) for i, (s, n) in enumerate(roles.items())),
        required,
    )


def role_pods(pods: Sequence[PodRecord]) -> dict[str, list[PodRecord]]:
    """The pods behind each role of :func:`gang_of_pods`, in index order."""
    order: dict[PodShape, list[PodRecord]] = {}
    for p in pods:
        order.setdefault(p.shape, []).append(p)
    return {f"r{i}": ps for i, ps in enumerate(order.values())}


@dataclass(slots=True)
class Demand:
    """A gang that waits: ``gang`` holds the members it still needs to start
    (``gang.required`` of them). ``estimated``: no pods exist yet, the shapes come from
    the PodGroup's minResources."""

    view: GangView
    gang: Gang
    request: dict[str, int]
    estimated: bool = False

    @property
    def key(self) -> str:
        return self.view.key

    def describe(self) -> str:
        parts = Counter[str]()
        for r in self.gang.roles:
            parts[r.shape.describe()] += r.count
        shapes = ", ".join(f"{n} x {s}" for s, n in parts.items())
        return f"{self.gang.required} of {self.gang.size} pods ({shapes})"


def _estimated_shape(pg: PodGroupRecord, min_resources: Mapping[str, int]) -> PodShape | None:
    n = pg.min_member
    if n <= 0 or not min_resources:
        return None
    req = {r: -(-v // n) for r, v in min_resources.items() if r != GPU}
    gpu_milli = min_resources.get(GPU, 0)
    per = -(-gpu_milli // n)
    if per >= 1000:
        return PodShape.of(req, gpus=-(-per // 1000))
    if per > 0:
        return PodShape.of(req, gpus=1, gpu_milli=per)
    return PodShape.of(req)


def demand_of(view: GangView, *, whole: bool = False) -> Demand | None:
    """What ``view`` still needs to start, or None when it is not waiting. ``whole``:
    as if its running members were sent back (a released stale gang)."""
    if not view.is_gang:
        return None  # a pending pod without gang keys is the scheduler's business alone
    running = 0 if whole else len(view.running)
    required = view.min_available - running
    waiting_pods = view.pods if whole else view.pending
    if required <= 0:
        return None
    if waiting_pods:
        pods = list(waiting_pods)
        shapes = [p.shape for p in pods]
        if len(pods) < required:
            # Members not created yet are assumed to look like their most common sibling.
            common = Counter(shapes).most_common(1)[0][0]
            shapes += [common] * (required - len(pods))
        gang = _gang_of_shapes(view.key, shapes, required)
        return Demand(view, gang, request_of(shapes[:required]))
    pg = view.podgroup
    if pg is None or not pg.waiting:
        return None
    shape = _estimated_shape(pg, view.min_resources)
    if shape is None:
        return None
    gang = Gang.uniform(view.key, shape, required, required)
    return Demand(view, gang, request_of([shape] * required), estimated=True)


def _gang_of_shapes(name: str, shapes: Sequence[PodShape], required: int) -> Gang:
    roles: dict[PodShape, int] = {}
    for s in shapes:
        roles[s] = roles.get(s, 0) + 1
    return Gang(
        name,
        tuple(TaskRole(f"r{i}", s, n) for i, (s, n) in enumerate(roles.items())),
        min(required, len(shapes)),
    )
