"""The scorer the simulated scheduler uses, chosen in the config.

``binpack`` and ``spread`` are the engine's scorers; ``fgd`` is the engine's FGD policy
(Weng et al., ATC '23), the same one trace replay uses: a node scores by how little
the FGD fragmentation of the typical workload grows when the pod lands there.
"""

from __future__ import annotations

from gangplace.engine import BinpackScorer, Scorer, SpreadScorer
from gangplace.engine.fragmentation import TargetWorkload
from gangplace.engine.policies import FgdPolicy

from .config import SchedulingConfig

__all__ = ["make_scorer"]


def make_scorer(cfg: SchedulingConfig, workload: TargetWorkload) -> Scorer:
    if cfg.policy == "fgd":
        return FgdPolicy(workload)
    if cfg.policy == "spread":
        return SpreadScorer(cfg.weights)
    return BinpackScorer(cfg.weights)
