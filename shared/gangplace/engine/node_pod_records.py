"""The engine's records of Nodes and Pods, read from the JSON the API server returns.

:func:`node_from_json` and :func:`pod_from_json` turn a Node or a Pod object (a plain
dict, as the API or ``kubectl get -o json`` gives it) into the fields placement and
descheduling need: allocatable after the GPU resources are taken out, taints, labels,
readiness; a pod's effective requests as a shape, its owner, its shared-GPU devices.
The snapshot, the informers' cache and the plugin all read nodes and pods here. Pure:
no I/O. Errors are :class:`SnapshotError`, naming the object and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gangplace.engine.model import (
    GPU_SHARE_INDEX,
    MAX_GPUS_PER_POD,
    PodShape,
    ShapeError,
    Taint,
    parse_taints,
    shape_from_pod,
)
from gangplace.engine.quantity import QuantityError, to_milli
from gangplace.engine.requests import ResourceError, parse_resource_list
from gangplace.engine.settings import EngineConfig

__all__ = [
    "NodeRecord",
    "PodRecord",
    "SnapshotError",
    "native_reference",
    "node_from_json",
    "pod_from_json",
]

# Annotations that are large and never needed for placement decisions.
_DROP_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})


# The engine keeps a row of per-device state for every node, as wide as the node with
# the most GPUs; real nodes have 8 or 16, and a count beyond this is a typo.
MAX_GPUS_PER_NODE = 256


class SnapshotError(ValueError):
    """An object that cannot be read into a snapshot; the message names it."""


@dataclass(slots=True)
class NodeRecord:
    name: str
    allocatable: dict[str, int]
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    gpu_resource: str | None = None
    gpu_count: int = 0
    gpu_model: str = ""


@dataclass(slots=True)
class PodRecord:
    """The fields of a pod that placement and descheduling need, and nothing more."""

    namespace: str
    name: str
    shape: PodShape
    node_name: str = ""
    uid: str = ""
    phase: str = "Pending"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    owner_kind: str = ""
    owner_name: str = ""
    owner_uid: str = ""
    owner_group: str = ""  # the API group of the controller (a kind is known by both)
    priority: int = 0
    priority_class: str = ""
    created: str = ""
    # When it began running (RFC 3339): the latest start of its running containers, else
    # status.startTime; '' when not known. Work since then is what a move may lose.
    started: str = ""
    scheduler_name: str = ""
    local_storage: bool = False
    gpu_index: tuple[int, ...] = ()
    preemption_policy: str = ""  # spec.preemptionPolicy ("Never": it preempts nobody)
    # status.nominatedNodeName: the node the scheduler (or another component) holds for
    # this pending pod; '' when none
    nominated_node: str = ""
    # The native gang API group it names (gangplace.engine.native_groups) and its gang
    # there: the group, or one replica of it (1.35's podGroupReplicaKey); '' for none.
    native_group: str = ""
    native_gang: str = ""
    # Set by the snapshot: row of the node the pod is bound to (-1: not bound).
    node: int = -1
    gpus: tuple[int, ...] = ()
    slot: int = -1

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        return self.node >= 0


def _as_str_map(raw: Any, what: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SnapshotError(f"{what}: expected a map of strings")
    # The API only ever sends strings here; copying at C speed matters for 100k pods.
    return dict(raw)


def _whole_gpus(name: str, field: str, raw: Any, cfg: EngineConfig) -> None:
    """A GPU is a device: a node advertising 1.5 would be rounded to 2 and its pods'
    use would no longer add up, so a fraction is refused, naming the field."""
    if not isinstance(raw, Mapping):
        return
    for res in cfg.gpu_resources:
        value = raw.get(res)
        if value is not None and to_milli(value) % 1000:
            raise SnapshotError(
                f'node {name}: status.{field}["{res}"]: "{value}" is not a whole number '
                'of GPUs; allowed: a whole number, such as "8" (a device plugin counts '
                "devices)"
            )


# A field of the wrong type deep in an object (a container that is a number) shows up
# as one of these while it is read; it is reported naming the object, never raised.
_WRONG_TYPE = (AttributeError, TypeError, KeyError, IndexError)


def _sections(obj: Any, kind: str) -> str:
    """Check the object and its top-level sections are objects; its name for messages."""
    if not isinstance(obj, Mapping):
        raise SnapshotError(f"a {kind} that is not an object: {str(obj)[:40]!r}")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    ns = meta.get("namespace") if isinstance(meta, Mapping) else None
    who = f"{kind.lower()} {f'{ns}/' if ns and kind == 'Pod' else ''}{name or '(no name)'}"
    for key in ("metadata", "spec", "status"):
        if obj.get(key) is not None and not isinstance(obj[key], Mapping):
            raise SnapshotError(f"{who}: {key}: expected an object")
    return who


def node_from_json(obj: Mapping[str, Any], config: EngineConfig | None = None) -> NodeRecord:
    """A Node object as the API returns it. A field of the wrong type is a
    SnapshotError naming the node."""
    who = _sections(obj, "Node")
    try:
        return _node_from_json(obj, config)
    except _WRONG_TYPE:
        raise SnapshotError(
            f"{who}: a field holds a value of the wrong type (not as kubectl get -o json "
            "writes a Node)"
        ) from None


def _node_from_json(obj: Mapping[str, Any], config: EngineConfig | None) -> NodeRecord:
    cfg = config or EngineConfig()
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise SnapshotError("node without metadata.name")
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    listed = "allocatable" if status.get("allocatable") else "capacity"
    try:
        alloc = parse_resource_list(status.get(listed))
        taints = parse_taints(spec.get("taints"))
    except (ResourceError, ShapeError) as e:
        raise SnapshotError(f"node {name}: {e}") from None
    _whole_gpus(name, listed, status.get(listed), cfg)
    labels = _as_str_map(meta.get("labels"), f"node {name}: metadata.labels")
    alloc.setdefault("pods", cfg.default_pods_per_node)
    gpu_res, gpu_count = None, 0
    for res in cfg.gpu_resources:
        if alloc.get(res, 0) > 0:
            gpu_res, gpu_count = res, alloc.pop(res)
            break
    if gpu_count > MAX_GPUS_PER_NODE:
        raise SnapshotError(
            f'node {name}: {gpu_res}: "{gpu_count}" is too many GPUs for one node; '
            f"allowed: at most {MAX_GPUS_PER_NODE}"
        )
    for res in cfg.gpu_resources:
        alloc.pop(res, None)
    model = next((labels[k] for k in cfg.gpu_model_labels if labels.get(k)), "")
    conditions = status.get("conditions")
    ready = True
    if conditions:
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return NodeRecord(
        name=name,
        allocatable=alloc,
        labels=labels,
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        gpu_resource=gpu_res,
        gpu_count=gpu_count,
        gpu_model=model,
    )


def _owner(meta: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(kind, name, uid, API group) of the controller, else of the first owner."""
    refs = meta.get("ownerReferences") or ()
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if not chosen:
        return "", "", "", ""
    group = str(chosen.get("apiVersion", "")).rpartition("/")[0]
    return (
        str(chosen.get("kind", "")),
        str(chosen.get("name", "")),
        str(chosen.get("uid", "")),
        group,
    )


