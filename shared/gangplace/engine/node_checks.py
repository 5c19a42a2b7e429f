"""Nodes whose pods do not add up: the one rule that says which, for every reader.

A real node can hold more than its allocatable: a static pod the kubelet starts
without the scheduler, a device plugin that reported more GPUs than it now does, a
kubelet restarted with a larger reservation, a pod bound by hand. The engine's arrays
of such a node are not a packing (free below zero, a GPU held twice), and no move on
it can be proved, so the node is *left out of moves*: it is still measured
(fragmentation, idle GPUs), but no pod is moved off it or placed onto it
(:func:`gangplace.engine.feasibility.static_mask` filters it out, the descheduler keeps
its pods in place). Each such node gets one line saying what is wrong.

Pure: it reads the snapshot's arrays and pods, changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.quantity import format_quantity
from gangplace.engine.settings import EngineConfig

__all__ = ["LEFT_OUT", "NodeArrays", "node_problems"]

# How every line about such a node ends.
LEFT_OUT = "left out of moves"


class NodeArrays(Protocol):
    """What the check reads of a snapshot (:class:`~gangplace.engine.snapshot.Snapshot`,
    which runs it while it is built): the per-node arrays, the pods and the config."""

    @property
    def used(self) -> npt.NDArray[np.int64]: ...

    @property
    def alloc(self) -> npt.NDArray[np.int64]: ...

    @property
    def resources(self) -> list[str]: ...

    @property
    def config(self) -> EngineConfig: ...

    @property
    def n_nodes(self) -> int: ...

    @property
    def pods(self) -> Sequence[PodRecord]: ...

    @property
    def gpu_total(self) -> npt.NDArray[np.int64]: ...

    @property
    def gpu_free(self) -> npt.NDArray[np.int64]: ...


def _gpus(milli: int) -> str:
    """Thousandths of a GPU as GPUs: ``9``, ``1.5``, ``0.25``."""
    text = f"{milli / 1000:.3f}".rstrip("0").rstrip(".")
    return f"{text} GPU" if text == "1" else f"{text} GPUs"


def node_problems(snap: NodeArrays) -> dict[int, str]:
    """By node row, what makes the node's pods not add up (``pods request 70 cpu of 64
    allocatable``; ``pods hold 9 GPUs of 8 allocatable``), for the nodes where they do
    not: any resource requested beyond the node's allocatable (after overcommit), GPUs
    held beyond the node's devices, a device held beyond one GPU, a pod on fewer
    devices than it asks for. Read from the pods bound when the snapshot was made."""
    out: dict[int, list[str]] = {}
    over = np.argwhere(snap.used > snap.alloc)
    for i, j in over.tolist():
        r = snap.resources[j]
        used, alloc = int(snap.used[i, j]), int(snap.alloc[i, j])
        after = " (after overcommit)" if snap.config.overcommit.get(r, 1) != 1 else ""
        what = (
            f"{used} {'pod' if used == 1 else 'pods'} of {alloc} allowed"
            if r == "pods"
            else f"pods request {format_quantity(r, used)} {r} of "
            f"{format_quantity(r, alloc)} allocatable"
        )
        out.setdefault(i, []).append(f"{what}{after}")
    demand = np.zeros(snap.n_nodes, dtype=np.int64)
    short: dict[int, str] = {}
    for p in snap.pods:
        if p.node < 0 or not p.shape.is_gpu:
            continue
        demand[p.node] += p.shape.gpu_demand_milli
        if len(p.gpus) < p.shape.gpu_count and p.node not in short:
            short[p.node] = (
                f"pod {p.key} holds {len(p.gpus)} of the {p.shape.gpu_count} GPU devices it "
                "asks for"
            )
    total = snap.gpu_total * 1000
    for i in np.flatnonzero(demand > total).tolist():
        out.setdefault(i, []).append(
            f"pods hold {_gpus(int(demand[i]))} of {int(snap.gpu_total[i])} allocatable"
        )
    for i, why in short.items():
        if demand[i] <= total[i]:  # else said above
            out.setdefault(i, []).append(why)
    width = snap.gpu_free.shape[1]
    devices = np.arange(width)[None, :] < snap.gpu_total[:, None]
    held = (snap.gpu_free < 0) & devices
    for i in np.flatnonzero(held.any(axis=1) & (demand <= total)).tolist():
        k = int(np.flatnonzero(held[i])[0])
        out.setdefault(i, []).append(
            f"GPU {k} is held by pods asking for {_gpus(1000 - int(snap.gpu_free[i, k]))}"
        )
    return {i: ", ".join(whats) for i, whats in sorted(out.items())}
