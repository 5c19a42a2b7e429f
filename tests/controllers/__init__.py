"""Models of the controllers corral meets, run beside the in-memory API server: the Job
controller, the garbage collector, a gang scheduler with Volcano's rules, a
pod-by-pod scheduler, kube-scheduler with the native gang rule
(:mod:`.native_gang_scheduler`), and the workload controllers whose suspend corral uses
(:mod:`.training_operator`, :mod:`.jobset`, :mod:`.kuberay`, :mod:`.kueue`) (the
kubelet model is the fake's own, in ``tests.kubeapi.kubelet``, and runs in step with these through
:class:`StoreController`). They talk to the server over HTTP like any controller, so their
writes go through admission, authorisation and the deletion rules.

    rest = Rest(api.url)
    models = ControllerSet([JobController(rest, backoff=0), GarbageCollector(rest),
                            GangScheduler(rest)])
    await models.settle()            # deterministic: step until nothing changes
    models.start(period=0.05)        # or as asyncio tasks ...
    await models.stop()              # ... stopped (and their HTTP sessions closed)

:func:`control_plane` builds the usual set in order (Job controller, garbage collector,
the schedulers asked for, the kubelet).
"""

from tests.controllers.gang_scheduler import GROUP_NAME, GangScheduler
from tests.controllers.gc import GarbageCollector
from tests.controllers.job import JOB_TRACKING, JobController
from tests.controllers.native_gang_scheduler import NativeGangScheduler
from tests.controllers.plane import control_plane
from tests.controllers.pod_scheduler import PodScheduler
from tests.controllers.rest import Rest, RestError
from tests.controllers.runner import (
    Controller,
    ControllerSet,
    ManualClock,
    NotSettled,
    StoreController,
    until,
    wall_clock,
)

__all__ = [
    "GROUP_NAME",
    "JOB_TRACKING",
    "Controller",
    "ControllerSet",
    "GangScheduler",
    "GarbageCollector",
    "JobController",
    "ManualClock",
    "NativeGangScheduler",
    "NotSettled",
    "PodScheduler",
    "Rest",
    "RestError",
    "StoreController",
    "control_plane",
    "until",
    "wall_clock",
]
