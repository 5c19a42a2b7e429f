"""The descheduler on a live cluster: informers feed the planner, the Evictor carries
the plan out, and Events, annotations and the move ledger tell the cluster (and the
next run) what was done.

:class:`ClusterView` keeps informers of what the planner reads: nodes and pods as the
engine's compact records (:class:`~gangplace.kube.ClusterCache`), and PodGroups of both
APIs, Volcano Queues, PodDisruptionBudgets and PriorityClasses as their JSON, trimmed.
A run hands that JSON to :func:`~descheduler.state.state_from_objects`, the parser
``plan --snapshot`` uses on a dump, so a live plan and an offline plan of the same
objects are the same plan. A PodGroup or Queue API that is not installed is left out.

:class:`KubeIO` is the runner's :class:`~descheduler.runner.RunnerIO` over the API:

- ``precheck(group)``: the waiting gang a group makes room for must still wait, and be
  one the scheduler can place now (``runner.only_schedulable_gangs``): pending pods it
  can see and, with Volcano, a PodGroup that is Inqueue. The live disruption budgets
  must allow evicting every member of the group;
- ``mark_moved``: ``corral.dev/last-moved`` merge-patched on the gang's PodGroup before
  its pods go; a unit with no PodGroup is written to the move ledger (a ConfigMap in the
  descheduler's namespace) under its cool-down key: its gang, or a pod's controller,
  which outlives the pod and makes its replacement. Annotating the pods themselves would
  be pointless (they are about to be deleted), and annotating a controller would need
  write access to every workload kind;
- ``mark_room``: ``corral.dev/room-made`` on the waiting gang's PodGroup (or in the
  ledger) once the first gang of its group is evicted;
- ``evict_gang``: :meth:`Evictor.evict_gang` with the live budgets, the limits of the
  config as a second guard, and the Lease as the guard of every request;
- ``emit_event``: a core/v1 Event on the gang's PodGroup, or on its first pod.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from gangplace.engine.gangs import membership
from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.objects import pdb_from_json, podgroup_from_json, queue_from_json
from gangplace.engine.timeparse import format_time
from gangplace.engine.workloads import (
    ANNOTATION_SUSPENDED_BY,
    WorkloadRecord,
    workload_from_json,
)
from gangplace.kube import (
    REQUEST_ERRORS,
    TRANSIENT_ERRORS,
    ApiError,
    Budget,
    ClusterCache,
    EvictionResult,
    EvictionTarget,
    Evictor,
    Informer,
    KubeClient,
    Limits,
    event_body,
    post_event,
)
from gangplace.kube import Outcome as KubeOutcome
from gangplace.kube.resources import (
    CONFIGMAPS,
    COSCHED_PODGROUPS,
    DESCHEDULER_WORKLOADS,
    PDBS,
    PRIORITY_CLASSES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    Resource,
)

from .config import DeschedulerConfig
from .config import Limits as LimitsConfig
from .plan import Move, Plan
from .resume import Resumption, due_resumptions, mark_text
from .runner import GangEvent, GangOutcome, Outcome, PodResult, Resumed, RunnerIO
from .safety import Owners
from .state import (
    ANNOTATION_LAST_MOVED,
    ANNOTATION_ROOM_MADE,
    MOVE_LEDGER,
    ClusterState,
    EvictedPod,
    MoveLedger,
    RunRecord,
    StateError,
    drf_queue,
    ledger_from_json,
    state_from_objects,
)
from .units import cooldown_key

__all__ = ["OUTCOMES", "ClusterView", "KubeIO", "LedgerStore", "evictor_limits"]

log = logging.getLogger(__name__)

Json = dict[str, Any]

# The evictor's outcomes as the runner counts them.
OUTCOMES: Mapping[KubeOutcome, Outcome] = {
    KubeOutcome.EVICTED: Outcome.EVICTED,
    KubeOutcome.GONE: Outcome.GONE,
    KubeOutcome.DRY_RUN: Outcome.DRY_RUN,
    KubeOutcome.REFUSED_BY_PDB: Outcome.REFUSED,
    KubeOutcome.SKIPPED_BY_LIMIT: Outcome.SKIPPED,
    KubeOutcome.FAILED: Outcome.FAILED,
    KubeOutcome.ABORTED: Outcome.ABORTED,
}

PODGROUP_APIS: Mapping[str, Resource] = {
    VOLCANO_PODGROUPS.group: VOLCANO_PODGROUPS,
    COSCHED_PODGROUPS.group: COSCHED_PODGROUPS,
}
_OPTIONAL = (VOLCANO_PODGROUPS, VOLCANO_QUEUES, COSCHED_PODGROUPS, *DESCHEDULER_WORKLOADS)
# The workload resources by kind: what a suspend or resume patches.
WORKLOAD_RESOURCES: Mapping[str, Resource] = {r.kind: r for r in DESCHEDULER_WORKLOADS}
_MERGE_PATCH = "application/merge-patch+json"
# The spec fields of a workload the planner reads (see gangplace.engine.workloads).
_WORKLOAD_SPEC = frozenset({"suspend", "runPolicy", "backoffLimit", "podFailurePolicy"})


def _trimmed(resource: Resource, check: Callable[[Json], object]) -> Callable[[Json], Json]:
    """The object as a dump would list it (list items may omit kind and apiVersion),
    without managedFields; ``check`` raises ValueError for one the planner cannot read,
    which the informer then leaves out (and reports) rather than failing every run."""

    def convert(obj: Json) -> Json:
        out = dict(obj)
        out["kind"], out["apiVersion"] = resource.kind, resource.api_version
        spec = out.get("spec")
        if resource in DESCHEDULER_WORKLOADS and isinstance(spec, dict):
            # a workload's pod templates can be large, and the planner reads none of them
            out["spec"] = {k: v for k, v in spec.items() if k in _WORKLOAD_SPEC}
        meta = dict(out.get("metadata") or {})
        meta.pop("managedFields", None)
        ann = meta.get("annotations")
        if isinstance(ann, dict) and "kubectl.kubernetes.io/last-applied-configuration" in ann:
            ann = dict(ann)
            del ann["kubectl.kubernetes.io/last-applied-configuration"]
            meta["annotations"] = ann
        out["metadata"] = meta
        check(out)
        return out

    return convert


class ClusterView:
    """Informers for the planner's input; :meth:`state` builds one run's state."""

    def __init__(
        self,
        client: KubeClient,
        config: DeschedulerConfig,
        *,
        ledger_namespace: str,
        page_size: int = 500,
        watch_timeout: int = 300,
    ) -> None:
        self.client = client
        self.config = config
        self.ledger_namespace = ledger_namespace
        self.cache = ClusterCache(
            client, config.engine, page_size=page_size, watch_timeout=watch_timeout
        )
        self._kw: dict[str, Any] = {"page_size": page_size, "watch_timeout": watch_timeout}
        self.objects: dict[Resource, Informer[Json]] = {}
        self.missing: list[str] = []  # optional APIs not installed

    def _checker(self, resource: Resource) -> Callable[[Json], object]:
        cfg = self.config.engine
        if resource in (VOLCANO_PODGROUPS, COSCHED_PODGROUPS):
            return podgroup_from_json
        if resource == VOLCANO_QUEUES:
            return lambda o: drf_queue(queue_from_json(o), cfg)
        if resource == PDBS:
            return pdb_from_json
        if resource in DESCHEDULER_WORKLOADS:
            return workload_from_json
        return lambda o: o

    async def _installed(self, resource: Resource) -> bool:
        """Whether an optional API (a CRD) is served: a one-item list, 404 when not. Any
        other failure counts as served: its informer retries, and says why if it never
        syncs."""
        try:
            await self.client.list(resource, limit=1)
        except ApiError as e:
            if e.status == 404:
                return False
            log.warning("probing %s: %s", resource, e)
        except TRANSIENT_ERRORS as e:
            log.warning("probing %s: %s: %s", resource, type(e).__name__, e)
        return True

    async def start(self) -> None:
        resources = [PDBS, PRIORITY_CLASSES]
        for r in _OPTIONAL:
            if await self._installed(r):
                resources.append(r)
            else:
                self.missing.append(str(r))
                log.info("API not installed; left out", extra={"fields": {"resource": str(r)}})
        for r in resources:
            self.objects[r] = Informer(
                self.client, r, _trimmed(r, self._checker(r)), name=str(r), **self._kw
            )
        await self.cache.start()
        for inf in self.objects.values():
            inf.start()

    async def stop(self) -> None:
        await self.cache.stop()
        await asyncio.gather(*(inf.stop() for inf in self.objects.values()))

    @property
    def synced(self) -> bool:
        return self.cache.synced and all(i.synced.is_set() for i in self.objects.values())

    async def wait_synced(self, timeout: float | None = None) -> None:
        await self.cache.wait_synced(timeout)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(i.synced.wait() for i in self.objects.values()))
        except TimeoutError:
            late = [str(r) for r, i in self.objects.items() if not i.synced.is_set()]
            raise TimeoutError(f"informers not synced after {timeout}s: {late}") from None

    def podgroup(self, group: str, key: str) -> Json | None:
        inf = self.objects.get(PODGROUP_APIS[group]) if group in PODGROUP_APIS else None
        return inf.get(key) if inf is not None else None

    def any_podgroup(self, key: str) -> tuple[Resource, Json] | None:
        """The PodGroup ``ns/name`` of either API, as the informer has it."""
        for r in PODGROUP_APIS.values():
            inf = self.objects.get(r)
            obj = inf.get(key) if inf is not None else None
            if obj is not None:
                return r, obj
        return None

    def invalid(self) -> dict[str, str]:
        """Objects left out because they cannot be read, by ``resource key``."""
        return {
            f"{r} {k}": why for r, inf in self.objects.items() for k, why in inf.invalid.items()
        }

    async def state(self, now: datetime, ledger: Json | None = None) -> ClusterState:
        snap = await self.cache.snapshot_async()
        objects: list[Json] = [o for inf in self.objects.values() for o in inf.values()]
        if ledger is not None:
            objects.append(ledger)
        return state_from_objects(snap, now, objects)


class LedgerStore:
    """The move ledger ConfigMap: read each run, updated with the resourceVersion it was
    read at (a conflict is read again and retried)."""

    def __init__(self, client: KubeClient, namespace: str, name: str = MOVE_LEDGER) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name

    async def read(self) -> Json | None:
        try:
            return await self.client.get(CONFIGMAPS, self.name, self.namespace)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    async def record(
        self, field: str, key: str, when: datetime, keep_seconds: float, attempts: int = 4
    ) -> None:
        """Set ``field`` (``last_moved`` or ``room_made``) of ``key`` to ``when``,
        forgetting entries older than ``keep_seconds``."""

        def change(ledger: MoveLedger) -> None:
            getattr(ledger, field)[key] = when
            ledger.prune(when, max(keep_seconds, 1.0))

        await self.update(change, attempts)

    async def update(self, change: Callable[[MoveLedger], bool | None], attempts: int = 4) -> None:
        """Read the ledger, ``change`` it, write it back (read again on a conflict);
        nothing is written when ``change`` returns False."""
        for attempt in range(attempts):
            obj = await self.read()
            ledger = ledger_from_json(obj) if obj is not None else MoveLedger()
            if change(ledger) is False:
                return
            body: Json = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": self.name,
                    "namespace": self.namespace,
                    "labels": {"app.kubernetes.io/part-of": "corral"},
                },
                "data": ledger.to_data(),
            }
            try:
                if obj is None:
                    await self.client.create(CONFIGMAPS, body, namespace=self.namespace)
                else:
                    body["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
                    await self.client.replace(CONFIGMAPS, self.name, body, namespace=self.namespace)
                return
            except ApiError as e:
                if e.status != 409 or attempt == attempts - 1:
                    raise


def evictor_limits(cfg: LimitsConfig) -> list[Budget]:
    """The config's limits as the Evictor's budgets: the planner keeps to them already;
    the Evictor holds them again, whatever happens to the plan."""
    out: list[Budget] = []
    if cfg.max_evictions_per_run is not None:
        out.append(Budget.per_run(cfg.max_evictions_per_run))
    if cfg.max_evictions_per_node is not None:
        out.append(Budget.per_node(cfg.max_evictions_per_node))
    if cfg.max_evictions_per_namespace is not None:
        out.append(Budget.per_namespace(cfg.max_evictions_per_namespace))
    if cfg.max_evictions_per_queue is not None:
        out.append(Budget.per_queue(cfg.max_evictions_per_queue))
    if cfg.max_gpus_disrupted_per_run is not None:
        out.append(Budget.gpus_per_run(round(cfg.max_gpus_disrupted_per_run * 1000)))
    return out


def _workload_ref(w: WorkloadRecord) -> Json:
    """An Event's involvedObject naming a workload."""
    return {
        "apiVersion": WORKLOAD_RESOURCES[w.kind].api_version,
        "kind": w.kind,
        "namespace": w.namespace,
        "name": w.name,
        "uid": w.uid,
    }


