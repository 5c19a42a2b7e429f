"""The runner's port (:class:`~descheduler.running.runner_port.RunnerPort`) over the Kubernetes API:
what a run does to a live cluster, around the pure planner.

:class:`KubeIO` reads the cluster through a :class:`~descheduler.running.cluster_view.ClusterView`
and keeps the run's record in the move ledger
(:class:`~descheduler.running.ledger_store.LedgerStore`):

- ``fetch_state``: the informers' objects and the ledger, as one run's state;
- ``begin`` / ``finish``: the Evictor for the plan, its limits charged with what a run
  cut short evicted, and the run recorded in the ledger until it ends;
- ``precheck(group)``: the waiting gang a group makes room for must still wait, and be
  one the scheduler can place now (``runner.only_schedulable_gangs``): pending pods it
  can see and, with Volcano, a PodGroup that is Inqueue. The live disruption budgets
  must allow evicting every member of the group;
- ``mark_moved``: ``corral.dev/last-moved`` merge-patched on the gang's PodGroup before
  its pods go; a unit with no PodGroup is written to the move ledger under its
  cool-down key: its gang, or a pod's controller, which outlives the pod and makes its
  replacement. Annotating the pods themselves would be pointless (they are about to be
  deleted), and annotating a controller would need write access to every workload kind;
- ``mark_room``: ``corral.dev/room-made`` on the waiting gang's PodGroup (or in the
  ledger) once the first gang of its group is evicted;
- ``evict_gang``: :meth:`Evictor.evict_gang` with the live budgets, the limits of the
  config as a second guard, and the Lease as the guard of every request;
- ``suspend_gang``, ``resume``, ``settle``: handed to
  :class:`~descheduler.running.suspender.Suspender`;
- ``emit_event``: a core/v1 Event on the gang's workload, PodGroup or first pod
  (:mod:`descheduler.running.gang_events`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from gangplace.engine.dump_checks import dump_warnings
from gangplace.engine.membership import membership
from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.objects import podgroup_from_json
from gangplace.engine.timeparse import format_time
from gangplace.kube import (
    REQUEST_ERRORS,
    EvictionResult,
    EvictionTarget,
    Evictor,
    KubeClient,
    Limits,
)
from gangplace.kube import Outcome as KubeOutcome
from gangplace.kube.resources import PODGROUP_APIS, VOLCANO_PODGROUPS

from descheduler.config import DeschedulerConfig
from descheduler.planning.budget import limits_of
from descheduler.planning.gang_views import cooldown_key
from descheduler.planning.plan_model import Move, Plan
from descheduler.planning.state import (
    ANNOTATION_LAST_MOVED,
    ANNOTATION_ROOM_MADE,
    ClusterState,
    EvictedPod,
    MoveLedger,
    RunRecord,
    StateError,
)
from descheduler.running.cluster_view import ClusterView
from descheduler.running.gang_events import involved_object, post_gang_event
from descheduler.running.ledger_store import LedgerStore
from descheduler.running.runner_port import GangEvent, GangOutcome, MoveOutcome, PodResult, Resumed
from descheduler.running.suspender import Suspender

__all__ = ["OUTCOMES", "KubeIO"]

# The descheduler's cluster side logs under one name, whichever module writes.
log = logging.getLogger(__name__)

_MERGE_PATCH = "application/merge-patch+json"

# The evictor's outcomes as the runner counts them.
OUTCOMES: Mapping[KubeOutcome, MoveOutcome] = {
    KubeOutcome.EVICTED: MoveOutcome.EVICTED,
    KubeOutcome.GONE: MoveOutcome.GONE,
    KubeOutcome.DRY_RUN: MoveOutcome.DRY_RUN,
    KubeOutcome.REFUSED_BY_PDB: MoveOutcome.REFUSED,
    KubeOutcome.SKIPPED_BY_LIMIT: MoveOutcome.SKIPPED,
    KubeOutcome.FAILED: MoveOutcome.FAILED,
    KubeOutcome.ABORTED: MoveOutcome.ABORTED,
}


def _pod_result(r: EvictionResult) -> PodResult:
    return PodResult(r.target.namespace, r.target.name, OUTCOMES[r.outcome], r.message)


class KubeIO:
    """One descheduler's side effects on the cluster: the runner's port. ``gang_lock``
    is the run process's (see :class:`~descheduler.running.runner_port.RunnerPort`)."""

    retry_pause: float = 1.0

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        config: DeschedulerConfig,
        *,
        clock: Callable[[], datetime],
        is_leader: Callable[[], bool] = lambda: True,
        interrupted: Callable[[], str | None] = lambda: None,
        ledger_namespace: str = "corral-system",
        component: str = "corral-descheduler",
        backoff_initial: float = 1.0,
        settle_poll: float = 0.5,
    ) -> None:
        self.client = client
        self.view = view
        self.config = config
        self.clock = clock
        self.is_leader = is_leader
        self.interrupted = interrupted
        self.ledger = LedgerStore(client, ledger_namespace)
        self.component = component
        self.backoff_initial = backoff_initial
        self.suspender = Suspender(
            client,
            view,
            config,
            clock=clock,
            interrupted=interrupted,
            component=component,
            settle_poll=settle_poll,
        )
        self._plan_id = ""
        self.state: ClusterState | None = None
        self.evictor: Evictor | None = None
        self._pods: dict[str, PodRecord] = {}
        self._recording = False  # this run keeps a record of its evictions
        self.gang_lock: asyncio.Lock | None = None

    # --- state --------------------------------------------------------------------------

    async def fetch_state(self) -> ClusterState:
        ledger = await self.ledger.read()
        try:
            state = await self.view.state(self.clock(), ledger)
        except StateError as e:
            raise StateError(f"the cluster's objects: {e}") from None
        self.state = state
        self.evictor = None
        self._recording = False
        self._pods = {p.key: p for p in state.snapshot.pods}
        for what, why in self.view.invalid().items():
            log.warning("object left out: %s", why, extra={"fields": {"object": what}})
        for note in dump_warnings(state.snapshot, live=True):
            log.warning("%s", note)
        return state

    async def begin(self, plan: Plan) -> None:
        """The Evictor for ``plan``, its limits already charged with what a run cut
        short evicted, and the run written to the ledger before anything goes."""
        assert self.state is not None
        self._plan_id = plan.plan_id
        carried = self.state.ledger.carried(plan.now, self.config.runner.interval)
        # The planner kept to these already; the Evictor holds them again, whatever
        # happens to the plan.
        budgets = limits_of(self.config.limits)
        limits = Limits(budgets)
        limits.reserve(
            [
                EvictionTarget(
                    p.namespace, p.name, node=p.node, queue=p.queue, gpu_milli=p.gpu_milli
                )
                for p in carried
            ]
        )
        # With no limit at all there is nothing to pass on, and nothing is recorded.
        self._recording = bool(budgets)
        if self._recording:
            run = RunRecord(plan.plan_id, plan.now, False, list(carried), self.clock())

            def start(ledger: MoveLedger) -> None:
                ledger.run = run

            await self.ledger.update(start)
        self.evictor = Evictor(
            self.client,
            plan=plan.plan_id,
            limits=limits,
            guard=self.is_leader,
            component=self.component,
            backoff_initial=self.backoff_initial,
        )

    async def finish(self, plan: Plan) -> None:
        """The run got to the end of its plan: the next run has its limits whole. An
        open record of a run cut short before is closed too: this run took it over."""

        def done(ledger: MoveLedger) -> bool:
            if ledger.run is None or ledger.run.finished:
                return False
            ledger.run.finished = True
            return True

        await self.ledger.update(done)

    def _evictor(self) -> Evictor:
        if self.evictor is None:
            raise RuntimeError("no plan begun: begin(plan) comes before any eviction")
        return self.evictor

    def _targets(self, move: Move) -> list[EvictionTarget]:
        out = []
        for pm in move.pods:
            rec = self._pods.get(pm.key)
            if rec is not None:
                t = EvictionTarget.from_record(rec, gang=move.unit, queue=move.queue)
            else:  # not in the state it was planned on: evict it by name and uid
                t = EvictionTarget(pm.namespace, pm.name, pm.uid, pm.node, move.unit, move.queue)
            out.append(t)
        return out

    # --- before evicting ----------------------------------------------------------------

    def _still_waits(self, gang: str) -> str | None:
        """Why the waiting gang ``ns/name`` should not get room now, or None."""
        assert self.state is not None
        ns, _, name = gang.partition("/")
        strict = self.config.runner.only_schedulable_gangs
        pg = self.state.podgroups.get(gang)
        if pg is not None:
            live = self.view.podgroup(pg.api_group, gang)
            if live is None:
                return f"the PodGroup of waiting gang {gang} is gone"
            phase = str((live.get("status") or {}).get("phase") or "")
            if not podgroup_from_json(live).waiting:
                return f"gang {gang} no longer waits (PodGroup phase {phase})"
            if strict and pg.api_group == VOLCANO_PODGROUPS.group and phase != "Inqueue":
                return (
                    f"waiting gang {gang} is not enqueued by Volcano yet (PodGroup phase "
                    f"{phase or 'unset'}): Volcano would not place it, and the room would go "
                    "to other pods (runner.only_schedulable_gangs)"
                )
        if not strict:
            return None
        pending = 0
        for p in self.view.cache.pods.values():
            if p.namespace != ns or p.node_name:
                continue
            m = membership(p)
            if (m is not None and m.gang == name) or _under(self.state, p, name):
                pending += 1
        if pending == 0:
            return (
                f"waiting gang {gang} has no pending pod yet: the scheduler could not give "
                "it the room, which would go to other pods (runner.only_schedulable_gangs)"
            )
        return None

    async def precheck(self, group: Sequence[Move]) -> str | None:
        gang = group[0].for_gang
        if gang is not None:
            why = self._still_waits(gang)
            if why is not None:
                return why
        members = [t for m in group for t in self._targets(m)]
        try:
            check = await self._evictor().check_gang_pdbs(members)
        except REQUEST_ERRORS as e:
            return f"the disruption budgets could not be read: {e}"
        if not check.allowed:
            return "the disruption budgets do not allow it now: " + "; ".join(check.reasons)
        return None

    async def _patch_podgroup(
        self, group: str, namespace: str, name: str, key: str, when: datetime
    ) -> None:
        body = {"metadata": {"annotations": {key: format_time(when)}}}
        await self.client.patch(
            PODGROUP_APIS[group], name, body, namespace=namespace, content_type=_MERGE_PATCH
        )

    async def mark_moved(self, move: Move, now: datetime) -> None:
        """Before a gang goes: its cool-down mark, and its pods in the run's record."""
        pods = [
            EvictedPod(t.namespace, t.name, t.node, t.queue, t.gpu_milli)
            for t in self._targets(move)
        ]
        keep = self.config.eviction.cooldown
        api = move.podgroup_api or ""
        on_podgroup = bool(move.podgroup) and api in PODGROUP_APIS
        rec = self._pods.get(move.pods[0].key) if move.pods else None
        key = cooldown_key(move.namespace, move.gang, rec)
        recording = self._recording
        stamp = self.clock()

        def record(ledger: MoveLedger) -> bool:
            changed = False
            if not on_podgroup:
                ledger.last_moved[key] = now
                ledger.prune(now, max(keep, 1.0))
                changed = True
            if recording and ledger.run is not None and not ledger.run.finished:
                ledger.run.evicted.extend(pods)
                ledger.run.last = stamp
                changed = True
            return changed

        # The ledger first: if it cannot be written the gang is skipped, and must not
        # be left cooling down on its PodGroup without having moved.
        await self.ledger.update(record)
        if on_podgroup:
            assert move.podgroup is not None
            await self._patch_podgroup(
                api, move.namespace, move.podgroup, ANNOTATION_LAST_MOVED, now
            )

    async def mark_room(self, move: Move, now: datetime) -> None:
        gang = move.for_gang
        if gang is None or self.state is None:
            return
        pg = self.state.podgroups.get(gang)
        if pg is not None and pg.api_group in PODGROUP_APIS:
            await self._patch_podgroup(
                pg.api_group, pg.namespace, pg.name, ANNOTATION_ROOM_MADE, now
            )
            return
        await self.ledger.record("room_made", gang, now, self.config.eviction.cooldown)

    # --- suspending and resuming (descheduler.running.suspender) -------------------------------

    async def suspend_gang(self, move: Move, message: str) -> Sequence[PodResult]:
        assert self.state is not None
        return await self.suspender.suspend_gang(
            move, message, state=self.state, pods=self._pods, plan_id=self._plan_id
        )

    async def resume(self) -> list[Resumed]:
        assert self.state is not None
        return await self.suspender.resume(self.state)

    async def settle(self, plan: Plan, outcomes: Sequence[GangOutcome]) -> list[Resumed]:
        return await self.suspender.settle(outcomes)

    # --- evicting and telling ------------------------------------------------------------

    async def evict_gang(self, move: Move, message: str) -> Sequence[PodResult]:
        results = await self._evictor().evict_gang(self._targets(move), move.reason)
        return [_pod_result(r) for r in results]

    async def emit_event(self, event: GangEvent) -> None:
        involved = involved_object(event, self.state, self._pods)
        if not involved["name"]:
            return
        error = await post_gang_event(
            self.client, involved, event.type, event.reason, event.message, self.component
        )
        level = logging.WARNING if event.type == "Warning" else logging.INFO
        log.log(
            level,
            event.message,
            extra={
                "fields": {
                    "event": event.reason,
                    "object": f"{involved['kind']} {event.namespace}/{involved['name']}",
                    **({"event_error": error} if error else {}),
                }
            },
        )


def _under(state: ClusterState, pod: PodRecord, composite: str) -> bool:
    """Whether ``pod``'s native group is under the CompositePodGroup ``composite`` (a
    gang of several groups, planned for as one)."""
    if not pod.native_group:
        return False
    ng = state.native_groups.get(f"{pod.namespace}/{pod.native_group}")
    return ng is not None and ng.parent == composite
