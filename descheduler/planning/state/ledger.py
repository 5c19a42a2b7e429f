"""The descheduler's own marks, which the planner reads beside the objects it lists:
the annotations it writes on PodGroups, and the move ledger ConfigMap that carries the
same facts for units without a PodGroup, with the record of the last run that evicted."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gangplace.engine.objects import RecordError, object_meta, timestamp
from gangplace.engine.timeparse import format_time

__all__ = [
    "ANNOTATION_LAST_MOVED",
    "ANNOTATION_ROOM_MADE",
    "MOVE_LEDGER",
    "EvictedPod",
    "MoveLedger",
    "RunRecord",
    "ledger_from_json",
]

# Written on a gang's PodGroup by the runner when it moves the gang (RFC 3339), so that
# a stateless CronJob still knows the gang is cooling down.
ANNOTATION_LAST_MOVED = "corral.dev/last-moved"
# Written on a waiting gang's PodGroup when a run starts evicting to make room for it: a
# gang that still waits within the cool-down lost its room to other pods, and no more
# gangs are moved for it until the cool-down ends.
ANNOTATION_ROOM_MADE = "corral.dev/room-made"
# The ConfigMap (in the descheduler's namespace) that remembers the same two facts for
# units that have no PodGroup to carry them: gangs known only by their pods' keys, and
# single pods (by their controller, which outlives the pod).
MOVE_LEDGER = "corral-descheduler-moves"


@dataclass(frozen=True, slots=True)
class EvictedPod:
    """A pod a run evicted (or was about to), with what the limits count it under."""

    namespace: str
    name: str
    node: str = ""
    queue: str = ""
    gpu_milli: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "node": self.node,
            "queue": self.queue,
            "gpuMilli": self.gpu_milli,
        }


@dataclass(slots=True)
class RunRecord:
    """The last run that evicted: when it began, whether it got to the end of its plan,
    and every pod it evicted, written before each gang goes. A run cut short (a crash,
    SIGTERM, a lost Lease) leaves ``finished`` false, and the run after it shares its
    limits (:meth:`MoveLedger.carried`)."""

    plan: str
    started: datetime
    finished: bool = False
    evicted: list[EvictedPod] = field(default_factory=list)
    last: datetime | None = None  # when the last pods were recorded (None: started)

    @property
    def active(self) -> datetime:
        return self.last or self.started

    def to_json(self) -> dict[str, Any]:
        return {
            "plan": self.plan,
            "started": format_time(self.started),
            "last": format_time(self.active),
            "finished": self.finished,
            "evicted": [e.to_json() for e in self.evicted],
        }


@dataclass(slots=True)
class MoveLedger:
    """``last_moved`` and ``room_made`` by cool-down key (see
    :func:`descheduler.planning.gang_views.cooldown_key`), and the last evicting ``run``. The
    ConfigMap holds each as JSON under the data key of the same name, written with
    dashes (``last-moved``, ``room-made``, ``run``)."""

    last_moved: dict[str, datetime] = field(default_factory=dict)
    room_made: dict[str, datetime] = field(default_factory=dict)
    run: RunRecord | None = None

    def to_data(self) -> dict[str, str]:
        def dump(m: Mapping[str, datetime]) -> str:
            return json.dumps({k: format_time(v) for k, v in sorted(m.items())}, indent=0)

        out = {"last-moved": dump(self.last_moved), "room-made": dump(self.room_made)}
        if self.run is not None:
            out["run"] = json.dumps(self.run.to_json(), indent=0)
        return out

    def prune(self, now: datetime, keep_seconds: float) -> None:
        """Forget entries older than ``keep_seconds`` (the cool-down)."""
        for m in (self.last_moved, self.room_made):
            for k in [k for k, t in m.items() if (now - t).total_seconds() >= keep_seconds]:
                del m[k]

    def carried(self, now: datetime, window_seconds: float) -> list[EvictedPod]:
        """What a run cut short evicted, when its last eviction was less than
        ``window_seconds`` before ``now``: it counts against the limits of the run now,
        so a crash and a rerun together never evict more than one run may."""
        r = self.run
        if r is None or r.finished:
            return []
        if not 0 <= (now - r.active).total_seconds() < window_seconds:
            return []
        return list(r.evicted)


def ledger_from_json(obj: Mapping[str, Any]) -> MoveLedger:
    """The move ledger ConfigMap; StateError (a RecordError) names a key that cannot be
    read."""
    ns, name, _ = object_meta(obj, "ConfigMap")
    data = obj.get("data") or {}
    out = MoveLedger()
    if data.get("run"):
        out.run = _run_record(data["run"], f"ConfigMap {ns}/{name}: data.run")
    for key, target in (("last-moved", out.last_moved), ("room-made", out.room_made)):
        raw = data.get(key)
        if not raw:
            continue
        what = f"ConfigMap {ns}/{name}: data.{key}"
        for unit, stamp in _json_object(raw, what).items():
            t = timestamp(stamp, f"{what}[{unit}]")
            if t is not None:
                target[str(unit)] = t
    return out


def _json_object(raw: Any, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (TypeError, ValueError):
        raise RecordError(f"{what}: not a JSON object") from None
    if not isinstance(doc, dict):
        raise RecordError(f"{what}: not a JSON object")
    return doc


def _run_record(raw: Any, what: str) -> RunRecord:
    doc = _json_object(raw, what)
    started = timestamp(doc.get("started"), f"{what}.started")
    if started is None:
        raise RecordError(f"{what}.started: missing")
    evicted = doc.get("evicted") or []
    if not isinstance(evicted, list):
        raise RecordError(f"{what}.evicted: not a list")
    pods: list[EvictedPod] = []
    for i, e in enumerate(evicted):
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            raise RecordError(f"{what}.evicted[{i}]: not a pod")
        gpu = e.get("gpuMilli", 0)
        if not isinstance(gpu, int) or isinstance(gpu, bool) or gpu < 0:
            raise RecordError(f"{what}.evicted[{i}].gpuMilli: not a count")
        pods.append(
            EvictedPod(
                str(e.get("namespace") or ""),
                e["name"],
                str(e.get("node") or ""),
                str(e.get("queue") or ""),
                gpu,
            )
        )
    last = timestamp(doc.get("last"), f"{what}.last")
    return RunRecord(str(doc.get("plan") or ""), started, doc.get("finished") is True, pods, last)
