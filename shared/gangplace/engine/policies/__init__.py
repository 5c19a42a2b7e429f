"""Placement policies for trace replay, by name.

``POLICIES`` maps a name to a factory taking a :class:`PolicyContext`; ``make_policy``
builds one. The paper's six (random, dotprod, gpuclustering, gpupacking, bestfit, fgd),
the engine's binpack and spread, and ``corral``: the project's best policy.
"""

from __future__ import annotations

from collections.abc import Callable

from ..scoring import BinpackScorer, Scorer, SpreadScorer
from .base import CachedScorer, NodeSelector, PolicyContext, RandomSource
from .corral import CorralPolicy
from .fgd import FgdPolicy
from .paper import (
    BestFitPolicy,
    DotProdPolicy,
    GpuClusteringPolicy,
    GpuPackingPolicy,
    RandomPolicy,
)

__all__ = [
    "PAPER_POLICIES",
    "POLICIES",
    "BestFitPolicy",
    "CachedScorer",
    "CorralPolicy",
    "DotProdPolicy",
    "FgdPolicy",
    "GpuClusteringPolicy",
    "GpuPackingPolicy",
    "NodeSelector",
    "PolicyContext",
    "RandomPolicy",
    "RandomSource",
    "make_policy",
]

PolicyFactory = Callable[[PolicyContext], Scorer]


def _stream(ctx: PolicyContext) -> RandomSource:
    if ctx.rng is None:
        raise ValueError("policy random: draws from the replay's random stream; none was given")
    return ctx.rng


POLICIES: dict[str, PolicyFactory] = {
    "random": lambda ctx: RandomPolicy(_stream(ctx)),
    "dotprod": lambda ctx: DotProdPolicy(),
    "gpuclustering": lambda ctx: GpuClusteringPolicy(),
    "gpupacking": lambda ctx: GpuPackingPolicy(),
    "bestfit": lambda ctx: BestFitPolicy(),
    "fgd": lambda ctx: FgdPolicy(ctx.workload),
    "binpack": lambda ctx: BinpackScorer(),
    "spread": lambda ctx: SpreadScorer(),
    "corral": lambda ctx: CorralPolicy(ctx.workload),
}

# The paper's six, in its order.
PAPER_POLICIES: tuple[str, ...] = (
    "random",
    "dotprod",
    "gpuclustering",
    "gpupacking",
    "bestfit",
    "fgd",
)


def make_policy(name: str, ctx: PolicyContext) -> Scorer:
    """The policy called ``name``; ValueError naming the choices if there is none."""
    factory = POLICIES.get(name)
    if factory is None:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}")
    return factory(ctx)
