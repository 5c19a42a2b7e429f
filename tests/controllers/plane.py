"""The control plane's models in the order a scenario steps them: the Job controller,
the garbage collector, the schedulers asked for and the fake's kubelet."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from tests.controllers.gang_scheduler import GangScheduler
from tests.controllers.gc import GarbageCollector
from tests.controllers.job import JobController
from tests.controllers.native_gang_scheduler import NativeGangScheduler
from tests.controllers.pod_scheduler import PodScheduler
from tests.controllers.rest import Rest
from tests.controllers.runner import StoreController, wall_clock
from tests.kubeapi.kubelet import Kubelet

__all__ = ["control_plane"]


def control_plane(
    url: str,
    store: Any,
    *,
    scheduler: str = "gang",
    clock: Callable[[], datetime] = wall_clock,
    backoff: float = 10.0,
    kubelet: Kubelet | None = None,
) -> list[Any]:
    """The models against the API server at ``url`` (the kubelet on its ``store``).
    ``scheduler``: "gang" (Volcano's rules), "pod" (default-scheduler), "both", or
    "native" (default-scheduler with the native gang rule of the release ``store``
    plays, in place of "pod");
    ``backoff``: the Job controller's pod-failure backoff, in seconds of ``clock``."""
    if scheduler not in ("gang", "pod", "both", "native"):
        raise ValueError(f"scheduler {scheduler!r}: expected gang, pod, both or native")
    models: list[Any] = [
        JobController(Rest(url), clock=clock, backoff=backoff, versions=store.versions),
        GarbageCollector(Rest(url)),
    ]
    if scheduler in ("gang", "both"):
        models.append(GangScheduler(Rest(url), clock=clock))
    if scheduler in ("pod", "both"):
        models.append(PodScheduler(Rest(url), clock=clock))
    if scheduler == "native":
        models.append(NativeGangScheduler(Rest(url), store.versions, clock=clock))
    models.append(StoreController("kubelet", kubelet if kubelet is not None else Kubelet(), store))
    return models
