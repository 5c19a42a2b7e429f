"""The kube-scheduler's nominator, as the scheduler models need it.

A pending pod with ``status.nominatedNodeName`` is kept by the scheduler's nominator
(kubernetes ``pkg/scheduler/backend/queue/nominator.go``; before 1.32
``pkg/scheduler/internal/queue/scheduling_queue.go``), whoever wrote the field: the
scheduler's own preemption or, under KEP-5278 (NominatedNodeNameForExpectation, beta and
on by default from 1.35), another component. When the scheduler filters a pod on a node,
it first adds the nominated pods of that node whose priority is at least the pod's
(``addGENominatedPods`` under ``RunFilterPluginsWithNominatedPods``,
``pkg/scheduler/framework/runtime/framework.go``): what they request is taken, for pods
of equal or lower priority only. A pod with a nomination of its own is tried on that
node first (KEP-1923, ``evaluateNominatedNode`` in ``pkg/scheduler/schedule_one.go``).
Only the pods of the scheduler's own profiles are in its queue, so only theirs count.

When a nominated pod fails a cycle and preemption finds no victims, the scheduler
clears its nomination (``NewPostFilterResultWithNominatedNode("")`` in
``pkg/scheduler/framework/preemption/preemption.go``, on every release the in-memory
server plays, the gate on or off; the integration test "NNN is ignored on pod that
cannot fit on the node" in ``test/integration/scheduler/nominated_node_name``): the
models clear it too (:func:`clear_nomination`).
"""

from __future__ import annotations

import numpy as np
from gangplace.engine import Snapshot, place_pod, shape_from_pod

from tests.controllers.rest import Json, Rest, RestError

__all__ = ["clear_nomination", "nominated", "nomination", "place_with_nominated", "priority"]


def priority(p: Json) -> int:
    return int((p.get("spec") or {}).get("priority") or 0)


def nomination(p: Json) -> str:
    return str((p.get("status") or {}).get("nominatedNodeName") or "")


def nominated(pods: list[Json], scheduler_names: tuple[str, ...]) -> list[Json]:
    """The pods in the nominator: pending, not terminating, of the scheduler's names,
    with a nomination."""
    return [
        p
        for p in pods
        if nomination(p)
        and not (p.get("spec") or {}).get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
        and (p.get("spec") or {}).get("schedulerName", "default-scheduler") in scheduler_names
    ]


def _key(p: Json) -> tuple[str, str]:
    return (str(p["metadata"].get("namespace", "")), str(p["metadata"]["name"]))


def place_with_nominated(
    snap: Snapshot, p: Json, nominees: list[Json]
) -> tuple[int, tuple[int, ...]] | None:
    """Where the scheduler puts ``p`` (node row and devices), with the nominated pods of
    its priority or higher counted on their nodes; its own nominated node first. The
    snapshot is left as it was."""
    shape = shape_from_pod(p)
    mine = priority(p)
    with snap.what_if():
        for q in nominees:
            row = snap.node_index.get(nomination(q), -1)
            if _key(q) == _key(p) or priority(q) < mine or row < 0:
                continue
            snap.place_bound(shape_from_pod(q), row)
        own = snap.node_index.get(nomination(p), -1)
        if own >= 0:
            only = [i == own for i in range(snap.n_nodes)]
            spot = place_pod(snap, shape, allowed=np.array(only))
            if spot is not None:
                return spot
        return place_pod(snap, shape)


async def clear_nomination(rest: Rest, p: Json) -> bool:
    """The scheduler's clearing of ``p``'s nomination after a failed cycle."""
    if not nomination(p):
        return False
    m = p["metadata"]
    try:
        await rest.patch(
            "v1",
            "pods",
            m["namespace"],
            m["name"],
            {"status": {"nominatedNodeName": None}},
            subresource="status",
        )
    except RestError as e:
        if e.status != 404:
            raise
        return False
    return True
