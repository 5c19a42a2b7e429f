"""What a cluster's Nodes and Pods hold that the engine read but cannot count as it
is: said once, here, for every command that reads a cluster or a dump
(``gangplace``, ``corral-descheduler plan`` and ``run``, ``kubectl corral``), so none
drops it in silence and none stops on it."""

from __future__ import annotations

from gangplace.engine.node_checks import LEFT_OUT
from gangplace.engine.snapshot import Snapshot

__all__ = ["PHASES", "dump_warnings"]

# Pods named in a warning before the rest are only counted.
_NAMED = 3
# The phases a pod can have (k8s.io/api core/v1 PodPhase; "Unknown" is deprecated since
# 1.22 but still read).
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def _some(names: list[str]) -> str:
    more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
    return ", ".join(names[:_NAMED]) + more


def dump_warnings(snap: Snapshot, *, live: bool = False) -> list[str]:
    """One line per problem, and what corral does about it (``live``: the snapshot was
    read from a cluster, not a dump):

    - a pod bound to a node the dump does not hold (a node deleted while the dump was
      taken, or nodes and pods dumped apart; on a cluster, a node deleted before its
      pods) uses capacity corral cannot see: it is left out of every figure;
    - a node whose pods hold more than it has (:mod:`gangplace.engine.node_checks`) is
      measured but left out of moves, one line per node;
    - a pod in phase Running with no node is waiting to be scheduled, as the
      kube-scheduler takes every pod without ``spec.nodeName``;
    - a pod in a phase Kubernetes does not have is counted as live (holding what it
      requests where it is bound), as the scheduler counts every pod not Succeeded or
      Failed."""
    out: list[str] = []
    lost = [p for p in snap.pods if p.node_name and p.node < 0]
    if lost:
        where = "the cluster" if live else "the dump"
        hint = (
            "(a node deleted before its pods)"
            if live
            else "(dump nodes and pods together: kubectl get nodes,pods -A -o json)"
        )
        out.append(
            f"{len(lost)} pod(s) bound to a node that is not in {where}, left out of the "
            f"figures: {_some([f'{p.namespace}/{p.name} on {p.node_name}' for p in lost])} "
            f"{hint}"
        )
    for i, why in snap.problems.items():
        out.append(f"node {snap.node_names[i]}: {why}; {LEFT_OUT}")
    unbound = [p.key for p in snap.pods if not p.node_name and p.phase == "Running"]
    if unbound:
        out.append(
            f"{len(unbound)} pod(s) in phase Running with no node (spec.nodeName), counted as "
            f"waiting to be scheduled, as the scheduler does: {_some(unbound)}"
        )
    odd = [f"{p.key} ({p.phase!r})" for p in snap.pods if p.phase not in PHASES]
    if odd:
        out.append(
            f"{len(odd)} pod(s) in a phase Kubernetes does not have (allowed: "
            f"{', '.join(PHASES)}), counted as live where they are bound: {_some(odd)}"
        )
    return out
