"""corral's descheduler inside the gang study: the study's hook (``gangplace.sim``'s
:class:`~gangplace.sim.gang_study.DeschedulerHook`) that runs the real planner,
:func:`descheduler.planning.planner.plan`, with a config and its rules, every round.

Each round the study's cluster is read as a live one would be: every job is a batch/v1
Job with a suspend switch, in its team's namespace, whose pods carry Volcano's gang keys
(minAvailable = every worker, the team's queue); running pods are Running on their
devices since the job last started (``status.startTime``) and a waiting job's pods are
Pending. When the study's jobs checkpoint, each Job says so as a cluster's would
(``corral.dev/checkpoint-interval``, and ``corral.dev/last-checkpoint`` as the job last
wrote it), so the planner charges a move by the work it would lose.
What the descheduler remembers between runs (when it last moved a gang, when it made
room for one) is kept in a move ledger, as the runner keeps it. The plan's moves go back
to the study as they would be carried out: a suspended Job leaves whole and is resumed
once the gang it made room for starts, or after ``moves.resume_after``.

Why a waiting gang got no room is counted by kind (:func:`reason_kind`) -- the limits,
the priority rule, gangs that would not fit again -- so a study says what holds the
descheduler back, not only that it did not move.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from gangplace.engine import PodRecord, Snapshot
from gangplace.engine.checkpoints import (
    ANNOTATION_CHECKPOINT_INTERVAL,
    ANNOTATION_LAST_CHECKPOINT,
)
from gangplace.engine.kinds import KINDS
from gangplace.engine.membership import (
    ANNOTATION_MIN_AVAILABLE,
    VOLCANO_GROUP_NAME,
    VOLCANO_QUEUE_NAME,
)
from gangplace.engine.owners import WorkloadRecord
from gangplace.engine.timeparse import format_duration, format_time
from gangplace.sim.gang_study import JobMove, StudyJob, StudyState

from descheduler.config import DeschedulerConfig
from descheduler.planning.planner import plan
from descheduler.planning.state import ClusterState, MoveLedger

__all__ = ["NAMESPACE", "T0", "CorralHook", "reason_kind", "team"]

# The virtual clock's start; only differences matter.
T0 = datetime(2026, 1, 1, tzinfo=UTC)
NAMESPACE = "study"


def team(queue: int) -> str:
    """The namespace and queue of the study's team ``queue`` (team 0 is ``study``)."""
    return NAMESPACE if queue == 0 else f"{NAMESPACE}-{queue}"


# Variable parts of a reason (names, counts, durations), so that reasons group by kind.
_VARIABLE = (
    (re.compile(r"\b([a-z./-]+)=[^\s,)]+"), r"\1=<q>"),  # a shape's quantities
    (re.compile(r"\bstudy(-\d+)?/job\d+\b"), "<gang>"),
    (re.compile(r"\bjob\d+(-\d+)?\b"), "<job>"),
    (re.compile(r"\b\d+h\d+m\d+s|\b\d+h\d+m|\b\d+m\d+s|\b\d+[hms]\b"), "<duration>"),
    (re.compile(r"\b\d{4}-\d\d-\d\dT[\d:]+Z\b"), "<time>"),
    (re.compile(r"\b\d+(\.\d+)?\b"), "<n>"),
)


def reason_kind(reason: str) -> str:
    """``reason`` with its names, counts and times taken out."""
    for pattern, repl in _VARIABLE:
        reason = pattern.sub(repl, reason)
    return reason


