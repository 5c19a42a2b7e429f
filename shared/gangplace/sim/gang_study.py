"""The gang deadlock study: multi-pod jobs placed pod by pod versus all or nothing.

Jobs arrive (Poisson) and each needs all its pods running before it can start; it then
runs for an exponential time and all its pods leave. *Pod by pod* is the default
scheduler's way: each pod is bound as soon as it fits, so a job can hold part of its
GPUs while it waits for the rest -- and when two such jobs wait on each other, they
wait for ever. *All or nothing* asks the engine's :func:`place_gang`: a job binds every
pod at once or none. Waiting work is retried in arrival order whenever resources free
up (later work may start first if it fits: backfill).

Per load the study reports the jobs that started, the jobs stuck partly placed at the
end, the GPUs partly placed jobs hold (time-averaged, % of capacity), the GPUs doing
useful work (running jobs, time-averaged %) and the mean wait of every job (one never
started waits till the end of the run). Pure:
the caller provides the snapshot and the job templates.

A descheduler can join a run (:func:`run_detailed`): a :class:`DeschedulerHook` is called
every ``interval`` of simulated time with the cluster as it is (:class:`StudyState`) and
returns :class:`JobMove` s. A suspended job leaves whole and queues again once the job it
made room for starts (or after ``resume_after``); an evicted pod leaves and its job, if
it ran, starts over once it is whole again (a data-parallel job restarts when a worker
goes). The work a moved job did since it started -- or since its last checkpoint -- is
lost and counted. Between the moves and the binding of the job they made room for,
another job may take the freed GPUs: the run counts how often ("room taken"), and with
``hold_room`` it keeps them for that job until it binds or the next round; with
``hold_higher`` too, a job of higher priority than the room's may still take it (the
kube-scheduler's rule for a nominated pod's room, ``capacity_room.nominate``: held against
every job of its priority or lower).
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from gangplace.engine.gang import Gang, GangOptions, place_gang
from gangplace.engine.model import PodShape
from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.scoring import BinpackScorer, Scorer
from gangplace.engine.single_pod import place_pod
from gangplace.engine.snapshot import Snapshot

__all__ = [
    "HIGH_PRIORITY",
    "LENGTHS",
    "MODES",
    "DeschedulerHook",
    "DetailedResult",
    "JobMove",
    "JobTemplate",
    "LoadResult",
    "StudyJob",
    "StudyState",
    "jobs_from_pods",
    "percentile",
    "run_detailed",
    "run_load",
    "run_study",
]

MODES = ("pod-by-pod", "all-or-nothing")
LENGTHS = ("exp", "lognormal")
# The lognormal run lengths' sigma: a coefficient of variation of about 2.9 (exponential:
# 1), most jobs far shorter than the mean and a few many times longer.
LOGNORMAL_SIGMA = 1.5


@dataclass(frozen=True, slots=True)
class JobTemplate:
    """``size`` pods of ``shape`` that must all run for the job to start."""

    shape: PodShape
    size: int

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"job size must be >= 1, got {self.size}")

    @property
    def gpu_milli(self) -> int:
        return self.shape.gpu_demand_milli * self.size


def jobs_from_pods(
    shapes: Sequence[PodShape], size: int | None = None, split: bool = False
) -> list[JobTemplate]:
    """Jobs from the trace's multi-GPU pods: a pod with k GPUs becomes a job of k
    workers shaped like that pod (a data-parallel job whose every worker holds k
    GPUs). ``size`` fixes the worker count instead; ``split`` makes each worker one GPU
    with 1/k of the pod's CPU and memory (rounded up)."""
    out: list[JobTemplate] = []
    for s in shapes:
        if s.gpu_count < 2 or s.gpu_milli < 1000:
            continue
        k = s.gpu_count
        worker = s
        if split:
            req = {r: -(-v // k) for r, v in s.requests if r != "pods"}
            worker = PodShape.of(req, gpus=1, gpu_models=s.gpu_models)
        out.append(JobTemplate(worker, size or k))
    return out


# What a hook may do with a job: suspend it (whole) or evict some of its pods.
MoveMethod = Literal["suspend", "evict"]

# The priority of the jobs ``high_share`` picks (the rest have 0).
HIGH_PRIORITY = 1000

# Event kinds, in the order a tie at one instant is broken by (seq first, then these).
_ARRIVE, _FINISH, _TICK, _RESUME, _WARM = 0, 1, 2, 3, 4


@dataclass(frozen=True, slots=True)
class StudyJob:
    """A job as a hook sees it: ``pods`` are its bound pods (records of the study's
    snapshot); ``run_start`` is when its current run began (-1 while it waits)."""

    id: int
    template: JobTemplate
    arrival: float
    run_start: float
    pods: tuple[PodRecord, ...]
    priority: int = 0
    queue: int = 0  # the team: its namespace and queue

    @property
    def name(self) -> str:
        return f"job{self.id}"


@dataclass(frozen=True, slots=True)
class StudyState:
    """The cluster at one round: ``snap`` is the study's own (a hook reads it and leaves
    it as it found it), ``waiting`` in arrival order (some may hold part of their pods),
    ``now`` in mean job lengths; ``checkpoint``: every running job keeps its work every
    that many job lengths from its start (None: it does not)."""

    now: float
    snap: Snapshot
    scorer: Scorer
    running: tuple[StudyJob, ...]
    waiting: tuple[StudyJob, ...]
    checkpoint: float | None = None


@dataclass(frozen=True, slots=True)
class JobMove:
    """Move ``pods`` (pod names) of job ``job``. ``suspend``: every pod of the job; it
    queues again once ``for_job`` starts, or ``resume_after`` job lengths later.
    ``evict``: those pods go and are made again pending at once."""

    job: int
    pods: tuple[str, ...]
    method: MoveMethod
    for_job: int | None = None
    resume_after: float = 0.0


class DeschedulerHook(Protocol):
    """A descheduler run every ``interval`` job lengths; ``refusals`` counts, by reason,
    the moves it would have liked to make and its rules refused."""

    interval: float
    refusals: Counter[str]

    def __call__(self, state: StudyState) -> Sequence[JobMove]: ...


@dataclass(slots=True)
class _Job:
    id: int
    template: JobTemplate
    arrival: float
    duration: float
    pods: list[PodRecord] = field(default_factory=list)  # bound pods
    start: float = -1.0  # first start
    run_start: float = -1.0  # start of the current run; -1 while not running
    done: float = 0.0  # work kept through moves (checkpoints)
    runs: int = 0  # bumped on every start and move: older completion events are void
    named: int = 0  # pods ever made (names stay unique after evictions)
    held_for: int | None = None  # suspended for this job
    moves: int = 0
    priority: int = 0
    queue: int = 0

    @property
    def order(self) -> tuple[int, float]:
        """The scheduler's queue order: higher priority first, then arrival."""
        return (-self.priority, self.arrival)

    def view(self) -> StudyJob:
        return StudyJob(
            self.id,
            self.template,
            self.arrival,
            self.run_start,
            tuple(self.pods),
            self.priority,
            self.queue,
        )


@dataclass(slots=True)
class _Room:
    """GPUs a round freed for one waiting job, until it binds or the next round."""

    devices: set[tuple[int, int]]
    # Placeholders on the freed devices (hold_room), with where they sit.
    holds: list[tuple[PodRecord, int, tuple[int, ...]]] = field(default_factory=list)
    holding: bool = False


@dataclass(frozen=True, slots=True)
class LoadResult:
    mode: str
    load_pct: int
    jobs: int
    started: int
    stuck_partial: int
    partial_gpu_pct: float  # GPUs held by partly placed jobs, time-averaged, % capacity
    busy_gpu_pct: float  # GPUs of running jobs, time-averaged, % of capacity
    mean_wait: float  # every job (one never started: till the end), in mean job durations

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "load_pct": self.load_pct,
            "jobs": self.jobs,
            "started": self.started,
            "stuck_partial": self.stuck_partial,
            "partial_gpu_pct": self.partial_gpu_pct,
            "busy_gpu_pct": self.busy_gpu_pct,
            "mean_wait": self.mean_wait,
        }


@dataclass(frozen=True, slots=True)
class DetailedResult:
    """One run with a descheduler (or none). Times in mean job lengths; GPU figures in %
    of the run's capacity (the GPUs the mix can use); ``offered_pct`` is the GPU time
    the arrived jobs asked for, against that capacity over the run. ``lost_gpu`` is GPU
    x job lengths of work thrown away by moves, ``lost_pct`` that as % of the GPU time
    running jobs used (``busy`` counts it; ``useful`` does not). Rooms: a round's moves
    made for one waiting job, and whether it bound (``reached``), another job took the
    freed GPUs first (``taken``) or neither happened before the next round (``unused``).

    Waits count every job: one never started waited from its arrival to the end of the
    run (a lower bound). ``gang``: jobs of several pods; ``single``: one pod.
    ``p95_wait_half``: the p95 wait of the same run cut at half its length (the jobs
    come the same way), so that a queue that grows shows as p95_wait well above it."""

    label: str
    mode: str
    load_pct: int
    seed: int
    jobs: int
    started: int
    stuck_partial: int
    partial_gpu_pct: float
    busy_gpu_pct: float
    useful_gpu_pct: float  # busy less the work moves threw away
    held_gpu_pct: float  # GPUs kept idle for a room (hold_room), time-averaged
    mean_wait: float
    p95_wait: float
    pods_moved: int
    jobs_moved: int
    lost_gpu: float
    lost_pct: float
    rooms_made: int
    rooms_reached: int
    rooms_taken: int
    rooms_unused: int
    rounds: int
    refusals: Mapping[str, int]
    offered_pct: float = 0.0
    never_started: int = 0
    gangs: int = 0
    # None: no job of that kind came
    mean_wait_gang: float | None = None
    p95_wait_gang: float | None = None
    mean_wait_single: float | None = None
    p95_wait_single: float | None = None
    p95_wait_half: float | None = None
    length: float = 0.0  # the run's length in mean job lengths

    def load_result(self) -> LoadResult:
        return LoadResult(
            self.mode,
            self.load_pct,
            self.jobs,
            self.started,
            self.stuck_partial,
            self.partial_gpu_pct,
            self.busy_gpu_pct,
            self.mean_wait,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in self.__slots__}
        out["refusals"] = dict(sorted(self.refusals.items(), key=lambda kv: (-kv[1], kv[0])))
        return out


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (NaN for no values)."""
    if not values:
        return math.nan
    xs = sorted(values)
    return xs[max(0, math.ceil(q / 100 * len(xs)) - 1)]


class _Sim:
    def __init__(
        self,
        snap: Snapshot,
        mode: str,
        scorer: Scorer | None,
        *,
        hold_room: bool = False,
        hold_higher: bool = False,
        checkpoint: float | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.snap, self.mode = snap, mode
        self.scorer: Scorer = scorer or BinpackScorer()
        self.capacity = int(snap.gpu_total.sum()) * 1000
        self.waiting: list[_Job] = []  # arrival order
        self.partial_milli = 0  # GPU held by jobs not yet started
        self.busy_milli = 0  # GPU held by running jobs
        self.held_milli = 0  # GPU kept for rooms
        self.area_partial = 0.0
        self.area_busy = 0.0
        self.area_held = 0.0
        self.now = 0.0
        self.seq = 0
        self.events: list[tuple[float, int, int, _Job | None, int]] = []
        self.hold_room = hold_room
        self.hold_higher = hold_higher
        self.checkpoint = checkpoint
        self.jobs: dict[int, _Job] = {}
        self.running: dict[int, _Job] = {}
        self.held: dict[int, _Job] = {}  # suspended jobs waiting to queue again
        self.rooms: dict[int, _Room] = {}
        self.pods_moved = 0
        self.lost = 0.0  # GPU milli x job lengths
        self.rooms_made = self.rooms_reached = self.rooms_taken = self.rooms_unused = 0

    def advance(self, t: float) -> None:
        dt = t - self.now
        self.area_partial += dt * self.partial_milli
        self.area_busy += dt * self.busy_milli
        self.area_held += dt * self.held_milli
        self.now = t

    def push(self, t: float, kind: int, job: _Job | None, run: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, job, run))

    def _start(self, job: _Job) -> None:
        self.partial_milli -= job.template.gpu_milli
        self.busy_milli += job.template.gpu_milli
        if job.start < 0:
            job.start = self.now
        job.run_start = self.now
        job.runs += 1
        self.running[job.id] = job
        self.push(self.now + job.duration - job.done, _FINISH, job, job.runs)
        room = self.rooms.pop(job.id, None)
        if room is not None:
            self.rooms_reached += 1
            self._drop_holds(room)
        for other in [j for j in self.held.values() if j.held_for == job.id]:
            self._requeue(other)

    def _record(self, job: _Job) -> PodRecord:
        rec = PodRecord(
            "study", f"job{job.id}-{job.named}", job.template.shape, priority=job.priority
        )
        job.named += 1
        return rec

    def _bound(self, job: _Job, rec: PodRecord) -> None:
        job.pods.append(rec)
        self.partial_milli += rec.shape.gpu_demand_milli
        if self.rooms and rec.gpus:
            mine = {(rec.node, g) for g in rec.gpus}
            for jid in [k for k, r in self.rooms.items() if k != job.id and r.devices & mine]:
                self.rooms_taken += 1
                self._drop_holds(self.rooms.pop(jid))

    def _bind(self, job: _Job, node: int, gpus: tuple[int, ...]) -> None:
        rec = self._record(job)
        self.snap.place(rec.shape, node, gpus, pod=rec)
        self._bound(job, rec)

    def _try_pods(self, job: _Job, failed: set[PodShape]) -> bool:
        shape = job.template.shape
        while len(job.pods) < job.template.size:
            if shape in failed:
                return False
            rec = PodRecord("study", f"job{job.id}-{job.named}", shape, priority=job.priority)
            if place_pod(self.snap, shape, self.scorer, rec) is None:
                failed.add(shape)
                return False
            job.named += 1
            self._bound(job, rec)
        return True

    def _try_gang(self, job: _Job, failed: dict[PodShape, int]) -> bool:
        t = job.template
        need = t.size - len(job.pods)
        if failed.get(t.shape, 1 << 30) <= need:
            return False
        res = place_gang(
            self.snap,
            Gang.uniform(f"job{job.id}", t.shape, need),
            self.scorer,
            GangOptions(best_effort=False, dry_run=True, explain=False),
        )
        if not res.ok:
            failed[t.shape] = min(failed.get(t.shape, 1 << 30), need)
            return False
        for a in res.assignments:
            self._bind(job, a.node, a.gpus)
        return True

    def _try(self, job: _Job, pod_failed: set[PodShape], gang_failed: dict[PodShape, int]) -> bool:
        if self.mode == "pod-by-pod":
            return self._try_pods(job, pod_failed)
        return self._try_gang(job, gang_failed)

    def try_waiting(self, jobs: Sequence[_Job]) -> None:
        pod_failed: set[PodShape] = set()
        gang_failed: dict[PodShape, int] = {}
        started: set[int] = set()
        if self.hold_room and self.rooms:
            # The job a room was kept for is tried first, on its room (a nominated pod).
            for jid in sorted(self.rooms, key=lambda k: self.jobs[k].order):
                job = self.jobs[jid]
                if not any(j.id == jid for j in self.waiting):
                    continue
                room = self.rooms[jid]
                self._drop_holds(room)
                if self._try(job, set(), {}):
                    started.add(job.id)
                    self._start(job)
                else:
                    self._hold(room)
        for job in jobs:
            if job.id in started:
                continue
            lifted = self._lift_holds(job)
            ok = self._try(job, set(), {}) if lifted else self._try(job, pod_failed, gang_failed)
            for room in lifted:
                if any(r is room for r in self.rooms.values()):  # not taken
                    self._hold(room)
            if ok:
                started.add(job.id)
                self._start(job)
        if started:
            self.waiting = [j for j in self.waiting if j.id not in started]

    def release(self, job: _Job) -> None:
        for p in job.pods:
            self.snap.remove(p)
        job.pods = []
        job.run_start = -1.0
        self.busy_milli -= job.template.gpu_milli
        del self.running[job.id]

    # --- a descheduler's rounds -----------------------------------------------------------

    def state(self) -> StudyState:
        return StudyState(
            self.now,
            self.snap,
            self.scorer,
            tuple(j.view() for j in sorted(self.running.values(), key=lambda j: j.id)),
            tuple(j.view() for j in self.waiting),
            self.checkpoint,
        )

    def _requeue(self, job: _Job) -> None:
        """Into the queue, in the scheduler's order."""
        self.held.pop(job.id, None)
        job.held_for = None
        keys = [j.order for j in self.waiting]
        self.waiting.insert(bisect.bisect_right(keys, job.order), job)

    def _stop(self, job: _Job) -> None:
        """A running job loses the work since its start (or its last checkpoint)."""
        elapsed = self.now - job.run_start
        kept = 0.0
        if self.checkpoint:
            kept = math.floor(elapsed / self.checkpoint) * self.checkpoint
        job.done += kept
        self.lost += (elapsed - kept) * job.template.gpu_milli
        self.busy_milli -= job.template.gpu_milli
        self.partial_milli += job.template.gpu_milli
        job.run_start = -1.0
        job.runs += 1
        del self.running[job.id]

    def apply(self, moves: Sequence[JobMove]) -> None:
        freed: dict[int, set[tuple[int, int]]] = {}
        shapes: dict[int, list[tuple[PodShape, int, tuple[int, ...]]]] = {}
        for m in moves:
            job = self.jobs.get(m.job)
            if job is None:
                raise ValueError(f"move of job {m.job}: no such job")
            by_name = {p.name: p for p in job.pods}
            pods = [by_name[n] for n in m.pods if n in by_name]
            if len(pods) != len(m.pods) or not pods:
                raise ValueError(f"move of job{m.job}: pods {list(m.pods)} are not all bound")
            if m.method == "suspend" and len(pods) != len(job.pods):
                raise ValueError(f"suspend of job{m.job}: every pod of a job goes")
            if job.id in self.running:
                self._stop(job)
            else:
                self.waiting = [j for j in self.waiting if j.id != job.id]
            for p in pods:
                if m.for_job is not None:
                    freed.setdefault(m.for_job, set()).update((p.node, g) for g in p.gpus)
                    shapes.setdefault(m.for_job, []).append((p.shape, p.node, p.gpus))
                self.snap.remove(p)
                self.partial_milli -= p.shape.gpu_demand_milli
                job.pods.remove(p)
            self.pods_moved += len(pods)
            job.moves += 1
            if m.method == "suspend" and m.for_job is not None and m.for_job in self.jobs:
                job.held_for = m.for_job
                self.held[job.id] = job
                self.push(self.now + m.resume_after, _RESUME, job, job.runs)
            else:
                self._requeue(job)
        for jid, devices in freed.items():
            room = _Room(devices)
            self.rooms_made += 1
            if self.hold_room:
                for k, (shape, node, gpus) in enumerate(shapes[jid]):
                    room.holds.append((PodRecord("study", f"hold-job{jid}-{k}", shape), node, gpus))
                self._hold(room)
            self.rooms[jid] = room

    def _lift_holds(self, job: _Job) -> list[_Room]:
        """With ``hold_higher``: the rooms held for jobs of lower priority than ``job``,
        their placeholders lifted so that it may take them."""
        if not self.hold_higher:
            return []
        out = []
        for jid, room in self.rooms.items():
            if room.holding and jid != job.id and self.jobs[jid].priority < job.priority:
                self._drop_holds(room)
                out.append(room)
        return out

    def _drop_holds(self, room: _Room) -> None:
        if not room.holding:
            return
        for rec, _, _ in room.holds:
            self.snap.remove(rec)
            self.held_milli -= rec.shape.gpu_demand_milli
        room.holding = False

    def _hold(self, room: _Room) -> None:
        if room.holding:
            return
        for rec, node, gpus in room.holds:
            self.snap.place(rec.shape, node, gpus, pod=rec)
            self.held_milli += rec.shape.gpu_demand_milli
        room.holding = True

    def close_rooms(self) -> None:
        """A new round: rooms whose job neither bound nor lost them went unused."""
        for room in self.rooms.values():
            self.rooms_unused += 1
            self._drop_holds(room)
        self.rooms.clear()


def run_load(
    snap: Snapshot,
    templates: Sequence[JobTemplate],
    load: float,
    mode: str,
    *,
    scorer: Scorer | None = None,
    jobs: int = 1000,
    seed: int = 1,
) -> LoadResult:
    """One run: ``jobs`` jobs at offered ``load`` (fraction of GPU capacity) in ``mode``.

    ``snap`` is changed in place (use a fresh one per run). Time is in mean job
    durations; arrivals are Poisson at the rate that offers ``load``.
    """
    return run_detailed(
        snap, templates, load, mode, scorer=scorer, jobs=jobs, seed=seed
    ).load_result()


@dataclass(frozen=True, slots=True)
class _Counts:
    """The run's counters at one time (the figures leave out the warm-up's)."""

    lost: float
    pods_moved: int
    rooms_made: int
    rooms_reached: int
    rooms_taken: int
    rooms_unused: int
    rounds: int

    @classmethod
    def of(cls, sim: _Sim, rounds: int) -> _Counts:
        return cls(
            sim.lost,
            sim.pods_moved,
            sim.rooms_made,
            sim.rooms_reached,
            sim.rooms_taken,
            sim.rooms_unused,
            rounds,
        )


def _lengths(kind: str, rnd: random.Random) -> Callable[[], float]:
    """Run lengths of mean 1: exponential, or lognormal with sigma LOGNORMAL_SIGMA (a
    heavy tail: most jobs short, a few very long, as the traces' durations are)."""
    if kind == "exp":
        return lambda: rnd.expovariate(1.0)
    if kind == "lognormal":
        mu = -(LOGNORMAL_SIGMA**2) / 2
        return lambda: rnd.lognormvariate(mu, LOGNORMAL_SIGMA)
    raise ValueError(f"run lengths must be one of {', '.join(LENGTHS)}, got {kind!r}")


def _waits(jobs: Sequence[_Job], until: float) -> list[float]:
    """Each job's wait as seen at ``until``; one not started by then counts till then."""
    out = []
    for j in jobs:
        if j.arrival > until:
            continue
        out.append(j.start - j.arrival if 0 <= j.start <= until else until - j.arrival)
    return out


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def _mean_or_none(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 3) if xs else None


def _p95_or_none(xs: Sequence[float]) -> float | None:
    return round(percentile(xs, 95), 3) if xs else None


def run_detailed(
    snap: Snapshot,
    templates: Sequence[JobTemplate],
    load: float,
    mode: str,
    *,
    weights: Sequence[float] | None = None,
    hook: DeschedulerHook | None = None,
    hold_room: bool = False,
    hold_higher: bool = False,
    checkpoint: float | None = None,
    high_share: float = 0.0,
    queues: int = 1,
    lengths: str = "exp",
    capacity_gpus: int | None = None,
    length: float | None = None,
    warmup: float = 0.0,
    label: str | None = None,
    scorer: Scorer | None = None,
    jobs: int = 1000,
    seed: int = 1,
) -> DetailedResult:
    """:func:`run_load` with a descheduler ``hook`` run every ``hook.interval`` (the
    same arrivals as without one), and the figures of its moves. ``weights``: how often
    each template comes (None: equally). ``checkpoint``: jobs keep their work every that
    many job lengths (None: a moved job starts over). ``high_share``: that share of the
    jobs (drawn apart from the arrivals, so these stay the same) has a higher priority;
    the scheduler takes waiting jobs by priority, then arrival (as Volcano's priority
    plugin orders jobs), and preempts nobody. ``queues``: jobs belong to that many
    teams (drawn apart too). ``lengths``: run lengths, ``exp`` or ``lognormal``.
    ``capacity_gpus``: the GPUs the load is offered against (default: all of the
    cluster's). ``length``: jobs arrive for that many job lengths (else ``jobs`` come).
    ``warmup``: the figures leave out the first that many job lengths (the cluster
    starts empty), and the jobs that arrived in them; the hook's rounds start after it,
    so every mode starts measuring from the same cluster."""
    if not templates:
        raise ValueError("no job templates (the pod list has no multi-GPU pods?)")
    if weights is not None and (len(weights) != len(templates) or not all(w > 0 for w in weights)):
        raise ValueError("weights: one positive weight per template")
    if not 0 < load <= 2:
        raise ValueError(f"load must be in (0, 2], got {load}")
    if hook is not None and not hook.interval > 0:
        raise ValueError(f"the descheduler's interval must be > 0, got {hook.interval}")
    if checkpoint is not None and not checkpoint > 0:
        raise ValueError(f"checkpoint must be > 0 job lengths, got {checkpoint}")
    if not 0 <= high_share <= 1:
        raise ValueError(f"high_share must be in [0, 1], got {high_share}")
    if queues < 1:
        raise ValueError(f"queues must be >= 1, got {queues}")
    if length is not None and not length > 0:
        raise ValueError(f"length must be > 0 job lengths, got {length}")
    if not 0 <= warmup < (length if length is not None else math.inf):
        raise ValueError(f"warmup must be in [0, length), got {warmup}")
    sim = _Sim(
        snap, mode, scorer, hold_room=hold_room, hold_higher=hold_higher, checkpoint=checkpoint
    )
    if capacity_gpus is not None:
        if capacity_gpus < 1:
            raise ValueError(f"capacity_gpus must be >= 1, got {capacity_gpus}")
        sim.capacity = capacity_gpus * 1000
    if sim.capacity == 0:
        raise ValueError("the cluster has no GPUs")
    rnd = random.Random(seed)
    ranks = random.Random(f"priority-{seed}")
    teams = random.Random(f"queue-{seed}")
    duration = _lengths(lengths, rnd)
    if weights is None:
        mean_gpu = sum(t.gpu_milli for t in templates) / len(templates)
    else:
        mean_gpu = sum(w * t.gpu_milli for w, t in zip(weights, templates, strict=True))
        mean_gpu /= sum(weights)
    rate = load * sim.capacity / mean_gpu  # jobs per mean duration
    t = 0.0
    all_jobs: list[_Job] = []
    i = 0
    while True:
        gap = rnd.expovariate(rate)
        if length is None and i >= jobs:
            break
        if length is not None and t + gap > length:
            break
        t += gap
        template = rnd.choice(templates) if weights is None else rnd.choices(templates, weights)[0]
        job = _Job(i, template, t, duration())
        all_jobs.append(job)
        sim.jobs[i] = job
        if high_share and ranks.random() < high_share:
            job.priority = HIGH_PRIORITY
        if queues > 1:
            job.queue = teams.randrange(queues)
        sim.push(t, _ARRIVE, job)
        i += 1
    horizon = t if length is None else length
    if hook is not None:  # from the end of the warm-up: every mode starts it alike
        sim.push(warmup + hook.interval, _TICK, None)
    base = _Counts.of(sim, 0)
    if warmup > 0:
        sim.push(warmup, _WARM, None)
    rounds = 0
    while sim.events:
        when, _, kind, ev_job, run = heapq.heappop(sim.events)
        if when > horizon:
            break
        sim.advance(when)
        if kind == _ARRIVE:
            assert ev_job is not None
            sim._requeue(ev_job)
            sim.try_waiting([ev_job])
        elif kind == _FINISH:
            assert ev_job is not None
            if ev_job.runs != run or ev_job.id not in sim.running:
                continue  # moved since: this run will not finish
            sim.release(ev_job)
            sim.try_waiting(list(sim.waiting))
        elif kind == _TICK:
            assert hook is not None
            rounds += 1
            sim.close_rooms()
            moves = hook(sim.state())
            if moves:
                sim.apply(moves)
                sim.try_waiting(list(sim.waiting))
            sim.push(when + hook.interval, _TICK, None)
        elif kind == _WARM:
            sim.area_partial = sim.area_busy = sim.area_held = 0.0
            base = _Counts.of(sim, rounds)
        else:
            assert ev_job is not None
            if ev_job.id in sim.held and ev_job.runs == run:
                sim._requeue(ev_job)
                sim.try_waiting(list(sim.waiting))
    sim.advance(horizon)
    sim.close_rooms()
    end = _Counts.of(sim, rounds)
    moved = {k: getattr(end, k) - getattr(base, k) for k in _Counts.__slots__}
    lost = moved["lost"]
    counted = [j for j in all_jobs if j.arrival >= warmup]
    started = [j for j in counted if j.start >= 0]
    stuck = sum(1 for j in all_jobs if j.id not in sim.running and j.pods)
    span = (horizon - warmup) * sim.capacity if horizon > warmup else 1.0
    waits = _waits(counted, horizon)
    gang_jobs = [j for j in counted if j.template.size > 1]
    single_jobs = [j for j in counted if j.template.size == 1]
    gang_waits = _waits(gang_jobs, horizon)
    single_waits = _waits(single_jobs, horizon)
    asked = sum(j.duration * j.template.gpu_milli for j in counted)
    return DetailedResult(
        label=label or mode,
        mode=mode,
        load_pct=round(load * 100),
        seed=seed,
        jobs=len(counted),
        started=len(started),
        stuck_partial=stuck,
        partial_gpu_pct=round(100.0 * sim.area_partial / span, 2),
        busy_gpu_pct=round(100.0 * sim.area_busy / span, 2),
        useful_gpu_pct=round(100.0 * (sim.area_busy - lost) / span, 2),
        held_gpu_pct=round(100.0 * sim.area_held / span, 2),
        mean_wait=round(_mean(waits), 3),
        p95_wait=round(percentile(waits, 95), 3),
        pods_moved=int(moved["pods_moved"]),
        jobs_moved=sum(1 for j in counted if j.moves),
        lost_gpu=round(lost / 1000, 3),
        lost_pct=round(100.0 * lost / sim.area_busy, 3) if sim.area_busy else 0.0,
        rooms_made=int(moved["rooms_made"]),
        rooms_reached=int(moved["rooms_reached"]),
        rooms_taken=int(moved["rooms_taken"]),
        rooms_unused=int(moved["rooms_unused"]),
        rounds=int(moved["rounds"]),
        refusals=dict(hook.refusals) if hook is not None else {},
        offered_pct=round(100.0 * asked / span, 2),
        never_started=len(counted) - len(started),
        gangs=len(gang_jobs),
        mean_wait_gang=_mean_or_none(gang_waits),
        p95_wait_gang=_p95_or_none(gang_waits),
        mean_wait_single=_mean_or_none(single_waits),
        p95_wait_single=_p95_or_none(single_waits),
        p95_wait_half=_p95_or_none(_waits(counted, warmup + (horizon - warmup) / 2)),
        length=round(horizon - warmup, 3),
    )


def run_study(
    make_snapshot: Callable[[], Snapshot],
    templates: Sequence[JobTemplate],
    loads: Sequence[float],
    *,
    scorer_factory: Callable[[], Scorer | None] = lambda: None,
    jobs: int = 1000,
    seed: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> list[LoadResult]:
    """Both modes at every load, each on a fresh snapshot, the same jobs for both."""
    out: list[LoadResult] = []
    total = len(loads) * len(MODES)
    for i, load in enumerate(loads):
        for j, mode in enumerate(MODES):
            out.append(
                run_load(
                    make_snapshot(),
                    templates,
                    load,
                    mode,
                    scorer=scorer_factory(),
                    jobs=jobs,
                    seed=seed + i,
                )
            )
            if progress is not None:
                progress(i * len(MODES) + j + 1, total)
    return out
