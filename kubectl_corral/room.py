"""Why a gang that cannot start waits when GPUs are idle: the idle GPUs its members may
use are scattered in pieces smaller than a member (the engine's fragmentation for the
member's shape), and what the descheduler's plan -- the one ``kubectl corral frag
--plan`` prints -- would move to make room for it, or why it would move nothing."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from gangplace.engine import Gang, PodShape, Snapshot
from gangplace.engine.feasibility import fits, gpu_capacity, static_mask
from gangplace.engine.fragmentation import TargetWorkload, TaskShape, node_fragmentation

from descheduler.api import Move, Plan

__all__ = ["PlanForGang", "Scattered", "room_for", "scattered_gpus"]


def _gpus(x: float) -> str:
    return f"{x:g} GPU" + ("" if x == 1 else "s")


def _member_need(shape: PodShape) -> str:
    if shape.gpu_milli >= 1000:
        return _gpus(shape.gpu_count)
    return f"{shape.gpu_milli}m of one GPU"


@dataclass(frozen=True, slots=True)
class Scattered:
    """Idle GPUs on the nodes a member may use (model, selectors, taints, CPU and
    memory all allow it), enough in all for the gang, but in pieces too small."""

    idle: float  # idle GPUs on those nodes
    needed: float  # GPUs the members the gang still needs ask for
    member: str  # what one member asks for ("4 GPUs")
    largest_piece: float  # the most idle GPUs on one of those nodes
    room: int  # members of that size the GPUs of those nodes could take now
    required: int  # members the gang needs
    unusable: float  # of ``idle``, what a member cannot use where it lies (FGD, its shape)
    nodes: list[tuple[str, float]]  # (node, idle GPUs), most idle first

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["nodes"] = [{"node": n, "idle": g} for n, g in self.nodes]
        return out

    def describe(self, shown: int = 6) -> tuple[str, str]:
        """The finding, and where the idle GPUs are (a long list cut with a count)."""
        nodes = f"{len(self.nodes)} node" + ("" if len(self.nodes) == 1 else "s")
        head = (
            f"{_gpus(self.idle)} idle on {nodes} its members may use, enough for the "
            f"{_gpus(self.needed)} it needs, but scattered: at most {self.largest_piece:g} on "
            f"one node, where a member needs {self.member}"
        )
        if self.room:
            head += f": room for {self.room} of the {self.required} members it needs"
        where = ", ".join(f"{n} {g:g}" for n, g in self.nodes[:shown])
        if len(self.nodes) > shown:
            where += f" and {len(self.nodes) - shown} more node(s)"
        return head, where


def scattered_gpus(snap: Snapshot, gang: Gang) -> Scattered | None:
    """The idle GPUs ``gang``'s largest GPU member may use, when there are enough of
    them in all for the members the gang needs yet they lie in pieces too small for
    enough members; None otherwise (too few idle GPUs, none the members may use, or
    room enough by GPUs: then something else keeps the gang out). Call it for a gang
    that does not fit."""
    gpu_roles = [r for r in gang.roles if r.shape.is_gpu and r.count > 0]
    if not gpu_roles:
        return None
    shape = max(gpu_roles, key=lambda r: r.shape.gpu_demand_milli).shape
    demands = sorted(r.shape.gpu_demand_milli for r in gang.roles for _ in range(r.count))
    needed = sum(demands[: gang.required]) / 1000.0
    # Nodes the member may go to but for its GPUs: the engine's own filters, for the
    # shape and for the shape without its GPU devices (CPU, memory, pods).
    cpu_only = replace(shape, gpu_count=0, gpu_milli=0, gpu_resource=None, gpu_models=())
    may = static_mask(snap, shape) & fits(snap, cpu_only)
    where = np.flatnonzero(may & (snap.gpu_total > 0))
    if where.size == 0:
        return None
    free = np.maximum(snap.gpu_free[where], 0)
    idle = free.sum(axis=1) / 1000.0
    if float(idle.sum()) < needed:
        return None
    # Members of the largest shape the GPUs of those nodes could take: fewer than the
    # gang needs, though the GPUs would be enough in all, is what scattered means.
    room = int(gpu_capacity(snap, shape, where).sum())
    if room >= gang.required:
        return None
    member = TargetWorkload.of([(TaskShape.of(shape), 1.0)])
    unusable = node_fragmentation(snap, member, where) / 1000.0
    order = sorted(
        (i for i in range(where.size) if idle[i] > 0),
        key=lambda i: (-idle[i], snap.node_names[int(where[i])]),
    )
    return Scattered(
        idle=round(float(idle.sum()), 3),
        needed=needed,
        member=_member_need(shape),
        room=room,
        required=gang.required,
        largest_piece=round(float(idle.max()), 3),
        unusable=round(float(unusable.sum()), 3),
        nodes=[(snap.node_names[int(where[i])], round(float(idle[i]), 3)) for i in order],
    )


@dataclass(slots=True)
class PlanForGang:
    """What the descheduler's plan does for one waiting gang."""

    gang: str
    moves: list[Move] = field(default_factory=list)
    starts_after: bool = False  # the gang starts once the plan's moves are made
    reason: str = ""  # why the plan moves nothing for it

    def to_dict(self) -> dict[str, Any]:
        return {
            "gang": self.gang,
            "moves": [m.to_dict() for m in self.moves],
            "starts_after": self.starts_after,
            "reason": self.reason,
        }

    def describe(self) -> tuple[str, list[str]]:
        """A sentence, then one line per move."""
        if not self.moves:
            if self.starts_after:
                return (
                    "kubectl corral frag --plan moves nothing for it, yet it starts after "
                    "the plan's moves"
                ), []
            return f"kubectl corral frag --plan would move nothing for it: {self.reason}", []
        gpus = sum(m.gpus for m in self.moves)
        then = "then it starts" if self.starts_after else "and it would still not start"
        head = (
            f"kubectl corral frag --plan would move {len(self.moves)} unit(s) for it, "
            f"{_gpus(gpus)} disrupted; {then}:"
        )
        return head, [_move_line(m) for m in self.moves]


def _move_line(m: Move) -> str:
    if m.gang is None and m.method == "evict":  # one pod: where it goes is all to say
        p = m.pods[0]
        return f"{m.method} pod {m.namespace}/{p.name}: {p.node} -> {p.target or '(waits)'}"
    what = ", ".join(m.workload_names()) if m.method == "suspend" else f"gang {m.unit}"
    pods = ", ".join(f"{p.name} {p.node} -> {p.target or '(waits)'}" for p in m.pods[:4])
    if len(m.pods) > 4:
        pods += f" and {len(m.pods) - 4} more pod(s)"
    return f"{m.method} {what}: {pods}"


def room_for(result: Plan, key: str) -> PlanForGang:
    """The moves of ``result`` (the plan ``frag --plan`` makes) that make room for the
    waiting gang ``key``, whether it starts after the plan, or why the plan does
    nothing for it (its own words: the unserved reason, a note that names it)."""
    room = PlanForGang(key)
    room.moves = [m for m in result.moves if m.for_gang == key]
    room.starts_after = key not in result.waiting_after
    if room.moves or room.starts_after:
        return room
    unserved = next((u.reason for u in result.unserved if u.gang == key), None)
    note = next((n for n in result.notes if key in n), None)
    room.reason = unserved or note or "the plan finds no moves that let it start"
    return room
