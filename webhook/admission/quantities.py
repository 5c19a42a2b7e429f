"""A PodGroup's ``minResources``: summed engine requests as an exact ResourceList."""

from __future__ import annotations

from collections.abc import Iterable

from gangplace.engine import PodShape
from gangplace.engine.quantity import exact_quantity

__all__ = ["exact_quantity", "resource_list"]


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
