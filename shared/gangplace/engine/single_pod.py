"""Placing one pod: the engine's single-pod placer.

Every caller that places pods one at a time -- the trace replay, the gang study's
pod-by-pod mode, the oracle's moves, the test schedulers -- places each one here, so
a pod lands on the same node whoever asks. The node is the one the scorer prefers
among the nodes that fit: a scorer with its own ``select`` (a policy whose choice is
not "highest score, lowest node rank", such as Random or BestFit) picks it, else the
best score wins, ties to the lowest node rank. A single candidate is taken without
scoring, as the kube-scheduler does.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gangplace.engine.feasibility import fits
from gangplace.engine.model import PodShape
from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.scoring import BinpackScorer, Scorer, select_node
from gangplace.engine.snapshot import Snapshot

__all__ = ["place_pod"]

BoolArray = npt.NDArray[np.bool_]


def place_pod(
    snap: Snapshot,
    shape: PodShape,
    scorer: Scorer | None = None,
    pod: PodRecord | None = None,
    *,
    allowed: BoolArray | None = None,
) -> tuple[int, tuple[int, ...]] | None:
    """Place one pod of ``shape`` (bound to ``pod`` if given) on the node ``scorer``
    (default binpack) picks among those that fit and are ``allowed``; returns the node
    and its devices, or None (snapshot unchanged) if no node fits."""
    scorer = scorer or BinpackScorer()
    mask = fits(snap, shape)
    if allowed is not None:
        mask &= allowed
    nodes = np.flatnonzero(mask)
    if nodes.size == 0:
        return None
    if nodes.size == 1:
        node = int(nodes[0])
    else:
        select = getattr(scorer, "select", None)
        if select is not None:
            pos = int(select(snap, shape, nodes))
        else:
            pos = select_node(snap, nodes, scorer.score(snap, shape, nodes))
        node = int(nodes[pos])
    gpus = scorer.choose_gpus(snap, shape, node)
    snap.place(shape, node, gpus, pod=pod)
    return node, gpus
