"""The peer baseline of the gang study: the kubernetes-sigs descheduler's
HighNodeUtilization, which evicts pods from under-used nodes so that the scheduler packs
them elsewhere -- pod by pod, with no notion of gangs.

Written from sigs.k8s.io/descheduler, ``pkg/framework/plugins/nodeutilization/``:
``highnodeutilization.go`` (``Balance``, commit 9fed73148ccab1ce1195792a2d6fc3d94f3adec9)
and ``nodeutilization.go`` (``evictPodsFromSourceNodes``, ``evictPods``,
``sortNodesByUsage``, commit 80f9c0ada6b7c78f98b5bd29073bde97283740a3):

- usage is what pods request, not what they use; a node is *underutilized* when every
  resource given a threshold is below it (here the GPUs: ``thresholds: {gpu: 50}``);
- nothing is done when no node is underutilized, when no more than ``numberOfNodes``
  are (default 0), when all are, or when no other node is schedulable;
- underutilized nodes are emptied in ascending order of usage (memory + CPU milli + pods
  + extended resources, summed as numbers), their pods lowest priority first;
- while the room left on the other nodes (allocatable at the 100% high threshold less
  their requests, summed per resource: CPU, memory, pods and the thresholded ones) stays
  above zero for every resource; each eviction takes its pod's requests off it;
- the default evictor's ``nodeFit`` is off: a pod goes whether or not it fits elsewhere,
  and a gang's member goes like any other pod.

Pure: reads the study's snapshot, returns evictions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gangplace.sim.gang_study import JobMove, StudyJob, StudyState

__all__ = ["HighNodeUtilization"]

_BASIC = ("cpu", "memory", "pods")


@dataclass(slots=True)
class HighNodeUtilization:
    """One round per ``interval`` job lengths; ``gpu_threshold_pct``: a node whose GPUs
    are requested below this share is underutilized."""

    interval: float
    gpu_threshold_pct: float = 50.0
    number_of_nodes: int = 0
    refusals: Counter[str] = field(default_factory=Counter)

    def __call__(self, state: StudyState) -> Sequence[JobMove]:
        snap = state.snap
        owner: dict[int, StudyJob] = {}
        for j in (*state.running, *state.waiting):
            for p in j.pods:
                owner[id(p)] = j
        has_gpu = snap.gpu_total > 0
        total = snap.gpu_total * 1000
        used_gpu = total - snap.gpu_free_total()
        pct = np.where(has_gpu, 100.0 * used_gpu / np.maximum(total, 1), 100.0)
        low = has_gpu & (pct < self.gpu_threshold_pct)
        dest = has_gpu & ~low & ~snap.unschedulable
        n_low = int(low.sum())
        if n_low == 0 or n_low <= self.number_of_nodes or n_low == int(has_gpu.sum()):
            return []
        if not dest.any():
            return []
        cols = [snap.res_index[r] for r in _BASIC]
        avail = (snap.alloc[dest][:, cols] - snap.used[dest][:, cols]).sum(axis=0)
        avail_gpu = int((total[dest] - used_gpu[dest]).sum())
        usage = snap.used[:, cols].sum(axis=1) + used_gpu // 1000
        order = sorted(np.flatnonzero(low).tolist(), key=lambda n: (int(usage[n]), n))
        out: dict[int, list[str]] = {}

        def room_left() -> bool:
            return bool((avail > 0).all()) and avail_gpu > 0

        for n in order:
            if not room_left():
                break
            pods = [p for p in snap.pods_on(n) if id(p) in owner]
            pods.sort(key=lambda p: (p.priority, p.name))
            for p in pods:
                out.setdefault(owner[id(p)].id, []).append(p.name)
                avail -= snap.vector(p.shape)[0][cols]
                avail_gpu -= p.shape.gpu_demand_milli
                if not room_left():
                    break
        return [JobMove(j, tuple(names), "evict") for j, names in sorted(out.items())]
