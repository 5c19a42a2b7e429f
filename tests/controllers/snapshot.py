"""The engine's view of the fake cluster: a Snapshot of the Nodes and of every pod that
holds resources (bound, not finished; a terminating pod holds its node until it is
gone, as the kube-scheduler counts it)."""

from __future__ import annotations

from gangplace.engine import Snapshot

from tests.controllers.rest import Json

__all__ = ["TERMINAL", "holds_resources", "snapshot_of"]

TERMINAL = ("Succeeded", "Failed")


def holds_resources(pod: Json) -> bool:
    return (pod.get("status") or {}).get("phase") not in TERMINAL


def snapshot_of(nodes: list[Json], pods: list[Json]) -> Snapshot:
    return Snapshot.from_objects(nodes, [p for p in pods if holds_resources(p)])
