"""The arrival sequence of the FGD paper's simulator, draw for draw.

For a seed s the paper seeds Go's global ``math/rand`` and then: throws one ``Int()``
away, shuffles the pod list (sorted by name), resamples copies of the sorted list
until the requested GPU reaches ``inflate`` x capacity (or removes random pods while it
exceeds it), and draws ``Perm(n_nodes)`` to rank the nodes for ties. The copies follow
all the shuffled originals; the stop test compares the per-GPU share, not k x d, and
the copy that trips it is dropped. The stream then goes on (Random draws from it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gangplace.engine.model import PodShape
from gangplace.sim.go_rand import GoRand

__all__ = ["Arrivals", "TracePod", "paper_arrivals"]

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class TracePod:
    """One pod of a trace: a name (for ordering) and its shape."""

    name: str
    shape: PodShape


@dataclass(slots=True)
class Arrivals:
    pods: list[TracePod]
    node_rank: IntArray
    rng: GoRand
    originals: int  # the shuffled originals kept; the rest are resampled copies
    demand_milli: int  # total k x d of ``pods``


def paper_arrivals(
    pods: Sequence[TracePod],
    n_nodes: int,
    capacity_milli: int,
    seed: int,
    inflate: float = 1.3,
) -> Arrivals:
    """Arrivals and node ranks for one seed, as the paper's simulator draws them."""
    if not pods:
        raise ValueError("no pods to replay")
    if inflate < 0:
        raise ValueError(f"inflate must be >= 0, got {inflate}")
    rng = GoRand(seed)
    rng.int_()
    ordered = sorted(pods, key=lambda p: p.name)
    arrivals = list(ordered)
    rng.shuffled(arrivals)
    demand = sum(p.shape.gpu_demand_milli for p in arrivals)
    originals = len(arrivals)
    target = inflate * float(capacity_milli)
    grows = any(p.shape.gpu_milli > 0 for p in ordered)
    if inflate > 0 and float(demand) < target and grows:
        n = len(ordered)
        while True:
            pick = ordered[rng.intn(n)]
            if float(demand + pick.shape.gpu_milli) > target:
                break
            arrivals.append(pick)
            demand += pick.shape.gpu_demand_milli
    elif inflate > 0 and float(demand) > target:
        while float(demand) > target:
            if not arrivals:
                raise ValueError("pod list emptied while tuning down")
            gone = arrivals.pop(rng.intn(len(arrivals)))
            demand -= gone.shape.gpu_demand_milli
        originals = len(arrivals)
    rank = np.array(rng.perm(n_nodes), dtype=np.int64)
    return Arrivals(arrivals, rank, rng, originals, demand)
