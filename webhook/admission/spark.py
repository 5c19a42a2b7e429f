"""Spark: a SparkApplication's pods as the engine sees them, and Spark's pods by label.

The Spark operator (sparkoperator.k8s.io/v1beta2) does not keep pod templates: its
driver and executor are described by cores, memory, gpu, labels and annotations, from
which spark-submit builds the pods. :func:`pod_view` turns one such description into
the pod Spark will make, so that the engine can read its requests: cpu is
``coreRequest`` or ``cores`` (default 1), memory is ``memory`` (default 1g) plus the
overhead (``memoryOverhead``, else ``memoryOverheadFactor`` of it -- 0.1, or 0.4 for
Python and R -- at least 384 MiB), the gpu is ``gpu.name: gpu.quantity``; a pod
``template`` gives the rest.

Spark labels every pod it makes: ``spark-role`` (driver or executor) and
``spark-app-selector`` (the application id), and the operator adds
``sparkoperator.k8s.io/app-name``. :func:`spark_pod` reads them, so a plain
``spark-submit``'s pods (no operator) are grouped into one gang by application id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from webhook.admission.roles import WorkloadError

__all__ = [
    "APP_SELECTOR",
    "OPERATOR_APP",
    "SPARK_ROLE",
    "SparkPod",
    "pod_view",
    "spark_pod",
]

SPARK_ROLE: Final = "spark-role"
APP_SELECTOR: Final = "spark-app-selector"
OPERATOR_APP: Final = "sparkoperator.k8s.io/app-name"
_ROLES: Final = ("driver", "executor")

_MIB: Final = 1024 * 1024
_MIN_OVERHEAD_MIB: Final = 384
# Spark's byte strings: a number and an optional binary unit; no unit means MiB.
_BYTES = re.compile(r"^\s*(\d+)\s*(b|k|kb|m|mb|g|gb|t|tb|p|pb)?\s*$", re.IGNORECASE)
_UNIT_MIB: Final = {
    "b": 1 / _MIB,
    "k": 1 / 1024,
    "kb": 1 / 1024,
    "m": 1,
    "mb": 1,
    "g": 1024,
    "gb": 1024,
    "t": 1024**2,
    "tb": 1024**2,
    "p": 1024**3,
    "pb": 1024**3,
}


def _mib(raw: Any, where: str) -> int:
    """A Spark memory string ("512m", "4g", "2048") in MiB, rounded up."""
    m = _BYTES.match(raw) if isinstance(raw, str) else None
    if m is None:
        raise WorkloadError(
            f"{where}: {raw!r} is not a Spark memory size (a number with b, k, m, g, t or p)"
        )
    value = int(m.group(1)) * _UNIT_MIB[(m.group(2) or "m").lower()]
    return int(-(-value // 1))


def _factor(app: Mapping[str, Any]) -> float:
    raw = app.get("memoryOverheadFactor")
    if raw is not None:
        try:
            f = float(raw)
        except (TypeError, ValueError):
            f = -1.0
        if not 0 <= f < 100:
            raise WorkloadError(f"spec.memoryOverheadFactor: {raw!r} is not a factor (0.1)")
        return f
    kind = str(app.get("type") or "").lower()
    return 0.4 if kind in ("python", "r") else 0.1


def _requests(role: Mapping[str, Any], app: Mapping[str, Any], where: str) -> dict[str, str]:
    cpu = role.get("coreRequest")
    if cpu is None:
        cores = role.get("cores", 1)
        if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
            raise WorkloadError(f"{where}.cores: {cores!r} is not a whole number of cores (>= 1)")
        cpu = str(cores)
    elif not isinstance(cpu, str) or not cpu.strip():
        raise WorkloadError(f"{where}.coreRequest: {cpu!r} is not a CPU quantity")
    memory = _mib(role.get("memory", "1g"), f"{where}.memory")
    over = role.get("memoryOverhead")
    if over is not None:
        overhead = _mib(over, f"{where}.memoryOverhead")
    else:
        overhead = max(int(memory * _factor(app)), _MIN_OVERHEAD_MIB)  # Spark truncates
    out = {"cpu": str(cpu), "memory": f"{memory + overhead}Mi"}
    gpu = role.get("gpu")
    if gpu is not None:
        name = gpu.get("name") if isinstance(gpu, dict) else None
        qty = gpu.get("quantity") if isinstance(gpu, dict) else None
        if not isinstance(name, str) or not name:
            raise WorkloadError(f"{where}.gpu.name: expected a resource name (nvidia.com/gpu)")
        if isinstance(qty, bool) or not isinstance(qty, int) or qty < 0:
            raise WorkloadError(f"{where}.gpu.quantity: {qty!r} is not a whole number (>= 0)")
        if qty:
            out[name] = str(qty)
    return out


def pod_view(role: Mapping[str, Any], app: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The pod the operator will make from ``role`` (spec.driver or spec.executor of
    ``app``, the SparkApplication's spec), as ``{metadata, spec}``. Raises
    WorkloadError naming a field Spark could not read either."""
    tmpl = role.get("template")
    tspec = tmpl.get("spec") if isinstance(tmpl, dict) else None
    tspec = tspec if isinstance(tspec, dict) else {}
    base: dict[str, Any] = {}
    containers = tspec.get("containers")
    if isinstance(containers, list) and containers and isinstance(containers[0], dict):
        res = containers[0].get("resources")
        req = res.get("requests") if isinstance(res, dict) else None
        if isinstance(req, dict):
            base.update(req)
    base.update(_requests(role, app, where))
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": f"spark-kubernetes-{where.rpartition('.')[2]}",
                "resources": {"requests": base},
            }
        ],
    }
    selector: dict[str, Any] = {}
    for src in (tspec.get("nodeSelector"), app.get("nodeSelector"), role.get("nodeSelector")):
        if isinstance(src, dict):
            selector.update(src)
    if selector:
        spec["nodeSelector"] = selector
    for key in ("tolerations", "affinity", "priorityClassName"):
        v = role.get(key)
        if v is None:
            v = tspec.get(key)
        if v is not None:
            spec[key] = v
    meta: dict[str, Any] = {}
    for key in ("labels", "annotations"):
        v = role.get(key)
        if isinstance(v, dict):
            meta[key] = v
    return {"metadata": meta, "spec": spec}


@dataclass(frozen=True, slots=True)
class SparkPod:
    """A pod Spark made: its role, its application id, and the operator's application
    name when the operator launched it."""

    role: str
    selector: str
    app: str | None


def spark_pod(meta: Mapping[str, Any]) -> SparkPod | None:
    """The Spark labels of a pod, or None when it is not a Spark driver or executor."""
    labels = meta.get("labels")
    if not isinstance(labels, dict):
        return None
    role = labels.get(SPARK_ROLE)
    selector = labels.get(APP_SELECTOR)
    if role not in _ROLES or not isinstance(selector, str) or not selector:
        return None
    app = labels.get(OPERATOR_APP)
    return SparkPod(role, selector, app if isinstance(app, str) and app else None)
