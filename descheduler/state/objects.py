"""The objects beside Nodes and Pods that the planner reads: PodGroups (Volcano's and
scheduler-plugins'), Volcano Queues, PodDisruptionBudgets and PriorityClasses, each
parsed from the JSON the API server returns into a small frozen record."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gangplace.engine import EngineConfig, Queue
from gangplace.engine.gangs import ANNOTATION_GANG_TIMEOUT, VOLCANO_SLA_WAITING_TIME
from gangplace.engine.resources import ResourceError, parse_resource_list
from gangplace.engine.selectors import LabelSelector, SelectorError

from ..timeparse import TimeFormatError, format_time, parse_duration, parse_time

__all__ = [
    "ANNOTATION_LAST_MOVED",
    "ANNOTATION_ROOM_MADE",
    "GPU",
    "MOVE_LEDGER",
    "MoveLedger",
    "PdbInfo",
    "PodGroupInfo",
    "StateError",
    "ledger_from_json",
    "pdb_from_json",
    "podgroup_from_json",
    "priority_class_from_json",
    "queue_from_json",
    "resources_for_drf",
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
# Queue and share figures count GPUs under one name, in thousandths of a GPU.
GPU = "gpu"

VOLCANO_GROUP = "scheduling.volcano.sh"
COSCHED_GROUP = "scheduling.x-k8s.io"


class StateError(ValueError):
    """An object in the List that cannot be read; the message names it."""


def _meta(obj: Mapping[str, Any], kind: str) -> tuple[str, str, Mapping[str, Any]]:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise StateError(f"{kind} without metadata.name")
    return str(meta.get("namespace") or ""), name, meta


def _time(raw: Any, what: str) -> datetime | None:
    if not raw:
        return None
    try:
        return parse_time(str(raw))
    except TimeFormatError as e:
        raise StateError(f"{what}: {e}") from None


def resources_for_drf(
    raw: Mapping[str, Any] | None, config: EngineConfig, what: str
) -> dict[str, int]:
    """A ResourceList in engine units, with every GPU resource counted as ``gpu`` in
    thousandths of a GPU (the unit queue shares are computed in)."""
    try:
        res = parse_resource_list(raw)
    except ResourceError as e:
        raise StateError(f"{what}: {e}") from None
    out: dict[str, int] = {}
    for k, v in res.items():
        if k in config.gpu_resources:
            out[GPU] = out.get(GPU, 0) + v * 1000
        else:
            out[k] = v
    return out


@dataclass(frozen=True, slots=True)
class PodGroupInfo:
    """A gang object. ``timeout`` is the gang timeout it names, in seconds, if any."""

    namespace: str
    name: str
    api_group: str
    min_member: int
    queue: str | None = None
    phase: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    created: datetime | None = None
    min_resources: Mapping[str, int] = field(default_factory=dict)
    priority_class: str = ""
    timeout: float | None = None
    last_transition: datetime | None = None
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def waiting(self) -> bool:
        """Phases in which the gang has not started: Volcano's Pending and Inqueue,
        scheduler-plugins' Pending, PreScheduling and Scheduling."""
        return self.phase in ("Pending", "Inqueue", "PreScheduling", "Scheduling", "")


def podgroup_from_json(obj: Mapping[str, Any], config: EngineConfig) -> PodGroupInfo:
    ns, name, meta = _meta(obj, "PodGroup")
    ns = ns or "default"
    what = f"PodGroup {ns}/{name}"
    api = str(obj.get("apiVersion") or "").split("/")[0] or VOLCANO_GROUP
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    raw_min = spec.get("minMember", 1)
    try:
        min_member = int(raw_min)
    except (TypeError, ValueError):
        raise StateError(f"{what}: spec.minMember {raw_min!r} is not an integer") from None
    if min_member < 0:
        raise StateError(f"{what}: spec.minMember must be >= 0, got {min_member}")
    annotations = dict(meta.get("annotations") or {})
    timeout: float | None = None
    for key in (ANNOTATION_GANG_TIMEOUT, VOLCANO_SLA_WAITING_TIME):
        if annotations.get(key):
            try:
                timeout = parse_duration(str(annotations[key]))
            except TimeFormatError as e:
                raise StateError(f"{what}: annotation {key}: {e}") from None
            break
    if timeout is None and spec.get("scheduleTimeoutSeconds") is not None:
        try:
            timeout = float(spec["scheduleTimeoutSeconds"])
        except (TypeError, ValueError):
            raise StateError(f"{what}: spec.scheduleTimeoutSeconds is not a number") from None
    last: datetime | None = None
    for c in status.get("conditions") or ():
        t = _time(c.get("lastTransitionTime"), f"{what}: condition {c.get('type')}")
        if t is not None and (last is None or t > last):
            last = t
    return PodGroupInfo(
        namespace=ns,
        name=name,
        api_group=api,
        min_member=min_member,
        queue=str(spec["queue"]) if spec.get("queue") else None,
        phase=str(status.get("phase") or ""),
        annotations=annotations,
        created=_time(meta.get("creationTimestamp"), f"{what}: creationTimestamp"),
        min_resources=resources_for_drf(spec.get("minResources"), config, f"{what}: minResources"),
        priority_class=str(spec.get("priorityClassName") or ""),
        timeout=timeout,
        last_transition=last,
        uid=str(meta.get("uid") or ""),
    )


