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
useful work (running jobs, time-averaged %) and the mean wait of started jobs. Pure:
the caller provides the snapshot and the job templates.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine.gang import Gang, GangOptions, place_gang
from ..engine.model import PodShape
from ..engine.node_pod_records import PodRecord
from ..engine.scoring import BinpackScorer, Scorer
from ..engine.single_pod import place_pod
from ..engine.snapshot import Snapshot

__all__ = [
    "MODES",
    "JobTemplate",
    "LoadResult",
    "jobs_from_pods",
    "run_load",
    "run_study",
]

MODES = ("pod-by-pod", "all-or-nothing")


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


@dataclass(slots=True)
class _Job:
    id: int
    template: JobTemplate
    arrival: float
    duration: float
    pods: list[PodRecord] = field(default_factory=list)  # bound pods
    start: float = -1.0


@dataclass(frozen=True, slots=True)
class LoadResult:
    mode: str
    load_pct: int
    jobs: int
    started: int
    stuck_partial: int
    partial_gpu_pct: float  # GPUs held by partly placed jobs, time-averaged, % capacity
    busy_gpu_pct: float  # GPUs of running jobs, time-averaged, % of capacity
    mean_wait: float  # started jobs, in mean job durations

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


class _Sim:
    def __init__(self, snap: Snapshot, mode: str, scorer: Scorer | None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.snap, self.mode = snap, mode
        self.scorer: Scorer = scorer or BinpackScorer()
        self.capacity = int(snap.gpu_total.sum()) * 1000
        self.waiting: list[_Job] = []  # arrival order
        self.partial_milli = 0  # GPU held by jobs not yet started
        self.busy_milli = 0  # GPU held by running jobs
        self.area_partial = 0.0
        self.area_busy = 0.0
        self.now = 0.0
        self.seq = 0
        self.events: list[tuple[float, int, int, _Job]] = []  # (time, seq, kind, job)

    def advance(self, t: float) -> None:
        dt = t - self.now
        self.area_partial += dt * self.partial_milli
        self.area_busy += dt * self.busy_milli
        self.now = t

    def push(self, t: float, kind: int, job: _Job) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, job))

    def _start(self, job: _Job) -> None:
        self.partial_milli -= job.template.gpu_milli
        self.busy_milli += job.template.gpu_milli
        job.start = self.now
        self.push(self.now + job.duration, 1, job)

    def _bind(self, job: _Job, node: int, gpus: tuple[int, ...]) -> None:
        rec = PodRecord("study", f"job{job.id}-{len(job.pods)}", job.template.shape)
        self.snap.place(rec.shape, node, gpus, pod=rec)
        job.pods.append(rec)
        self.partial_milli += rec.shape.gpu_demand_milli

    def _try_pods(self, job: _Job, failed: set[PodShape]) -> bool:
        shape = job.template.shape
        while len(job.pods) < job.template.size:
            if shape in failed:
                return False
            rec = PodRecord("study", f"job{job.id}-{len(job.pods)}", shape)
            if place_pod(self.snap, shape, self.scorer, rec) is None:
                failed.add(shape)
                return False
            job.pods.append(rec)
            self.partial_milli += shape.gpu_demand_milli
        return True

    def _try_gang(self, job: _Job, failed: dict[PodShape, int]) -> bool:
        t = job.template
        if failed.get(t.shape, 1 << 30) <= t.size:
            return False
        res = place_gang(
            self.snap,
            Gang.uniform(f"job{job.id}", t.shape, t.size),
            self.scorer,
            GangOptions(best_effort=False, dry_run=True),
        )
        if not res.ok:
            failed[t.shape] = min(failed.get(t.shape, 1 << 30), t.size)
            return False
        for a in res.assignments:
            self._bind(job, a.node, a.gpus)
        return True

    def try_waiting(self, jobs: Sequence[_Job]) -> None:
        pod_failed: set[PodShape] = set()
        gang_failed: dict[PodShape, int] = {}
        started: set[int] = set()
        for job in jobs:
            ok = (
                self._try_pods(job, pod_failed)
                if self.mode == "pod-by-pod"
                else self._try_gang(job, gang_failed)
            )
            if ok:
                self._start(job)
                started.add(job.id)
        if started:
            self.waiting = [j for j in self.waiting if j.id not in started]

    def release(self, job: _Job) -> None:
        for p in job.pods:
            self.snap.remove(p)
        job.pods = []
        self.busy_milli -= job.template.gpu_milli


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
    if not templates:
        raise ValueError("no job templates (the pod list has no multi-GPU pods?)")
    if not 0 < load <= 2:
        raise ValueError(f"load must be in (0, 2], got {load}")
    sim = _Sim(snap, mode, scorer)
    if sim.capacity == 0:
        raise ValueError("the cluster has no GPUs")
    rnd = random.Random(seed)
    mean_gpu = sum(t.gpu_milli for t in templates) / len(templates)
    rate = load * sim.capacity / mean_gpu  # jobs per mean duration
    t = 0.0
    all_jobs: list[_Job] = []
    for i in range(jobs):
        t += rnd.expovariate(rate)
        job = _Job(i, rnd.choice(templates), t, rnd.expovariate(1.0))
        all_jobs.append(job)
        sim.push(t, 0, job)
    horizon = t
    while sim.events:
        when, _, kind, job = heapq.heappop(sim.events)
        if when > horizon:
            break
        sim.advance(when)
        if kind == 0:
            sim.waiting.append(job)
            sim.try_waiting([job])
        else:
            sim.release(job)
            sim.try_waiting(list(sim.waiting))
    sim.advance(horizon)
    started = [j for j in all_jobs if j.start >= 0]
    stuck = sum(1 for j in all_jobs if j.start < 0 and j.pods)
    span = horizon * sim.capacity if horizon > 0 else 1.0
    wait = sum(j.start - j.arrival for j in started) / len(started) if started else math.nan
    return LoadResult(
        mode=mode,
        load_pct=round(load * 100),
        jobs=jobs,
        started=len(started),
        stuck_partial=stuck,
        partial_gpu_pct=round(100.0 * sim.area_partial / span, 2),
        busy_gpu_pct=round(100.0 * sim.area_busy / span, 2),
        mean_wait=round(wait, 3),
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
