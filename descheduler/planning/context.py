"""What every strategy of one planning run shares. Its inputs, fixed when it is built
(:class:`PlanContext`, frozen): the units, who is protected, queue shares, the waiting
gangs in order, the scorer, the costs of moving pods. And the one thing the planner and
the strategies write as the run goes (:class:`PlanScratch`): the budget left, the notes,
the gangs that start now, the moves so far, the units moved and the gangs unserved."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gangplace.engine import (
    GangOptions,
    PodRecord,
    PodShape,
    Queue,
    QueueState,
    Scorer,
    Snapshot,
    WaitingGang,
    deserved_shares,
    order_waiting,
)
from gangplace.engine.checkpoints import (
    CheckpointError,
    Checkpoints,
    pod_started,
    pod_work_at_risk,
    work_at_risk,
)
from gangplace.engine.fragmentation import TargetWorkload, typical_workload
from gangplace.engine.owners import ANNOTATION_SUSPENDED_BY, WorkloadRecord, workload_key
from gangplace.engine.policies import PolicyContext, make_policy
from gangplace.engine.timeparse import format_duration, format_time

from descheduler.config import DeschedulerConfig, LimitSettings
from descheduler.planning.budget import PlanBudget
from descheduler.planning.gang_demand import Demand, demand_of, request_of
from descheduler.planning.gang_views import GangView, build_views
from descheduler.planning.move_method import Owners, Way
from descheduler.planning.plan_model import Move, MoveKind, PodMove, Unserved
from descheduler.planning.protect import gang_protection, node_protection, workload_protection
from descheduler.planning.resume import held_first, held_rooms
from descheduler.planning.state import GPU, ClusterState, EvictedPod

__all__ = [
    "PlanContext",
    "PlanScratch",
    "Victim",
    "cluster_total",
    "move_way",
    "victim_move",
    "waiting_gang",
]

# Pods of queues at or below their deserved share sort after every pod of a queue above
# it: victims come first from queues that use more than they deserve.
TIER_PENALTY = 1000.0
# A victim built without its way worked out (never moved).
NO_WAY = Way(None, "not worked out")


@dataclass(frozen=True, slots=True, eq=False)
class Victim:
    """A unit chosen to move: the whole gang, or (``partial``) members above its
    minAvailable, or a pod without a gang."""

    view: GangView
    pods: tuple[PodRecord, ...]
    partial: bool
    cost: float
    tier: int  # 0: its queue uses more than it deserves; 1: otherwise
    way: Way = NO_WAY  # how it moves (suspend or evict), or why it may not
    at_risk: float = 0.0  # GPU-hours of work a move throws away (since the last checkpoint)

    @property
    def gpu_milli(self) -> int:
        return sum(p.shape.gpu_demand_milli for p in self.pods)


def _workload(snap: Snapshot, coverage: float) -> TargetWorkload:
    """FGD's typical shapes, as every report measures them (the engine's rule)."""
    return typical_workload(snap, coverage)


def cluster_total(snap: Snapshot) -> dict[str, int]:
    """Allocatable of ready nodes in queue-share units (cpu, memory, gpu thousandths)."""
    ready = snap.ready
    out = {r: int(snap.alloc[ready, snap.res_index[r]].sum()) for r in ("cpu", "memory")}
    out[GPU] = int(snap.gpu_total[ready].sum()) * 1000
    return out


@dataclass(slots=True)
class PlanScratch:
    """What the planner and the strategies write during one run -- everything else of
    the context is fixed when it is built. :meth:`PlanContext.build` starts it with the
    budget (less what a run cut short evicted) and the notes of the build."""

    # The eviction limits and disruption budgets left (replaced while ``lifted``).
    budget: PlanBudget
    notes: list[str] = field(default_factory=list)
    # Units moved (or released) by the plan so far: never moved twice.
    moved: set[str] = field(default_factory=set)
    unserved: list[Unserved] = field(default_factory=list)
    # Set by the planner: the waiting gangs that start as things are (placed on the
    # snapshot before the strategies run), and those that cannot start now.
    started: set[str] = field(default_factory=set)
    waiting_before: list[str] = field(default_factory=list)
    # The moves of the strategies run so far, in order.
    moves: list[Move] = field(default_factory=list)
    # Set when a limit or the work-at-risk cap refused a victim since last cleared: a
    # reason naming a limit is checked by planning again without them (see ``lifted``).
    limited: bool = False
    # While True (``lifted``): the configured limits and work-at-risk caps are not applied.
    unlimited: bool = False


@dataclass(slots=True)
class _Memo:
    """Answers worked out once per run from the fixed inputs (a pod's cost and work at
    risk, a unit's way of moving): a cache, not state."""

    cost: dict[int, float] = field(default_factory=dict)
    risk: dict[int, float] = field(default_factory=dict)
    # ``way`` by unit, pods (by id) and flags: it reads only the state's workloads.
    ways: dict[tuple[str, tuple[int, ...], bool], Way] = field(default_factory=dict)

    def way(
        self,
        owners: Owners,
        suspend: bool,
        view: GangView,
        pods: Sequence[PodRecord],
        evict_only: bool,
    ) -> Way:
        whole = len(pods) == len(view.running) and len(pods) == len(view.placed)
        key = (view.key, tuple(id(p) for p in pods), whole and not evict_only)
        hit = self.ways.get(key)
        if hit is None:
            hit = self.ways[key] = owners.way(
                view.key, pods, whole=whole and not evict_only, suspend=suspend
            )
        return hit


@dataclass(frozen=True, slots=True, eq=False)
class PlanContext:
    """What every strategy of one planning run reads -- the state, the config, the units
    and their protection, the queue shares and the waiting gangs in DRF order, fixed
    when built -- and, in :attr:`scratch`, the one thing they write."""

    state: ClusterState
    config: DeschedulerConfig
    scorer: Scorer
    options: GangOptions
    views: Mapping[str, GangView]
    workload: TargetWorkload
    # Units that may not move, with why.
    protected: Mapping[str, str]
    # Gangs whose workload is suspended (by a person, Kueue or corral): not waiting.
    suspended: Mapping[str, str]
    # Pods a run cut short evicted: they count against this run's limits.
    carried: tuple[EvictedPod, ...]
    owners: Owners
    queue_states: Mapping[str, QueueState]
    overused: frozenset[str]
    # The waiting gangs, in the order they are served (DRF, held rooms first).
    demands: tuple[Demand, ...]
    scratch: PlanScratch
    _view_of: Mapping[int, GangView]
    _memo: _Memo

    @property
    def snap(self) -> Snapshot:
        return self.state.snapshot

    def released(self) -> set[str]:
        """The stale partial gangs the moves so far release."""
        return {m.unit for m in self.scratch.moves if m.kind == "release-stale"}

    def blocked(self) -> list[Demand]:
        """The waiting gangs that cannot start now, in DRF order; released stale gangs
        among them wait whole."""
        released = self.released()
        out: list[Demand] = []
        for d in self.demands:
            if d.key in released:
                whole = demand_of(d.view, whole=True)
                if whole is not None:
                    out.append(whole)
            elif d.key not in self.scratch.started:
                out.append(d)
        return out

    @property
    def now(self) -> datetime:
        return self.state.now

    @classmethod
    def build(
        cls,
        state: ClusterState,
        config: DeschedulerConfig,
        *,
        scorer: Scorer | None = None,
        workload: TargetWorkload | None = None,
    ) -> PlanContext:
        """``scorer`` and ``workload`` replace the configured scheduling policy and the
        typical shapes of the running pods (a trace replay passes its own policy and M,
        so that the plan predicts what its scheduler does)."""
        snap = state.snapshot
        views = build_views(state, config.queue_default)
        if workload is None:
            workload = _workload(snap, config.defragment.workload_coverage)
        sc = config.scheduling
        owners = Owners(state.workloads, state.kinds)
        owners.index_units((v.key, v.pods) for v in views.values())
        memo = _Memo()
        view_of: dict[int, GangView] = {}
        suspended: dict[str, str] = {}
        protected: dict[str, str] = {}
        for v in views.values():
            for p in v.pods:
                view_of[id(p)] = v
            held = owners.suspended_by(v.pods, v.podgroup)
            if held is not None:
                suspended[v.key] = _suspended_reason(held)
            why = gang_protection(v, config.eviction, state.queues, state.now)
            if why is None:
                why = workload_protection(v, state.workloads)
            if why is None and len(v.placed) != len(v.running):
                why = f"{v.describe()} runs partly on nodes missing from the snapshot"
            if why is None:
                why = node_protection(v, snap)
            if why is None and held is not None:
                why = f"{held.describe()} is suspended"
            if why is None and v.placed:
                way = memo.way(owners, config.moves.suspend, v, v.placed, False)
                if way.method is None:
                    why = way.reason.removeprefix("not movable: ")
            if why is not None:
                protected[v.key] = why
        scratch = PlanScratch(budget=PlanBudget(config.limits, state.pdbs))
        carried = state.ledger.carried(state.now, config.runner.interval)
        if carried:
            scratch.budget.carry(carried)
            run = state.ledger.run
            assert run is not None
            scratch.notes.append(
                f"{len(carried)} pod(s) evicted by run {run.plan or '?'}, cut short "
                f"(started {format_time(run.started)}), count against this run's limits"
            )
        queue_states, demands = _queues_and_demand(state, views, suspended, scratch.notes)
        return cls(
            state=state,
            config=config,
            scorer=scorer
            if scorer is not None
            else make_policy(sc.policy, PolicyContext(workload, weights=sc.weights)),
            options=GangOptions(
                fewest_nodes=sc.fewest_nodes,
                topology_key=sc.topology_key,
                best_effort=False,
                explain=False,
            ),
            views=views,
            workload=workload,
            protected=protected,
            suspended=suspended,
            carried=tuple(carried),
            owners=owners,
            queue_states=queue_states,
            overused=frozenset(q for q, st in queue_states.items() if st.overused),
            demands=tuple(demands),
            scratch=scratch,
            _view_of=view_of,
            _memo=memo,
        )

    def waiting_gang(self, d: Demand) -> WaitingGang:
        return waiting_gang(d)

    # --- who and what it costs -----------------------------------------------------------

    def view_of(self, pod: PodRecord) -> GangView:
        return self._view_of[id(pod)]

    def movable(self, view: GangView) -> bool:
        return view.key not in self.protected and view.key not in self.scratch.moved

    def pod_cost(self, pod: PodRecord) -> float:
        """Pods moved, GPU-hours of work at risk (lost when the pod restarts from its
        last checkpoint), and priority."""
        hit = self._memo.cost.get(id(pod))
        if hit is None:
            w = self.config.cost
            hit = (
                w.pod
                + w.gpu_hour * self.pod_at_risk(pod)
                + w.priority_per_1000 * max(pod.priority, 0) / 1000
            )
            self._memo.cost[id(pod)] = hit
        return hit

    def pod_at_risk(self, pod: PodRecord) -> float:
        """GPU-hours a move of ``pod`` now throws away: the engine's rule
        (:mod:`gangplace.engine.checkpoints`) over the pod's checkpoint annotations and
        its workloads'. A value that cannot be read is noted and ignored (the whole run
        since the pod started is at risk)."""
        hit = self._memo.risk.get(id(pod))
        if hit is None:
            try:
                hit = pod_work_at_risk(pod, self.now, self._workload_annotations(pod)) / 3600
            except CheckpointError as e:
                note = f"{e}: read as no checkpoint (the whole run is at risk)"
                if note not in self.scratch.notes:
                    self.scratch.notes.append(note)
                gpus = pod.shape.gpu_demand_milli / 1000.0
                hit = work_at_risk(gpus, pod_started(pod), self.now, Checkpoints()) / 3600
            self._memo.risk[id(pod)] = hit
        return hit

    def _workload_annotations(self, pod: PodRecord) -> list[tuple[str, Mapping[str, str]]]:
        """``(who, annotations)`` of the workloads that own ``pod``, nearest first."""
        out: list[tuple[str, Mapping[str, str]]] = []
        kind, name = pod.owner_kind, pod.owner_name
        workloads = self.state.workloads
        while kind and name and len(out) < 8:
            w = workloads.get(workload_key(pod.namespace, kind, name))
            if w is None:
                break
            out.append((w.describe(), w.annotations))
            kind, name = w.owner_kind, w.owner_name
        return out

    def at_risk(self, pods: Sequence[PodRecord]) -> float:
        """GPU-hours a move of ``pods`` throws away."""
        return sum(self.pod_at_risk(p) for p in pods)

    def risk_cap(self, defragmenting: bool = False) -> float | None:
        """The most GPU-hours at risk one moved unit may have (None: no cap)."""
        caps = [self.config.moves.max_gpu_hours_at_risk]
        if defragmenting:
            caps.append(self.config.defragment.max_gpu_hours_at_risk)
        known = [c for c in caps if c is not None]
        return min(known) if known else None

    def risk_refusal(self, v: Victim, defragmenting: bool = False) -> str | None:
        """Why ``v`` has too much work at risk to move, or None."""
        cap = None if self.scratch.unlimited else self.risk_cap(defragmenting)
        if cap is None or v.at_risk <= cap:
            return None
        key = (
            "defragment.max_gpu_hours_at_risk"
            if defragmenting and cap == self.config.defragment.max_gpu_hours_at_risk
            else "moves.max_gpu_hours_at_risk"
        )
        return (
            f"{v.view.describe()} has {v.at_risk:.1f} GPU-hours of work at risk (done since "
            f"its last checkpoint), above {key} ({cap:g})"
        )

    def tier(self, view: GangView) -> int:
        return 0 if view.queue in self.overused else 1

    def way(self, view: GangView, pods: Sequence[PodRecord], *, evict_only: bool = False) -> Way:
        """How ``pods`` of ``view`` may move (see :mod:`descheduler.planning.move_method`)."""
        return self._memo.way(self.owners, self.config.moves.suspend, view, pods, evict_only)

    def victim(
        self,
        view: GangView,
        pods: Sequence[PodRecord] | None = None,
        *,
        evict_only: bool = False,
    ) -> Victim:
        """``view`` whole (``pods`` None) or only ``pods``, which must number at most
        its members above minAvailable. ``evict_only``: never by suspending (a stale
        gang released to start again whole)."""
        chosen = tuple(view.placed) if pods is None else tuple(pods)
        partial = pods is not None and len(chosen) < len(view.running)
        if partial and len(chosen) > view.extras:
            raise ValueError(f"{view.describe()}: {len(chosen)} members exceed its extras")
        return Victim(
            view,
            chosen,
            partial,
            sum(self.pod_cost(p) for p in chosen),
            self.tier(view),
            self.way(view, chosen, evict_only=evict_only),
            self.at_risk(chosen),
        )

    def refusal(self, pods: Sequence[PodRecord], queue: str) -> str | None:
        budget = self.scratch.budget
        why = budget.limit_reason(pods, queue)
        if why is not None:
            self.scratch.limited = True
            return why
        return budget.pdb_reason(pods, queue)

    def victim_refusal(
        self, v: Victim, *, defragmenting: bool = False, capped: bool = True
    ) -> str | None:
        """Why ``v`` may not move now: no safe way, too much work at risk, or a limit
        or disruption budget. ``capped=False``: its work at risk is not asked (a stale
        partial gang has not started its work)."""
        if v.way.method is None:
            return f"{v.view.describe()}: {v.way.reason}"
        why = self.risk_refusal(v, defragmenting) if capped else None
        if why is not None:
            self.scratch.limited = True
            return why
        return self.refusal(v.pods, v.view.queue)

    @contextmanager
    def lifted(self) -> Iterator[None]:
        """Plan as if the configured limits and work-at-risk caps were lifted (the
        disruption budgets and every other rule hold): whether lifting them would have
        produced a move. The budget used so far is kept; it is restored after."""
        run = self.scratch
        budget, unlimited, limited = run.budget, run.unlimited, run.limited
        free = PlanBudget(_NO_LIMITS, self.state.pdbs)
        free.pdbs.used = budget.pdbs.used.copy()
        run.budget, run.unlimited = free, True
        try:
            yield
        finally:
            run.budget, run.unlimited, run.limited = budget, unlimited, limited

    def may_move_for(self, view: GangView, d: Demand | None) -> str | None:
        """Why ``view`` may not be moved for the waiting gang ``d`` (None: to
        defragment), or None when it may. The one rule every strategy asks.

        Never a higher priority for a lower one. An equal priority only under
        ``LowerOrEqualPriority``, and then only as a consolidation: the plan must place
        the moved gang again at once (checked on the plan's final snapshot, see
        ``planner._settle``), and never a gang that started on room made for it within
        the cool-down -- so two gangs of one priority cannot take turns evicting each
        other. Defragmenting moves a unit for no one, placing it again at once: priority
        only orders it."""
        if d is None:
            return None
        mine, theirs = view.priority, d.view.priority
        if mine > theirs:
            return f"{view.describe()} has priority {mine}, higher than {theirs} of {d.key}"
        if mine < theirs:
            return None
        if self.config.eviction.victim_priority == "LowerPriority":
            return f"{view.describe()} has priority {mine}, not lower than {theirs} of {d.key}"
        kept = self.room_kept(view)
        if kept is not None:
            return f"{view.describe()} has the priority of {d.key} ({mine}) and {kept}"
        return None

    def room_kept(self, view: GangView) -> str | None:
        """Why a gang of ``view``'s own priority may not have it moved now: room was made
        for it within the cool-down (so two gangs never take turns moving each other)."""
        cooldown = self.config.eviction.cooldown
        if view.room_made is None or cooldown <= 0:
            return None
        since = (self.now - view.room_made).total_seconds()
        if since >= cooldown:
            return None
        return (
            f"room was made for it {format_duration(max(since, 0))} ago: a gang of its own "
            f"priority does not take it back within the cool-down ({format_duration(cooldown)})"
        )

    def consolidation(self, victim_priority: int, for_gang: str | None) -> bool:
        """A move of a gang of ``victim_priority`` for ``for_gang`` that is allowed only
        when the plan places the moved gang again at once: an equal priority."""
        if for_gang is None or for_gang not in self.views:
            return False
        return victim_priority >= self.views[for_gang].priority


def waiting_gang(d: Demand) -> WaitingGang:
    """``d`` as the engine's DRF order reads a waiting gang."""
    created = format_time(d.view.created) if d.view.created else ""
    return WaitingGang(d.key, d.view.queue, d.request, d.view.priority, created)


def _queues_and_demand(
    state: ClusterState,
    views: Mapping[str, GangView],
    suspended: Mapping[str, str],
    notes: list[str],
) -> tuple[dict[str, QueueState], list[Demand]]:
    """The queues' deserved shares, and the waiting gangs in the order they are served
    (DRF, a gang whose capacity room is held ahead of those of its priority or lower);
    a note per held room."""
    queues: dict[str, Queue] = dict(state.queues)
    per_shape: Counter[tuple[str, PodShape]] = Counter()
    demands: list[Demand] = []
    for v in views.values():
        if v.queue not in queues:
            queues[v.queue] = Queue(v.queue)
        for p in v.pods:
            if p.node >= 0:
                per_shape[(v.queue, p.shape)] += 1
        if v.is_gang and v.key not in suspended:
            d = demand_of(v)
            if d is not None:
                demands.append(d)
    allocated: dict[str, dict[str, int]] = {}
    for (q, shape), n in per_shape.items():
        alloc = allocated.setdefault(q, {})
        for r, x in request_of([shape]).items():
            alloc[r] = alloc.get(r, 0) + x * n
    total = cluster_total(state.snapshot)
    waiting = [waiting_gang(d) for d in demands]
    queue_states = deserved_shares(queues.values(), total, allocated, waiting)
    by_key = {d.key: d for d in demands}
    ordered = order_waiting(waiting, queue_states, total)
    # a gang whose capacity room is held goes ahead of those of its priority or lower
    held = held_rooms(state, views)
    for key, (prio, until) in sorted(held.items()):
        notes.append(
            f"room held for {key} (priority {prio}) until {format_time(until)} "
            "(capacity_room.hold_for): planned for it ahead of waiting gangs of its "
            "priority or lower; corral resumes none of lower priority it suspended"
        )
    return queue_states, held_first([by_key[w.name] for w in ordered], held)


_NO_LIMITS = LimitSettings(
    max_evictions_per_run=None,
    max_evictions_per_node=None,
    max_evictions_per_namespace=None,
    max_evictions_per_queue=None,
    max_gpus_disrupted_per_run=None,
)


def _suspended_reason(w: WorkloadRecord) -> str:
    if ANNOTATION_SUSPENDED_BY in w.annotations:
        return f"{w.describe()} is suspended by corral: it waits to be resumed"
    return f"{w.describe()} is suspended (not by corral): it is not waiting"


def victim_move(
    v: Victim,
    targets: Mapping[int, tuple[str, tuple[int, ...]]],
    *,
    kind: MoveKind,
    partial: bool,
    reason: str,
    for_gang: str | None = None,
    gain_gpus: float = 0.0,
) -> Move:
    """The move of victim ``v`` to ``targets`` (node and devices by pod id): one builder
    for every strategy that moves running pods somewhere."""
    pg = v.view.podgroup
    return Move(
        kind=kind,
        unit=v.view.key,
        namespace=v.view.namespace,
        gang=v.view.gang_name,
        queue=v.view.queue,
        pods=[
            PodMove(
                p.namespace,
                p.name,
                p.uid,
                p.node_name,
                targets[id(p)][0],
                p.shape.gpu_demand_milli,
                targets[id(p)][1],
            )
            for p in v.pods
        ],
        partial=partial,
        cost=v.cost,
        reason=reason,
        for_gang=for_gang,
        gain_gpus=gain_gpus,
        at_risk=v.at_risk,
        podgroup=pg.name if pg is not None else None,
        podgroup_api=pg.api_group if pg is not None else None,
        **move_way(v),
    )


def move_way(v: Victim) -> dict[str, Any]:
    """The fields of a :class:`~descheduler.planning.plan_model.Move` that say how ``v`` moves."""
    assert v.way.method is not None, "a victim without a safe way is never moved"
    return {
        "method": v.way.method,
        "priority": v.view.priority,
        "workloads": [w.key for w in v.way.workloads],
        "how": v.way.reason,
    }