@dataclass(slots=True)
class CorralHook:
    """The planner every ``interval`` job lengths; a mean job lasts ``job_hours``."""

    config: DeschedulerConfig
    job_hours: float
    interval: float = field(init=False)
    refusals: Counter[str] = field(default_factory=Counter)
    ledger: MoveLedger = field(default_factory=MoveLedger)
    rounds: int = 0
    rooms_planned: int = 0  # waiting gangs a round moved others for
    skipped: int = 0  # rounds answered from the last one (see ``_same``)
    _last: tuple[object, datetime, Counter[str]] | None = None

    def __post_init__(self) -> None:
        if not self.job_hours > 0:
            raise ValueError(f"job_hours must be > 0, got {self.job_hours}")
        self.interval = self.config.runner.interval / self._seconds(1.0)

    def _seconds(self, lengths: float) -> float:
        return lengths * self.job_hours * 3600.0

    def _time(self, lengths: float) -> datetime:
        return T0 + timedelta(seconds=self._seconds(lengths))

    def __call__(self, state: StudyState) -> Sequence[JobMove]:
        self.rounds += 1
        now = self._time(state.now)
        print_ = _fingerprint(state)
        if self._same(print_, now):
            assert self._last is not None
            self.refusals.update(self._last[2])
            self.skipped += 1
            return []
        cluster = self.cluster_state(state, now)
        result = plan(cluster, self.config, scorer=state.scorer, largest=False)
        refused = Counter(reason_kind(u.reason) for u in result.unserved)
        self.refusals.update(refused)
        self._last = (print_, now, refused) if not result.moves else None
        unit = self._seconds(1.0)
        out: list[JobMove] = []
        made: set[str] = set()
        for m in result.moves:
            self.ledger.last_moved[m.unit] = now
            for_job = None
            if m.for_gang is not None:
                made.add(m.for_gang)
                for_job = _job_id(m.for_gang)
            out.append(
                JobMove(
                    _job_id(m.unit),
                    tuple(p.name for p in m.pods),
                    m.method,
                    for_job,
                    # a capacity room is held for hold_for, every other suspend resume_after
                    (m.hold_for or self.config.moves.resume_after) / unit,
                )
            )
        for key in made:
            self.ledger.room_made[key] = now
        self.rooms_planned += len(made)
        self.ledger.prune(now, self.config.eviction.cooldown)
        return out

    def _same(self, print_: object, now: datetime) -> bool:
        """Nothing changed since a round that moved nothing: no job came, went, started
        or moved, took a checkpoint, and no cool-down of the ledger ended in between (the
        rules that read the clock). Only the age of running pods differs -- the work a
        move would lose has only grown -- so such a round plans the same, and is
        answered from the last one."""
        if self._last is None or self._last[0] != print_:
            return False
        if self.config.eviction.min_pod_age > 0:
            return False
        since = self._last[1]
        cooldown = self.config.eviction.cooldown
        for stamps in (self.ledger.last_moved, self.ledger.room_made):
            for t in stamps.values():
                if (since - t).total_seconds() < cooldown <= (now - t).total_seconds():
                    return False
        return True

    def cluster_state(self, state: StudyState, now: datetime) -> ClusterState:
        """The study's cluster as the planner reads a live one (see the module doc)."""
        snap = state.snap
        names = snap.node_names
        pods: list[PodRecord] = []
        workloads: dict[str, WorkloadRecord] = {}
        for j in (*state.running, *state.waiting):
            running = j.run_start >= 0
            created = format_time(self._time(j.run_start if running else j.arrival))
            for p in j.pods:
                pods.append(self._pod(j, p.name, "Running" if running else "Pending", created, p))
                pods[-1].node_name = names[p.node]
                if running:
                    pods[-1].started = created
            bound = len(j.pods)
            for k in range(j.template.size - bound):
                pods.append(self._pod(j, f"{j.name}-pending-{k}", "Pending", created, None))
            w = WorkloadRecord(
                kind="Job",
                group="batch",
                namespace=team(j.queue),
                name=j.name,
                uid=f"uid-{j.name}",
                suspend_path=KINDS[("batch", "Job")].suspend_path,
                backoff_limit=6,
                annotations=self._checkpoints(j, state),
            )
            workloads[w.key] = w
        return ClusterState(
            snapshot=Snapshot(snap.nodes, pods, snap.config),
            now=now,
            workloads=workloads,
            ledger=self.ledger,
        )

    def _checkpoints(self, j: StudyJob, state: StudyState) -> dict[str, str]:
        """The Job's checkpoint annotations: how often it checkpoints, and -- while it
        runs and once it has -- when it last did (the study's own rule of what a move
        keeps)."""
        if state.checkpoint is None:
            return {}
        out = {ANNOTATION_CHECKPOINT_INTERVAL: format_duration(self._seconds(state.checkpoint))}
        if j.run_start >= 0:
            k = math.floor((state.now - j.run_start) / state.checkpoint)
            if k > 0:
                last = self._time(j.run_start + k * state.checkpoint)
                out[ANNOTATION_LAST_CHECKPOINT] = format_time(last)
        return out

    def _pod(
        self, j: StudyJob, name: str, phase: str, created: str, bound: PodRecord | None
    ) -> PodRecord:
        return PodRecord(
            team(j.queue),
            name,
            j.template.shape,
            uid=f"uid-{name}",
            phase=phase,
            annotations={
                VOLCANO_GROUP_NAME: j.name,
                ANNOTATION_MIN_AVAILABLE: str(j.template.size),
                VOLCANO_QUEUE_NAME: team(j.queue),
            },
            owner_kind="Job",
            owner_group="batch",
            owner_name=j.name,
            owner_uid=f"uid-{j.name}",
            created=created,
            scheduler_name="volcano",
            priority=j.priority,
            gpu_index=bound.gpus if bound is not None else (),
        )


def _fingerprint(state: StudyState) -> object:
    """What the planner would see of the jobs, bar the clock -- and the checkpoints each
    running job has taken (a move's cost falls back at each one)."""
    ck = state.checkpoint

    def taken(j: StudyJob) -> int:
        return math.floor((state.now - j.run_start) / ck) if ck else 0

    return (
        tuple((j.id, j.run_start, len(j.pods), taken(j)) for j in state.running),
        tuple((j.id, len(j.pods)) for j in state.waiting),
    )


def _job_id(unit: str) -> int:
    """``study/job12`` -> 12."""
    return int(unit.rsplit("/job", 1)[1])
