"""Work at risk: what moving a workload throws away.

A moved pod restarts from its last checkpoint, so the cost of a move is the work done
since then: GPUs held x (now - last checkpoint), in GPU-seconds. Users say how often a
workload checkpoints (``corral.dev/checkpoint-interval: 30m``, a duration in the one
grammar of :mod:`gangplace.engine.timeparse`) or when it last did
(``corral.dev/last-checkpoint``, an RFC 3339 time the job updates), on the workload or its
pod template. The last checkpoint is:

1. the ``last-checkpoint`` annotation, when it is not in the future and not before the
   pod started (an older one belongs to an earlier run of the pod: what ran since the
   start is still at risk);
2. else, with an interval, the start + k x interval, the latest such time not after now;
3. else the start: the whole run is at risk.

The start is when the pod began running (:attr:`PodRecord.started`), else when it was
created. Pure: ``now`` is given, nothing is read but the arguments.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.timeparse import (
    DurationError,
    TimeFormatError,
    duration_allowed,
    parse_duration,
    parse_time,
)

__all__ = [
    "ANNOTATION_CHECKPOINT_INTERVAL",
    "ANNOTATION_LAST_CHECKPOINT",
    "CheckpointError",
    "Checkpoints",
    "interval_seconds",
    "last_checkpoint",
    "parse_interval",
    "parse_last",
    "pod_started",
    "pod_work_at_risk",
    "read_checkpoints",
    "work_at_risk",
]

ANNOTATION_CHECKPOINT_INTERVAL = "corral.dev/checkpoint-interval"
ANNOTATION_LAST_CHECKPOINT = "corral.dev/last-checkpoint"

INTERVAL_ALLOWED = f"{duration_allowed(numbers=False)}, at least 1s"
LAST_ALLOWED = "an RFC 3339 time, such as 2026-11-30T08:00:00Z"


def _shown(raw: object) -> str:
    s = str(raw)
    return s if len(s) <= 64 else f"{s[:64]}... ({len(s)} characters)"


class CheckpointError(ValueError):
    """A checkpoint annotation that cannot be read: the message names the key, the value
    and what is allowed."""


@dataclass(frozen=True, slots=True)
class Checkpoints:
    """What a workload says of its checkpoints: how often (seconds), when it last did."""

    interval: float | None = None
    last: datetime | None = None

    @property
    def known(self) -> bool:
        return self.interval is not None or self.last is not None


def interval_seconds(raw: str) -> float:
    """Seconds in a ``corral.dev/checkpoint-interval`` value, the one rule the webhook
    and the descheduler share: a unit is required (as Go requires one) and it must be at
    least a second. A bad value raises ``ValueError`` whose text is the problem alone
    (each caller words the key, the value and :data:`INTERVAL_ALLOWED` its own way)."""
    try:
        seconds = parse_duration(raw, numbers=False)
    except DurationError as e:
        raise ValueError(e.problem) from None
    if seconds < 1:
        raise ValueError("is too short: at least 1s")
    return seconds


def parse_interval(raw: str, where: str = "") -> float:
    """:func:`interval_seconds`, with a bad value named by its key (``where`` before it)."""
    try:
        return interval_seconds(raw)
    except ValueError as e:
        key = f"{where}{ANNOTATION_CHECKPOINT_INTERVAL}"
        raise CheckpointError(f'{key}: "{_shown(raw)}" {e}; allowed: {INTERVAL_ALLOWED}') from None


def parse_last(raw: str, where: str = "") -> datetime:
    """A ``corral.dev/last-checkpoint`` value as an aware UTC time."""
    try:
        return parse_time(raw)
    except TimeFormatError:
        key = f"{where}{ANNOTATION_LAST_CHECKPOINT}"
        raise CheckpointError(
            f'{key}: "{_shown(raw)}" is not a time; allowed: {LAST_ALLOWED}'
        ) from None


def read_checkpoints(sources: Iterable[tuple[str, Mapping[str, str]]]) -> Checkpoints:
    """The checkpoints ``sources`` say, each ``(who, annotations)``, nearest first (the
    pod, then its workloads): the interval of the nearest that gives one, and the latest
    last-checkpoint of all. A bad value raises :class:`CheckpointError` naming ``who``."""
    interval: float | None = None
    last: datetime | None = None
    for who, ann in sources:
        where = f"{who}: " if who else ""
        raw = ann.get(ANNOTATION_CHECKPOINT_INTERVAL)
        if raw is not None and interval is None:
            interval = parse_interval(raw, where)
        raw = ann.get(ANNOTATION_LAST_CHECKPOINT)
        if raw is not None:
            t = parse_last(raw, where)
            last = t if last is None or t > last else last
    return Checkpoints(interval, last)


def last_checkpoint(started: datetime, now: datetime, checkpoints: Checkpoints) -> datetime:
    """The time a pod that started at ``started`` would restart from if moved at ``now``
    (the rule of the module's docstring). Never before ``started`` nor after ``now``."""
    if started >= now:
        return now
    last = checkpoints.last
    if last is not None and started <= last <= now:
        return last
    if checkpoints.interval is not None:
        k = math.floor((now - started).total_seconds() / checkpoints.interval)
        return min(started + timedelta(seconds=k * checkpoints.interval), now)
    return started


def work_at_risk(
    gpus: float, started: datetime | None, now: datetime, checkpoints: Checkpoints
) -> float:
    """GPU-seconds a move at ``now`` throws away: ``gpus`` x (now - last checkpoint).
    Nothing is at risk before a start is known."""
    if started is None or gpus <= 0:
        return 0.0
    return gpus * (now - last_checkpoint(started, now, checkpoints)).total_seconds()


def pod_started(pod: PodRecord) -> datetime | None:
    """When ``pod`` began running (its ``started``), else its creation; None when
    neither is a readable time."""
    for raw in (pod.started, pod.created):
        if raw:
            try:
                return parse_time(raw)
            except TimeFormatError:
                continue
    return None


def pod_work_at_risk(
    pod: PodRecord,
    now: datetime,
    workloads: Iterable[tuple[str, Mapping[str, str]]] = (),
) -> float:
    """GPU-seconds moving ``pod`` at ``now`` throws away; the pod's own checkpoint
    annotations first, then its workloads' (``(who, annotations)``, nearest first). A
    bad value raises :class:`CheckpointError` naming where it is."""
    checkpoints = read_checkpoints([(f"pod {pod.key}", pod.annotations), *workloads])
    return work_at_risk(pod.shape.gpu_demand_milli / 1000.0, pod_started(pod), now, checkpoints)
