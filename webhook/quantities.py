"""Engine resource integers back to exact Kubernetes quantities.

The engine's own ``format_quantity`` is for reports and rounds (``1.5Gi`` to one
decimal); a PodGroup's ``minResources`` must not round, so we write exact forms only:
``24300m``, ``192Gi``, or plain bytes when no binary suffix divides evenly.
"""

from __future__ import annotations

from collections.abc import Iterable

from gangplace.engine import PodShape
from gangplace.engine.quantity import unit_of

__all__ = ["exact_quantity", "resource_list"]

_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def exact_quantity(resource: str, value: int) -> str:
    """An engine integer of ``resource`` as a quantity string that parses back to it."""
    unit = unit_of(resource)
    if unit == "milli":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if unit == "bytes" and value:
        for suffix, factor in _BINARY:
            if value % factor == 0:
                return f"{value // factor}{suffix}"
    return str(value)


def resource_list(members: Iterable[tuple[PodShape, int]]) -> dict[str, str]:
    """The summed requests of ``count`` pods of each shape, as a ResourceList.

    Whole GPUs count under their device resource (``nvidia.com/gpu``). The ``pods`` slot
    and fractional GPU shares (which no ResourceList can express) are left out.
    """
    total: dict[str, int] = {}
    for shape, count in members:
        if count <= 0:
            continue
        for name, v in shape.requests:
            if name != "pods" and v:
                total[name] = total.get(name, 0) + v * count
        if shape.is_gpu and not shape.is_shared_gpu and shape.gpu_resource:
            total[shape.gpu_resource] = total.get(shape.gpu_resource, 0) + shape.gpu_count * count
    return {k: exact_quantity(k, total[k]) for k in sorted(total)}