def _pod_result(r: EvictionResult) -> PodResult:
    return PodResult(r.target.namespace, r.target.name, OUTCOMES[r.outcome], r.message)


class KubeIO:
    """One descheduler's side effects on the cluster; :meth:`io` is the runner's view."""

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
        self.settle_poll = settle_poll
        self._plan_id = ""
        self.state: ClusterState | None = None
        self.evictor: Evictor | None = None
        self._pods: dict[str, PodRecord] = {}
        self._recording = False  # this run keeps a record of its evictions

    def io(self) -> RunnerIO:
        return RunnerIO(
            fetch_state=self.fetch_state,
            evict_gang=self.evict_gang,
            emit_event=self.emit_event,
            mark_moved=self.mark_moved,
            precheck=self.precheck,
            is_leader=self.is_leader,
            begin=self.begin,
            mark_room=self.mark_room,
            interrupted=self.interrupted,
            finish=self.finish,
            suspend_gang=self.suspend_gang,
            resume=self.resume,
            settle=self.settle,
        )

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
        return state

    async def begin(self, plan: Plan) -> None:
        """The Evictor for ``plan``, its limits already charged with what a run cut
        short evicted, and the run written to the ledger before anything goes."""
        assert self.state is not None
        self._plan_id = plan.plan_id
        carried = self.state.ledger.carried(plan.now, self.config.runner.interval)
        budgets = evictor_limits(self.config.limits)
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
            if m is not None and m.gang == name:
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

    # --- suspending and resuming ---------------------------------------------------------

    async def _patch_workload(self, w: WorkloadRecord, body: Json) -> None:
        await self.client.patch(
            WORKLOAD_RESOURCES[w.kind],
            w.name,
            body,
            namespace=w.namespace,
            content_type=_MERGE_PATCH,
        )

    @staticmethod
    def _switch(w: WorkloadRecord, on: bool, mark: str | None, rv: str | None) -> Json:
        """A merge patch setting the workload's suspend switch and corral's mark (None:
        removed); with ``rv`` it applies only to the version read (409 otherwise)."""
        body: Json = {}
        cur = body
        for part in w.suspend_path[:-1]:
            cur = cur.setdefault(part, {})
        cur[w.suspend_path[-1]] = on
        meta: Json = {"annotations": {ANNOTATION_SUSPENDED_BY: mark}}
        if rv:
            meta["resourceVersion"] = rv
        body["metadata"] = meta
        return body

    def _podgroup_copy(self, move: Move) -> tuple[Resource, Json] | None:
        """The live PodGroup of a moved gang, trimmed to what making it again needs."""
        if not move.podgroup:
            return None
        found = self.view.any_podgroup(f"{move.namespace}/{move.podgroup}")
        if found is None:
            return None
        r, obj = found
        meta = obj.get("metadata") or {}
        keep = {
            k: meta[k]
            for k in ("name", "namespace", "labels", "annotations", "ownerReferences")
            if meta.get(k)
        }
        ann = dict(keep.get("annotations") or {})
        ann.pop(ANNOTATION_ROOM_MADE, None)
        # made again on resume with the time of this move: the cool-down holds
        ann[ANNOTATION_LAST_MOVED] = format_time(self.clock())
        keep["annotations"] = ann
        copy: Json = {
            "apiVersion": r.api_version,
            "kind": r.kind,
            "metadata": keep,
            "spec": obj.get("spec") or {},
        }
        return r, copy

    async def suspend_gang(self, move: Move, message: str) -> Sequence[PodResult]:
        """Suspend every workload of a suspend move, each marked with
        ``corral.dev/suspended-by`` (the PodGroup it held goes into the first mark), and
        remove the gang's PodGroup, which would otherwise sit Inqueue with no pods.
        The patch carries the resourceVersion the plan read: a workload changed since
        (a person resumed or suspended it) is not touched (409)."""
        assert self.state is not None
        owners = Owners(self.state.workloads)
        records = [self.state.workloads.get(k) for k in move.workloads]
        missing = [k for k, w in zip(move.workloads, records, strict=True) if w is None]
        if missing or not records:
            why = f"workload {', '.join(missing) or '(none)'} not in the cluster state"
            return [PodResult(p.namespace, p.name, Outcome.FAILED, why) for p in move.pods]
        pg = self._podgroup_copy(move)
        now = self.clock()
        done: set[str] = set()
        failure = ""
        refused = False
        for i, w in enumerate(r for r in records if r is not None):
            held = pg[1] if pg is not None and i == 0 else None
            mark = mark_text(self._plan_id, now, move.for_gang, held)
            try:
                await self._patch_workload(w, self._switch(w, True, mark, w.resource_version))
            except REQUEST_ERRORS as e:
                failure = f"{w.describe()}: {e}"
                refused = isinstance(e, ApiError) and e.status in (404, 409)
                break
            done.add(w.key)
            await self._workload_event(w, "Normal", "Suspended", message)
        if done and pg is not None:
            r, copy = pg
            name = copy["metadata"]["name"]
            try:
                await self.client.delete(r, name, namespace=move.namespace)
            except REQUEST_ERRORS as e:  # the next run removes it (heal)
                log.warning(
                    "PodGroup %s/%s of a suspended gang not removed: %s", move.namespace, name, e
                )
        out = []
        for pm in move.pods:
            rec = self._pods.get(pm.key)
            top = owners.top_of_pod(rec)[0] if rec is not None else None
            if top is not None and top.key in done:
                out.append(
                    PodResult(pm.namespace, pm.name, Outcome.SUSPENDED, "workload suspended")
                )
            elif refused and not done:
                out.append(PodResult(pm.namespace, pm.name, Outcome.REFUSED, failure))
            else:
                out.append(
                    PodResult(pm.namespace, pm.name, Outcome.FAILED, failure or "not suspended")
                )
        return out

    async def _workload_event(
        self, w: WorkloadRecord, type_: str, reason: str, message: str
    ) -> None:
        body = event_body(
            _workload_ref(w),
            reason=reason,
            message=message,
            type_=type_,
            action="Deschedule",
            component=self.component,
        )
        error = await post_event(self.client, body)
        if error:
            log.warning("event on %s not written: %s", w.describe(), error)

    async def _apply(self, res: Resumption) -> Resumed:
        w = res.workload
        try:
            if res.action == "heal" or res.action == "resume":
                pg = res.mark.podgroup
                meta = (pg or {}).get("metadata") or {}
                key = f"{meta.get('namespace') or w.namespace}/{meta.get('name')}"
                if pg is not None and meta.get("name"):
                    found = self.view.any_podgroup(key)
                    r = next(
                        (
                            x
                            for x in PODGROUP_APIS.values()
                            if x.api_version == pg.get("apiVersion")
                        ),
                        VOLCANO_PODGROUPS,
                    )
                    if res.action == "heal" and found is not None:
                        await self.client.delete(found[0], meta["name"], namespace=w.namespace)
                    elif res.action == "resume" and found is None:
                        try:
                            await self.client.create(r, dict(pg), namespace=w.namespace)
                        except ApiError as e:
                            if e.status != 409:
                                raise
            if res.action == "resume":
                await self._patch_workload(w, self._switch(w, False, None, w.resource_version))
                text = f"corral resumed {w.describe()}: {res.reason}"
                await self._workload_event(w, "Normal", "Resumed", text)
            elif res.action == "forget":
                body: Json = {"metadata": {"annotations": {ANNOTATION_SUSPENDED_BY: None}}}
                body["metadata"]["resourceVersion"] = w.resource_version
                await self._patch_workload(w, body)
        except REQUEST_ERRORS as e:
            log.warning("%s %s: %s", res.action, w.describe(), e)
            return Resumed(w.describe(), res.action, res.reason, False, str(e))
        log.info("%s %s: %s", res.action, w.describe(), res.reason)
        return Resumed(w.describe(), res.action, res.reason)

    async def resume(self) -> list[Resumed]:
        """End the suspensions corral made that are due, and heal what a crash left."""
        assert self.state is not None
        return [await self._apply(r) for r in due_resumptions(self.state, self.config)]

    async def settle(self, plan: Plan, outcomes: Sequence[GangOutcome]) -> list[Resumed]:
        """Wait up to ``moves.resume_wait`` for the gangs room was made for, resuming the
        workloads suspended for them as they are bound (and those of defragmenting
        moves once their pods are gone); later runs resume the rest."""
        wanted = {k for o in outcomes if o.status == "suspended" for k in o.move.workloads}
        out: list[Resumed] = []
        deadline = asyncio.get_running_loop().time() + self.config.moves.resume_wait
        while wanted:
            state = await self.view.state(self.clock())
            for r in due_resumptions(state, self.config):
                if r.workload.key in wanted and r.action == "resume":
                    done = await self._apply(r)
                    out.append(done)
                    wanted.discard(r.workload.key)
            left = deadline - asyncio.get_running_loop().time()
            if not wanted or left <= 0 or self.interrupted() is not None:
                break
            await asyncio.sleep(min(self.settle_poll, left))
        return out

    # --- evicting -----------------------------------------------------------------------

    async def evict_gang(self, move: Move, message: str) -> Sequence[PodResult]:
        results = await self._evictor().evict_gang(self._targets(move), move.reason)
        return [_pod_result(r) for r in results]

    def _involved(self, event: GangEvent) -> Json:
        w = (
            self.state.workloads.get(event.workloads[0])
            if self.state is not None and event.workloads
            else None
        )
        if w is not None:
            return _workload_ref(w)
        api = event.podgroup_api or ""
        if event.podgroup and api in PODGROUP_APIS:
            r = PODGROUP_APIS[api]
            pg = (
                self.state.podgroups.get(f"{event.namespace}/{event.podgroup}")
                if self.state
                else None
            )
            return {
                "apiVersion": r.api_version,
                "kind": r.kind,
                "namespace": event.namespace,
                "name": event.podgroup,
                "uid": pg.uid if pg is not None else "",
            }
        name = event.pods[0] if event.pods else ""
        rec = self._pods.get(f"{event.namespace}/{name}")
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": event.namespace,
            "name": name,
            "uid": rec.uid if rec is not None else "",
        }

    async def emit_event(self, event: GangEvent) -> None:
        involved = self._involved(event)
        if not involved["name"]:
            return
        body = event_body(
            involved,
            reason=event.reason,
            message=event.message,
            type_=event.type,
            action="Deschedule",
            component=self.component,
        )
        error = await post_event(self.client, body)
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