def _has_local_storage(spec: Mapping[str, Any]) -> bool:
    """hostPath, or an emptyDir on the node's disk (a memory-backed one is lost with the
    pod anyway and holds nothing a move would lose)."""
    for v in spec.get("volumes") or ():
        if not isinstance(v, dict):
            continue
        if "hostPath" in v:
            return True
        ed = v.get("emptyDir")
        if "emptyDir" in v and not (isinstance(ed, dict) and ed.get("medium") == "Memory"):
            return True
    return False


def _started(status: Mapping[str, Any]) -> str:
    """When the pod's current run began: its running containers' latest
    ``state.running.startedAt`` (a container restarted in place lost what it had done),
    else ``status.startTime`` (kubelet acknowledged the pod); '' when neither is set."""
    latest = ""
    for c in status.get("containerStatuses") or ():
        if not isinstance(c, Mapping):
            continue
        state = c.get("state")
        running = state.get("running") if isinstance(state, Mapping) else None
        at = running.get("startedAt") if isinstance(running, Mapping) else None
        # RFC 3339 in UTC as the API writes it ("...Z") sorts as text.
        if isinstance(at, str) and at > latest:
            latest = at
    return latest or str(status.get("startTime") or "")


def pod_from_json(
    obj: Mapping[str, Any],
    config: EngineConfig | None = None,
    shapes: dict[PodShape, PodShape] | None = None,
) -> PodRecord:
    """A Pod object as the API returns it. ``shapes`` interns equal shapes. A field of
    the wrong type is a SnapshotError naming the pod."""
    try:
        return _pod_from_json(obj, config, shapes)
    except _WRONG_TYPE:
        who = _sections(obj, "Pod")
        raise SnapshotError(
            f"{who}: a field holds a value of the wrong type (not as kubectl get -o json "
            "writes a Pod)"
        ) from None


def native_reference(spec: Mapping[str, Any]) -> tuple[str, str]:
    """``(group, gang)`` a pod's spec names in the native gang API (KEP-4671), ``("",
    "")`` for none: the PodGroup of ``spec.schedulingGroup.podGroupName`` (1.36+), or of
    ``spec.workloadRef{name, podGroup, podGroupReplicaKey}`` (1.35) the group
    ``<name>-<podGroup>``, whose every replica key is a gang of its own (kubernetes
    ``staging/src/k8s.io/api/core/v1/types.go`` at release-1.35 and release-1.36)."""
    sg = spec.get("schedulingGroup")
    if isinstance(sg, Mapping) and sg.get("podGroupName"):
        name = str(sg["podGroupName"])
        return name, name
    ref = spec.get("workloadRef")
    if isinstance(ref, Mapping) and ref.get("name") and ref.get("podGroup"):
        group = f"{ref['name']}-{ref['podGroup']}"
        replica = str(ref.get("podGroupReplicaKey") or "")
        return group, f"{group}-{replica}" if replica else group
    return "", ""


