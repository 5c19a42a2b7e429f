"""A pod-by-pod scheduler, default-scheduler-like: each pending pod on its own, the best
node the engine finds for it, bound through the Binding subresource. It knows nothing of
gangs, which is how a gang ends up partly bound (3 of 4 workers running, the fourth
waiting for room that may never come). Nominated pods are counted as the kube-scheduler
counts them (:mod:`tests.controllers.nominated`). With ``backoff``, a pod that failed
is tried again only once its backoff has passed on ``clock`` (kube-scheduler's
defaults, podInitialBackoffSeconds 1 doubling per attempt up to podMaxBackoffSeconds
10, ``pkg/scheduler/backend/queue/backoff_queue.go``), while a new pod is tried at
once: how a pod created later can take room before one that waited."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from gangplace.engine import explain, shape_from_pod

from tests.controllers.common import condition
from tests.controllers.events import EventRecorder, iso
from tests.controllers.nominated import clear_nomination, nominated, place_with_nominated
from tests.controllers.rest import Json, Rest, RestError
from tests.controllers.runner import wall_clock
from tests.controllers.snapshot import snapshot_of

__all__ = ["PodScheduler", "kube_unschedulable_message"]


def kube_unschedulable_message(engine_explain: str, n_nodes: int) -> str:
    """kube-scheduler's words for what the engine's ``explain`` found:
    ``0/3 nodes are available: 3 Insufficient cpu. preemption: ...``."""
    _, _, reasons = engine_explain.partition(": ")
    parts = []
    for part in filter(None, reasons.split(", ")):
        n, _, why = part.partition(" ")
        if why.startswith("insufficient "):
            why = "Insufficient " + why.removeprefix("insufficient ")
        parts.append((why, n))
    body = ", ".join(f"{n} {why}" for why, n in sorted(parts))
    return (
        f"0/{n_nodes} nodes are available: {body}. preemption: 0/{n_nodes} nodes are "
        f"available: {n_nodes} No preemption victims found for incoming pod.."
    )


def _order(p: Json) -> tuple[int, str, str, str]:
    m = p["metadata"]
    return (
        -int((p.get("spec") or {}).get("priority") or 0),
        str(m.get("creationTimestamp", "")),
        str(m.get("namespace", "")),
        str(m["name"]),
    )


class PodScheduler:
    """Binds pods whose ``schedulerName`` is one of ``scheduler_names``."""

    name = "default-scheduler"

    def __init__(
        self,
        rest: Rest,
        *,
        scheduler_names: tuple[str, ...] = ("default-scheduler",),
        clock: Callable[[], datetime] = wall_clock,
        backoff: bool = False,
    ) -> None:
        self.rest = rest
        self.scheduler_names = scheduler_names
        self.clock = clock
        self.backoff = backoff
        # pod uid -> (failed attempts, not tried again before)
        self._backoff: dict[str, tuple[int, datetime]] = {}
        self.events = EventRecorder(rest, "default-scheduler", clock, legacy=False)

    async def close(self) -> None:
        await self.rest.close()

    async def step(self) -> bool:
        nodes = await self.rest.list("v1", "nodes")
        pods = await self.rest.list("v1", "pods")
        snap = snapshot_of(nodes, pods)
        changed = False
        waiting = [
            p
            for p in pods
            if not (p.get("spec") or {}).get("nodeName")
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase", "Pending") == "Pending"
            and (p.get("spec") or {}).get("schedulerName", "default-scheduler")
            in self.scheduler_names
        ]
        nominees = nominated(pods, self.scheduler_names)
        for p in sorted(waiting, key=_order):
            m = p["metadata"]
            uid = str(m.get("uid", ""))
            if self.backoff and uid in self._backoff and self.clock() < self._backoff[uid][1]:
                continue
            shape = shape_from_pod(p)
            spot = place_with_nominated(snap, p, nominees)
            if spot is not None:
                snap.place(shape, spot[0], spot[1])
                self._backoff.pop(uid, None)
                node = snap.node_names[spot[0]]
                try:
                    await self.rest.bind(m["namespace"], m["name"], node)
                except RestError as e:
                    if e.status in (404, 409):
                        continue
                    raise
                await self.events.record(
                    p,
                    "Normal",
                    "Scheduled",
                    f"Successfully assigned {m['namespace']}/{m['name']} to {node}",
                    "Binding",
                )
                changed = True
                continue
            tries = self._backoff.get(uid, (0, self.clock()))[0] + 1
            wait = min(2.0 ** (tries - 1), 10.0)
            self._backoff[uid] = (tries, self.clock() + timedelta(seconds=wait))
            changed |= await clear_nomination(self.rest, p)
            message = kube_unschedulable_message(explain(snap, shape, m["name"]), snap.n_nodes)
            old = condition(p, "PodScheduled")
            if old and old.get("reason") == "Unschedulable" and old.get("message") == message:
                continue
            conds = [
                c
                for c in (p.get("status") or {}).get("conditions") or ()
                if c.get("type") != "PodScheduled"
            ]
            conds.append(
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": iso(self.clock()),
                    "reason": "Unschedulable",
                    "message": message,
                }
            )
            try:
                await self.rest.patch(
                    "v1",
                    "pods",
                    m["namespace"],
                    m["name"],
                    {"status": {"conditions": conds}},
                    subresource="status",
                )
            except RestError as e:
                if e.status != 404:
                    raise
                continue
            await self.events.record(p, "Warning", "FailedScheduling", message, "Scheduling")
            changed = True
        return changed
