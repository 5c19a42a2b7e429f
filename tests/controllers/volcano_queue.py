"""Volcano's install and its queue controller, as far as the Queues a cluster shows.

- The queues Volcano makes when it starts: vc-scheduler creates the ``default`` Queue
  (weight 1, reclaimable) at start, retrying until it exists (volcano-sh/volcano v1.7.0
  ``pkg/scheduler/cache/cache.go`` ``newSchedulerCache``), and from v1.11 first a
  ``root`` Queue (weight 1, not reclaimable) for hierarchical queues (v1.11.0 and later
  ``newDefaultAndRootQueue``; v1.10.0 has none). Their spec as the API server keeps
  it, ``guarantee: {}`` included, as volcano-gang-lifecycle recorded the default
  Queue of v1.7.
- The queue controller (vc-controller-manager, v1.7.0
  ``pkg/controllers/queue/queue_controller_action.go`` ``syncQueue`` and
  ``pkg/controllers/queue/state/open.go``): a Queue without a state is opened -- its
  status (through the status subresource) has ``state: Open`` and an empty
  ``reservation``. Closing and closing down (the bus Commands) are not modelled.

The scheduler's own ``status.allocated`` is not modelled. The in-memory API server runs
these itself whenever Volcano is in its stack (``ApiStore.versions``), so a Queue a test
creates is Open by the time the next request is answered, as a cluster's controller
makes it within a moment.
"""

from __future__ import annotations

from typing import Any

from tests.kubeapi.versions import Release

Json = dict[str, Any]

__all__ = ["installed_queues", "synced_status"]

VOLCANO_API = "scheduling.volcano.sh/v1beta1"
# what syncQueue carries over: the counts it recomputes, and the scheduler's allocation
_KEPT = ("allocated", "pending", "running", "unknown", "inqueue", "completed")


def _queue(name: str, *, reclaimable: bool) -> Json:
    return {
        "apiVersion": VOLCANO_API,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"guarantee": {}, "reclaimable": reclaimable, "weight": 1},
    }


def installed_queues(volcano: Release) -> list[Json]:
    """The Queues vc-scheduler creates at start, in its order."""
    queues = [_queue("default", reclaimable=True)]
    if volcano >= Release(1, 11):
        queues.insert(0, _queue("root", reclaimable=False))
    return queues


def synced_status(queue: Json) -> Json | None:
    """The status the queue controller writes for ``queue``; None when it has nothing
    to change. (Its counts of the Queue's PodGroups by phase are not modelled: the
    queue is synced when it is written, not when its PodGroups are.)"""
    old: Json = queue.get("status") or {}
    state = old.get("state") or ""
    status: Json = {k: v for k, v in old.items() if k in _KEPT}
    status["state"] = "Open" if state in ("", "Open") else state
    status["reservation"] = old.get("reservation") or {}
    return None if status == old else status