def _priority(who: str, raw: Any) -> int:
    """``spec.priority``: the API server writes the PriorityClass's value, an int32."""
    if raw is None:
        return 0
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = int(raw)
    except (TypeError, ValueError):
        raise SnapshotError(
            f"{who}: spec.priority: {str(raw)[:40]!r} is not an integer; allowed: a whole "
            "number (the API server sets it from the pod's PriorityClass)"
        ) from None
    return value


def _milli_or_zero(value: Any) -> int:
    """A quantity in thousandths; 0 for one that does not parse (the request parser
    names it when it counts)."""
    try:
        return to_milli(value)
    except QuantityError:
        return 0


def _whole_gpu_requests(who: str, spec: Mapping[str, Any], cfg: EngineConfig) -> None:
    """A GPU is a device: the API server refuses a pod asking for a fraction of one as an
    extended resource (a share is asked for by annotation), and the engine would round
    it up; refused here, naming the container and the value."""
    for section in ("initContainers", "containers"):
        containers = spec.get(section)
        for i, c in enumerate(containers if isinstance(containers, list) else ()):
            # Wrong types are the shape's to name (it runs next).
            res = c.get("resources") if isinstance(c, Mapping) else None
            for kind in ("requests", "limits"):
                values = res.get(kind) if isinstance(res, Mapping) else None
                if not isinstance(values, Mapping):
                    continue
                for gpu in cfg.gpu_resources:
                    value = values.get(gpu)
                    if value is not None and _milli_or_zero(value) > MAX_GPUS_PER_POD * 1000:
                        raise SnapshotError(
                            f'{who}: spec.{section}[{i}].resources.{kind}["{gpu}"]: '
                            f'"{value}" is not a GPU count a pod can ask for; allowed: a '
                            f"whole number up to {MAX_GPUS_PER_POD}"
                        )
                    if value is not None and _milli_or_zero(value) % 1000:
                        raise SnapshotError(
                            f'{who}: spec.{section}[{i}].resources.{kind}["{gpu}"]: '
                            f'"{value}" is not a whole number of GPUs; allowed: a whole '
                            'number, such as "1" (a share of a GPU is asked for with the '
                            "alibabacloud.com/gpu-milli annotation)"
                        )


def _pod_from_json(
    obj: Mapping[str, Any],
    config: EngineConfig | None,
    shapes: dict[PodShape, PodShape] | None,
) -> PodRecord:
    cfg = config or EngineConfig()
    meta = obj.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or ""
    ns = meta.get("namespace") or "default"
    spec = obj.get("spec") or {}
    if isinstance(spec, Mapping):
        # First, so that a bad GPU value is named by its container, not by the shape.
        _whole_gpu_requests(f"pod {ns}/{name}", spec, cfg)
    try:
        shape = shape_from_pod(obj, cfg.gpu_resources)
    except ShapeError as e:
        raise SnapshotError(f"pod {ns}/{name}: {e}") from None
    if shapes is not None:
        shape = shapes.setdefault(shape, shape)
    status = obj.get("status") or {}
    annotations = _as_str_map(meta.get("annotations"), f"pod {ns}/{name}: annotations")
    for k in _DROP_ANNOTATIONS & annotations.keys():
        del annotations[k]
    gpu_index: tuple[int, ...] = ()
    if annotations.get(GPU_SHARE_INDEX):
        try:
            gpu_index = tuple(int(x) for x in annotations[GPU_SHARE_INDEX].split(","))
        except ValueError:
            raise SnapshotError(
                f"pod {ns}/{name}: annotation {GPU_SHARE_INDEX}="
                f"{annotations[GPU_SHARE_INDEX]!r}: expected comma-separated GPU indices"
            ) from None
    kind, owner, owner_uid, owner_group = _owner(meta)
    native_group, native_gang = native_reference(spec)
    started = _started(status)
    return PodRecord(
        namespace=ns,
        name=name,
        shape=shape,
        node_name=str(spec.get("nodeName") or ""),
        uid=str(meta.get("uid") or ""),
        phase=str(status.get("phase") or "Pending"),
        labels=_as_str_map(meta.get("labels"), f"pod {ns}/{name}: labels"),
        annotations=annotations,
        owner_kind=kind,
        owner_name=owner,
        owner_uid=owner_uid,
        owner_group=owner_group,
        priority=_priority(f"pod {ns}/{name}", spec.get("priority")),
        priority_class=str(spec.get("priorityClassName") or ""),
        created=str(meta.get("creationTimestamp") or ""),
        started=started,
        scheduler_name=str(spec.get("schedulerName") or ""),
        local_storage=_has_local_storage(spec),
        gpu_index=gpu_index,
        preemption_policy=str(spec.get("preemptionPolicy") or ""),
        nominated_node=str(status.get("nominatedNodeName") or ""),
        native_group=native_group,
        native_gang=native_gang,
    )
