"""Placement policies by name: the one registry every part of corral chooses from.

``POLICIES`` maps a name to a factory taking a :class:`PolicyContext`; ``make_policy``
builds one. The paper's six (random, dotprod, gpuclustering, gpupacking, bestfit, fgd),
the engine's binpack and spread, and ``corral``: the project's best policy. Trace
replay, the descheduler's simulated scheduler and the webhook's feasibility check all
name their policy here (``DEFAULT_POLICY`` when they name none).
"""

from __future__ import annotations

from collections.abc import Callable

from gangplace.engine.policies.base import CachedScorer, NodeSelector, PolicyContext, RandomSource
from gangplace.engine.policies.corral import CorralPolicy
from gangplace.engine.policies.fgd import FgdPolicy
from gangplace.engine.policies.paper import (
    BestFitPolicy,
    DotProdPolicy,
    GpuClusteringPolicy,
    GpuPackingPolicy,
    RandomPolicy,
)
from gangplace.engine.scoring import BinpackScorer, Scorer, SpreadScorer

__all__ = [
    "DEFAULT_POLICY",
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
    "check_policy",
    "make_policy",
    "policy_names",
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
    "binpack": lambda ctx: BinpackScorer(ctx.weights),
    "spread": lambda ctx: SpreadScorer(ctx.weights),
    "corral": lambda ctx: CorralPolicy(ctx.workload),
}

DEFAULT_POLICY = "binpack"

# Policies that draw from a random stream: only a replay has one to give.
_NEEDS_RANDOM_STREAM = frozenset({"random"})

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


def policy_names(*, random_stream: bool = True) -> tuple[str, ...]:
    """The names a caller may choose from; without a random stream, those needing none."""
    return tuple(n for n in POLICIES if random_stream or n not in _NEEDS_RANDOM_STREAM)


def check_policy(name: str, *, random_stream: bool = False) -> str:
    """``name`` if it is a policy the caller can build, else ValueError in one line
    quoting it and naming the choices (the caller puts its key in front)."""
    names = policy_names(random_stream=random_stream)
    if name not in names:
        why = (
            "draws from a trace replay's random stream, which this placement has not"
            if name in POLICIES
            else "is not a placement policy"
        )
        raise ValueError(f'"{name}" {why}; allowed: {", ".join(names)}')
    return name
