"""A pod's effective resource request, computed the way the kube-scheduler does.

Effective request = max(sum of app containers + sum of restartable init containers
("sidecars"), the largest regular init container + the sidecars started before it)
+ pod overhead. A missing request with a limit set defaults to the limit, as the API
server's defaulting does. Values are engine integers: milli-CPU, bytes, counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gangplace.engine.quantity import QuantityError, to_int, to_milli, unit_of

__all__ = [
    "ResourceError",
    "add_into",
    "container_requests",
    "parse_resource_list",
    "pod_requests",
    "to_engine_units",
]

Resources = dict[str, int]


class ResourceError(ValueError):
    """A resource list that names a bad quantity, or a negative request."""


def to_engine_units(resource: str, value: str | int | float) -> int:
    """One quantity of ``resource`` as the engine's integer (milli-CPU, bytes, counts)."""
    key = (resource, value)
    hit = _UNITS.get(key) if isinstance(value, str) else None
    if hit is not None:
        return hit
    n = _to_engine_units(resource, value)
    if isinstance(value, str) and len(_UNITS) < _UNITS_MAX:
        _UNITS[key] = n
    return n


# Clusters repeat the same few quantity strings endlessly; remember their values.
_UNITS: dict[tuple[str, str | int | float], int] = {}
_UNITS_MAX = 1 << 16


def _to_engine_units(resource: str, value: str | int | float) -> int:
    try:
        n = to_milli(value) if unit_of(resource) == "milli" else to_int(value)
    except QuantityError as e:
        raise ResourceError(f"resource {resource!r}: {e}") from None
    if n < 0:
        raise ResourceError(f"resource {resource!r}: negative quantity {value!r}")
    if n > MAX_QUANTITY:
        raise ResourceError(
            f"resource {resource!r}: {str(value)[:24]!r} is too large (at most 2^62 "
            "engine units: milli-CPU, bytes or counts)"
        )
    return n


# The engine sums quantities in int64 arrays; nothing real comes near this (2^62 bytes
# is 4 EiB), and a larger value would overflow them.
MAX_QUANTITY = 2**62


def parse_resource_list(raw: Mapping[str, Any] | None) -> Resources:
    """A Kubernetes ResourceList (``{"cpu": "500m", ...}``) in engine units."""
    if not raw:
        return {}
    if not isinstance(raw, Mapping):
        raise ResourceError(f"expected a map of resource name to quantity, got {raw!r}")
    return {str(k): to_engine_units(str(k), v) for k, v in raw.items()}


def container_requests(container: Mapping[str, Any]) -> Resources:
    """Requests of one container; a limit stands in for a missing request."""
    res = container.get("resources") or {}
    req = parse_resource_list(res.get("requests"))
    for name, value in parse_resource_list(res.get("limits")).items():
        req.setdefault(name, value)
    return req


def add_into(total: Resources, more: Mapping[str, int]) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


def _max_into(total: Resources, other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > total.get(k, 0):
            total[k] = v


def _is_sidecar(container: Mapping[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


def pod_requests(spec: Mapping[str, Any], *, count_pod: bool = True) -> Resources:
    """The effective request of a pod spec (``pod["spec"]``), plus one ``pods`` slot."""
    total: Resources = {}
    containers: Iterable[Mapping[str, Any]] = spec.get("containers") or ()
    for c in containers:
        add_into(total, container_requests(c))

    # Sidecars run for the pod's whole life; regular init containers run one at a time,
    # each beside the sidecars declared before it (KEP-753).
    sidecars: Resources = {}
    init_peak: Resources = {}
    for c in spec.get("initContainers") or ():
        req = container_requests(c)
        if _is_sidecar(c):
            add_into(sidecars, req)
            _max_into(init_peak, sidecars)
        else:
            running = dict(sidecars)
            add_into(running, req)
            _max_into(init_peak, running)
    add_into(total, sidecars)
    _max_into(total, init_peak)

    add_into(total, parse_resource_list(spec.get("overhead")))
    if count_pod:
        total["pods"] = total.get("pods", 0) + 1
    return {k: v for k, v in total.items() if v}
