"""Plain, hashable records the engine works on, parsed from Kubernetes JSON.

A :class:`PodShape` is everything that decides *where* a pod may run: its effective
request, its GPU demand and its constraints. Many pods share a shape (every worker of a
job does), so the snapshot caches vectors and static filters per shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gangplace.engine.quantity import to_int, to_milli
from gangplace.engine.requests import ResourceError, pod_requests

__all__ = [
    "DEFAULT_GPU_RESOURCES",
    "GPU_SHARE_COUNT",
    "GPU_SHARE_INDEX",
    "GPU_SHARE_MILLI",
    "GPU_SHARE_MODEL",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PodShape",
    "ShapeError",
    "Taint",
    "Toleration",
    "shape_from_pod",
]

# Whole-GPU extended resources that the engine tracks per device.
DEFAULT_GPU_RESOURCES: tuple[str, ...] = ("nvidia.com/gpu", "amd.com/gpu")

# The GPU-sharing convention of Alibaba's open-gpu-share scheduler plugin, which the FGD
# trace uses: a pod asks for gpu-count GPUs with gpu-milli thousandths of each.
GPU_SHARE_MILLI = "alibabacloud.com/gpu-milli"
GPU_SHARE_COUNT = "alibabacloud.com/gpu-count"
# Far more GPUs than a node holds: a count past it is junk ("1Ei", a huge gpu-count
# annotation) that would overflow the engine's 64-bit per-node sums. Below it, a pod too
# big for any node is read and reported as one that cannot be placed.
MAX_GPUS_PER_POD = 65536
GPU_SHARE_MODEL = "alibabacloud.com/gpu-card-model"
GPU_SHARE_INDEX = "alibabacloud.com/gpu-index"

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


class ShapeError(ValueError):
    """A pod or node field the engine cannot interpret; the message names it."""


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """The API server's rule: empty effect matches all, empty key with Exists matches all."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements that must all hold; a pod's terms are ORed."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PodShape:
    """A pod as the placement engine sees it.

    ``requests`` holds every resource except whole-GPU devices, which are described by
    ``gpu_count`` devices of ``gpu_milli`` thousandths each (1000 for a whole GPU).
    ``gpu_resource`` is the device resource asked for (``nvidia.com/gpu``), or ``None``
    for a GPU-sharing pod that any GPU node may host. ``gpu_models`` restricts the GPU
    model (empty: any).
    """

    requests: tuple[tuple[str, int], ...] = ()
    gpu_count: int = 0
    gpu_milli: int = 0
    gpu_resource: str | None = None
    gpu_models: tuple[str, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    _request_map: dict[str, int] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    def __post_init__(self) -> None:
        if self.gpu_count > MAX_GPUS_PER_POD:
            raise ShapeError(
                f"{self.gpu_count} GPUs is not a GPU count a pod can ask for; allowed: a "
                f"whole number up to {MAX_GPUS_PER_POD}"
            )
        if self.gpu_count < 0 or not 0 <= self.gpu_milli <= 1000:
            raise ShapeError(
                f"GPU demand {self.gpu_count} x {self.gpu_milli} milli is out of range "
                "(count >= 0, 0..1000 milli per GPU)"
            )
        if self.gpu_count > 1 and self.gpu_milli != 1000:
            raise ShapeError("a pod that shares a GPU may use only one GPU")
        object.__setattr__(self, "_request_map", dict(self.requests))

    @classmethod
    def of(
        cls,
        requests: Mapping[str, int] | None = None,
        *,
        gpus: int = 0,
        gpu_milli: int | None = None,
        gpu_resource: str | None = "nvidia.com/gpu",
        **kw: Any,
    ) -> PodShape:
        """A convenient constructor: ``PodShape.of({"cpu": 4000}, gpus=1)``."""
        req = dict(requests or {})
        req.setdefault("pods", 1)
        milli = 1000 if gpu_milli is None else gpu_milli
        if gpus == 0:
            milli, gpu_resource = 0, None
        elif milli < 1000:
            gpu_resource = None
        return cls(
            requests=tuple(sorted((k, v) for k, v in req.items() if v)),
            gpu_count=gpus,
            gpu_milli=milli,
            gpu_resource=gpu_resource,
            **kw,
        )

    @classmethod
    def typed(
        cls, cpu: str, memory: str, gpus: int | None = None, gpu_milli: int | None = None
    ) -> PodShape:
        """A shape from what a user types: quantities for CPU and memory, a GPU count
        and an optional share in thousandths (a share alone means one GPU). Raises
        QuantityError or ShapeError (both ValueError) naming what is wrong."""
        req = {"cpu": to_milli(cpu), "memory": to_int(memory)}
        count = (1 if gpu_milli is not None else 0) if gpus is None else gpus
        return cls.of(req, gpus=count, gpu_milli=gpu_milli)

    @property
    def request_map(self) -> Mapping[str, int]:
        return self._request_map

    def request(self, resource: str) -> int:
        return self._request_map.get(resource, 0)

    @property
    def gpu_demand_milli(self) -> int:
        """Total GPU demand in thousandths of a GPU (k x d)."""
        return self.gpu_count * self.gpu_milli

    @property
    def is_gpu(self) -> bool:
        return self.gpu_count > 0 and self.gpu_milli > 0

    @property
    def is_shared_gpu(self) -> bool:
        return self.is_gpu and self.gpu_milli < 1000

    @property
    def has_static_constraints(self) -> bool:
        return bool(self.node_selector or self.affinity or self.gpu_models)

    def describe(self) -> str:
        """A short form for reports: ``cpu=4 memory=16Gi gpu=2``."""
        from gangplace.engine.quantity import format_quantity

        parts = [f"{k}={format_quantity(k, v)}" for k, v in self.requests if k != "pods"]
        if self.is_shared_gpu:
            parts.append(f"gpu={self.gpu_milli}m")
        elif self.is_gpu:
            parts.append(f"gpu={self.gpu_count}")
        return " ".join(parts) or "empty"


# --- parsing from Kubernetes JSON -------------------------------------------------------


def _taint(raw: Mapping[str, Any]) -> Taint:
    key = raw.get("key")
    effect = raw.get("effect", "")
    if not isinstance(key, str) or not key or effect not in _EFFECTS:
        raise ShapeError(f"taint {dict(raw)!r}: needs a key and an effect in {_EFFECTS}")
    return Taint(key, str(raw.get("value") or ""), effect)


def parse_taints(raw: Any) -> tuple[Taint, ...]:
    return tuple(_taint(t) for t in raw or ())


def _toleration(raw: Mapping[str, Any]) -> Toleration:
    op = raw.get("operator") or "Equal"
    if op not in ("Equal", "Exists"):
        raise ShapeError(f"toleration {dict(raw)!r}: operator must be Equal or Exists")
    effect = raw.get("effect") or ""
    if effect and effect not in _EFFECTS:
        raise ShapeError(f"toleration {dict(raw)!r}: effect must be one of {_EFFECTS}")
    return Toleration(str(raw.get("key") or ""), op, str(raw.get("value") or ""), effect)


def _requirement(raw: Mapping[str, Any]) -> NodeSelectorRequirement:
    op = raw.get("operator")
    if op not in _OPERATORS or not isinstance(raw.get("key"), str):
        raise ShapeError(
            f"node selector requirement {dict(raw)!r}: needs a key and an operator in {_OPERATORS}"
        )
    values = tuple(str(v) for v in raw.get("values") or ())
    if op in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
        raise ShapeError(f"node selector requirement {dict(raw)!r}: {op} needs one integer")
    return NodeSelectorRequirement(str(raw["key"]), str(op), values)


def parse_required_affinity(spec: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    node_aff = ((spec.get("affinity") or {}).get("nodeAffinity")) or {}
    required = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = []
    for term in required.get("nodeSelectorTerms") or ():
        terms.append(
            NodeSelectorTerm(
                tuple(_requirement(r) for r in term.get("matchExpressions") or ()),
                tuple(_requirement(r) for r in term.get("matchFields") or ()),
            )
        )
    return tuple(terms)


def _int_annotation(annotations: Mapping[str, Any], key: str) -> int | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ShapeError(f"annotation {key}={raw!r}: expected an integer") from None


def _items(raw: Any) -> tuple[Any, ...]:
    return tuple(raw.items()) if raw else ()


def _resources_key(containers: Any) -> tuple[Any, ...]:
    out = []
    for c in containers or ():
        res = c.get("resources") or {}
        out.append((_items(res.get("requests")), _items(res.get("limits")), c.get("restartPolicy")))
    return tuple(out)


def _shape_key(
    spec: Mapping[str, Any], annotations: Mapping[str, Any], gpus: tuple[str, ...]
) -> Any:
    """Everything ``shape_from_pod`` reads, as a hashable value (raises TypeError when
    some part is not hashable, i.e. malformed)."""
    return (
        _resources_key(spec.get("containers")),
        _resources_key(spec.get("initContainers")),
        _items(spec.get("overhead")),
        _items(spec.get("nodeSelector")),
        repr(spec.get("affinity")),
        repr(spec.get("tolerations")),
        annotations.get(GPU_SHARE_MILLI),
        annotations.get(GPU_SHARE_COUNT),
        annotations.get(GPU_SHARE_MODEL),
        gpus,
    )


# Pods of one job share one shape; remembering shapes by what they were read from makes
# reading 100k pods several times faster. Bounded; cleared when full.
_SHAPES: dict[Any, PodShape] = {}
_SHAPES_MAX = 1 << 15


def shape_from_pod(
    pod: Mapping[str, Any], gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES
) -> PodShape:
    """The shape of a Pod object (or of a pod template: ``{"metadata":..., "spec":...}``)."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        raise ShapeError("pod has no spec")
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    try:
        key = _shape_key(spec, annotations, gpu_resources)
        hit = _SHAPES.get(key)
    except (TypeError, AttributeError):
        key, hit = None, None  # malformed: the full reading below names the problem
    if hit is not None:
        return hit
    try:
        shape = _read_shape(spec, annotations, gpu_resources)
    except (AttributeError, TypeError) as e:
        raise ShapeError(f"pod spec has a field of the wrong type ({e})") from None
    if key is not None:
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.clear()
        _SHAPES[key] = shape
    return shape


def _read_shape(
    spec: Mapping[str, Any], annotations: Mapping[str, Any], gpu_resources: tuple[str, ...]
) -> PodShape:
    try:
        req = pod_requests(spec)
    except ResourceError as e:
        raise ShapeError(str(e)) from None

    gpu_count, gpu_milli, gpu_res = 0, 0, None
    for name in gpu_resources:
        n = req.pop(name, 0)
        if n and gpu_res is None:
            gpu_count, gpu_milli, gpu_res = n, 1000, name
    share_milli = _int_annotation(annotations, GPU_SHARE_MILLI)
    if share_milli is not None and gpu_res is None:
        count = _int_annotation(annotations, GPU_SHARE_COUNT)
        if count is not None and count > MAX_GPUS_PER_POD:
            raise ShapeError(
                f'{GPU_SHARE_COUNT}: "{count}" is not a GPU count a pod can ask for; allowed: '
                f"a whole number up to {MAX_GPUS_PER_POD}"
            )
        gpu_count = 1 if count is None else count
        gpu_milli = min(max(share_milli, 0), 1000)
        if gpu_count and gpu_milli == 0:
            gpu_count = 0
        gpu_res = None if gpu_milli < 1000 else gpu_resources[0]
    models = tuple(m for m in str(annotations.get(GPU_SHARE_MODEL) or "").split("|") if m)
    try:
        return PodShape(
            requests=tuple(sorted(req.items())),
            gpu_count=gpu_count,
            gpu_milli=gpu_milli,
            gpu_resource=gpu_res,
            gpu_models=models,
            node_selector=tuple(sorted((spec.get("nodeSelector") or {}).items())),
            affinity=parse_required_affinity(spec),
            tolerations=tuple(_toleration(t) for t in spec.get("tolerations") or ()),
        )
    except AttributeError as e:
        raise ShapeError(f"pod spec has a field of the wrong type: {e}") from None
