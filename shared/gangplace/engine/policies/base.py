"""What every trace policy shares: per-node views of the snapshot, the paper's GPU
choices, and a score cache that recomputes only the nodes that changed.

A policy is a :class:`~gangplace.engine.scoring.Scorer`. A policy whose choice is not
"highest score, then lowest node rank" over per-node scores (Random draws a node,
BestFit normalises over the candidates) also has ``select``; the replay prefers it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from gangplace.engine.fragmentation import TargetWorkload
from gangplace.engine.model import PodShape
from gangplace.engine.snapshot import Snapshot

__all__ = [
    "CachedScorer",
    "NodeSelector",
    "PolicyContext",
    "RandomSource",
    "exclusive_gpus",
    "free_cpu",
    "tightest_gpu",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MAX_SPEC_CPU = 128_000  # the paper's normalisers: a 128-core, 8-GPU node
MAX_SPEC_GPU = 8_000


class RandomSource(Protocol):
    """A stream of random draws, as Go's ``rand.Intn`` makes them. The trace replay
    passes its Go-compatible stream (``gangplace.sim.go_rand``), so Random draws what
    the paper's scheduler draws; the engine itself owns no random source."""

    def intn(self, n: int) -> int:
        """A number in [0, n)."""
        ...


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a policy may need: the target workload M (FGD and its kin), the
    replay's random stream (Random draws from it, as the paper's scheduler does) and
    the per-resource weights of binpack and spread (None: the engine's defaults)."""

    workload: TargetWorkload
    rng: RandomSource | None = None
    weights: Mapping[str, float] | None = None


@runtime_checkable
class NodeSelector(Protocol):
    def select(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> int:
        """Position in ``nodes`` (all feasible, at least two) of the node to use."""
        ...


def free_cpu(snap: Snapshot, nodes: IntArray) -> IntArray:
    j = snap.res_index["cpu"]
    out: IntArray = snap.alloc[nodes, j] - snap.used[nodes, j]
    return out


def exclusive_gpus(free: IntArray, k: int) -> tuple[int, ...]:
    """The k fully free devices with the lowest indices (every policy, whole GPUs)."""
    return tuple(int(g) for g in np.flatnonzero(free >= 1000)[:k])


def tightest_gpu(free: IntArray, d: int) -> tuple[int, ...]:
    """The device with the least room that still holds ``d``, lowest index on ties."""
    ok = np.flatnonzero(free >= d)
    if ok.size == 0:
        return ()
    return (int(ok[np.argmin(free[ok])]),)


class _Entry:
    __slots__ = ("gpu", "score", "version")

    def __init__(self, n: int) -> None:
        self.version = np.full(n, -1, dtype=np.int64)
        self.score = np.zeros(n, dtype=np.float64)
        self.gpu = np.full(n, -1, dtype=np.int64)


class CachedScorer:
    """A scorer whose node score depends only on that node's state and the shape.

    Scores (and the GPU a sharing pod would take) are kept per shape and node, tagged
    with the node's version; a query recomputes only the nodes changed since. Subclasses
    implement :meth:`compute`.
    """

    name = "cached"

    def __init__(self) -> None:
        self._snap: Snapshot | None = None
        self._cache: dict[PodShape, _Entry] = {}

    def compute(
        self, snap: Snapshot, shape: PodShape, nodes: IntArray
    ) -> tuple[FloatArray, IntArray]:
        """Scores of ``nodes`` and, for a sharing pod, the device each would use (-1:
        the default choice)."""
        raise NotImplementedError

    def _entry(self, snap: Snapshot, shape: PodShape) -> _Entry:
        if snap is not self._snap:
            self._snap, self._cache = snap, {}
        entry = self._cache.get(shape)
        if entry is None:
            entry = self._cache[shape] = _Entry(snap.n_nodes)
        return entry

    def _refresh(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> _Entry:
        entry = self._entry(snap, shape)
        current = snap.node_version[nodes]
        stale = entry.version[nodes] != current
        if stale.any():
            todo = nodes[stale]
            scores, gpus = self.compute(snap, shape, todo)
            entry.score[todo] = scores
            entry.gpu[todo] = gpus
            entry.version[todo] = current[stale]
        return entry

    def score(self, snap: Snapshot, shape: PodShape, nodes: IntArray) -> FloatArray:
        out: FloatArray = self._refresh(snap, shape, nodes).score[nodes]
        return out

    def choose_gpus(self, snap: Snapshot, shape: PodShape, node: int) -> tuple[int, ...]:
        if not shape.is_gpu:
            return ()
        free = snap.gpu_free[node]
        if shape.gpu_milli >= 1000:
            return exclusive_gpus(free, shape.gpu_count)
        g = int(self._refresh(snap, shape, np.array([node])).gpu[node])
        return (g,) if g >= 0 else tightest_gpu(free, shape.gpu_milli)