def queue_from_json(obj: Mapping[str, Any], config: EngineConfig) -> Queue:
    """A Volcano Queue (cluster-scoped): weight, capability and reclaimable."""
    _, name, _ = _meta(obj, "Queue")
    spec = obj.get("spec") or {}
    what = f"Queue {name}"
    try:
        weight = int(spec.get("weight") or 1)
    except (TypeError, ValueError):
        raise StateError(f"{what}: spec.weight {spec.get('weight')!r} is not an integer") from None
    reclaimable = spec.get("reclaimable")
    if reclaimable is not None and not isinstance(reclaimable, bool):
        raise StateError(f"{what}: spec.reclaimable must be true or false")
    try:
        return Queue(
            name=name,
            weight=max(weight, 1),
            capability=resources_for_drf(spec.get("capability"), config, f"{what}: capability"),
            reclaimable=True if reclaimable is None else reclaimable,
        )
    except ValueError as e:
        raise StateError(f"{what}: {e}") from None


@dataclass(frozen=True, slots=True)
class PdbInfo:
    """A PodDisruptionBudget with its status as last computed by the cluster."""

    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int = 0
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    generation: int = 0
    observed_generation: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def current(self) -> bool:
        """The status reflects the spec (the Eviction API refuses until it does)."""
        return self.observed_generation >= self.generation


def _int_or_str(raw: Any) -> int | str | None:
    if raw is None or isinstance(raw, int | str):
        return raw
    return str(raw)


def pdb_from_json(obj: Mapping[str, Any]) -> PdbInfo:
    ns, name, meta = _meta(obj, "PodDisruptionBudget")
    ns = ns or "default"
    what = f"PodDisruptionBudget {ns}/{name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    try:
        selector = LabelSelector.from_json(spec.get("selector"), f"{what}: spec.selector")
        allowed = int(status.get("disruptionsAllowed") or 0)
        generation = int(meta.get("generation") or 0)
        observed = int(status.get("observedGeneration") or 0)
    except SelectorError as e:
        raise StateError(str(e)) from None
    except (TypeError, ValueError):
        raise StateError(f"{what}: status fields must be integers") from None
    return PdbInfo(
        namespace=ns,
        name=name,
        selector=selector,
        disruptions_allowed=allowed,
        min_available=_int_or_str(spec.get("minAvailable")),
        max_unavailable=_int_or_str(spec.get("maxUnavailable")),
        generation=generation,
        observed_generation=observed if status else -1,
    )


def priority_class_from_json(obj: Mapping[str, Any]) -> tuple[str, int]:
    _, name, _ = _meta(obj, "PriorityClass")
    try:
        return name, int(obj.get("value") or 0)
    except (TypeError, ValueError):
        raise StateError(f"PriorityClass {name}: value must be an integer") from None


@dataclass(slots=True)
class MoveLedger:
    """``last_moved`` and ``room_made`` by cool-down key (see ``units.cooldown_key``).
    The ConfigMap holds each map as JSON under the data key of the same name, written
    with dashes (``last-moved``, ``room-made``)."""

    last_moved: dict[str, datetime] = field(default_factory=dict)
    room_made: dict[str, datetime] = field(default_factory=dict)

    def to_data(self) -> dict[str, str]:
        def dump(m: Mapping[str, datetime]) -> str:
            return json.dumps({k: format_time(v) for k, v in sorted(m.items())}, indent=0)

        return {"last-moved": dump(self.last_moved), "room-made": dump(self.room_made)}

    def prune(self, now: datetime, keep_seconds: float) -> None:
        """Forget entries older than ``keep_seconds`` (the cool-down)."""
        for m in (self.last_moved, self.room_made):
            for k in [k for k, t in m.items() if (now - t).total_seconds() >= keep_seconds]:
                del m[k]


def ledger_from_json(obj: Mapping[str, Any]) -> MoveLedger:
    """The move ledger ConfigMap; StateError names a key that cannot be read."""
    ns, name, _ = _meta(obj, "ConfigMap")
    data = obj.get("data") or {}
    out = MoveLedger()
    for key, target in (("last-moved", out.last_moved), ("room-made", out.room_made)):
        raw = data.get(key)
        if not raw:
            continue
        what = f"ConfigMap {ns}/{name}: data.{key}"
        try:
            doc = json.loads(raw)
        except (TypeError, ValueError):
            raise StateError(f"{what}: not a JSON object") from None
        if not isinstance(doc, dict):
            raise StateError(f"{what}: not a JSON object")
        for unit, stamp in doc.items():
            t = _time(stamp, f"{what}[{unit}]")
            if t is not None:
                target[str(unit)] = t
    return out
