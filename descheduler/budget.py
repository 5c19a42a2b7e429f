"""What one run may still disrupt: the configured limits and the disruption budgets.

A set of pods (one move) is admitted or refused as a whole, so a limit or a budget never
splits a gang. PodDisruptionBudgets are checked on the status the List carries: every
budget covering members must allow as many disruptions as it covers members (less what
earlier moves of this plan already used), and a pod under two budgets cannot be evicted
at all (the Eviction API refuses it). The runner checks the live budgets again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from gangplace.engine import PodRecord
from gangplace.engine.objects import PdbRecord

from .config import Limits
from .state import EvictedPod

__all__ = ["Budget"]


class Budget:
    def __init__(self, limits: Limits, pdbs: Iterable[PdbRecord] = ()) -> None:
        self.limits = limits
        self.pods = 0
        self.gpu_milli = 0
        self.per_node: Counter[str] = Counter()
        self.per_namespace: Counter[str] = Counter()
        self.per_queue: Counter[str] = Counter()
        self._pdbs: dict[str, list[PdbRecord]] = {}
        for p in pdbs:
            self._pdbs.setdefault(p.namespace, []).append(p)
        self._pdb_used: Counter[str] = Counter()
        self._cover: dict[int, tuple[PdbRecord, ...]] = {}

    # --- limits -------------------------------------------------------------------------

    def limit_reason(self, pods: Sequence[PodRecord], queue: str) -> str | None:
        """Which limit evicting ``pods`` (of a unit in ``queue``) would break, or None."""
        lim = self.limits
        n = len(pods)
        if lim.max_evictions_per_run is not None and self.pods + n > lim.max_evictions_per_run:
            return f"max_evictions_per_run ({lim.max_evictions_per_run})"
        gpus = sum(p.shape.gpu_demand_milli for p in pods)
        cap = lim.max_gpus_disrupted_per_run
        if cap is not None and self.gpu_milli + gpus > round(cap * 1000):
            return f"max_gpus_disrupted_per_run ({cap:g})"
        if lim.max_evictions_per_queue is not None and (
            self.per_queue[queue] + n > lim.max_evictions_per_queue
        ):
            return f"max_evictions_per_queue ({lim.max_evictions_per_queue}, queue {queue})"
        if lim.max_evictions_per_node is not None:
            for node, k in Counter(p.node_name for p in pods).items():
                if self.per_node[node] + k > lim.max_evictions_per_node:
                    return f"max_evictions_per_node ({lim.max_evictions_per_node}, node {node})"
        if lim.max_evictions_per_namespace is not None:
            for ns, k in Counter(p.namespace for p in pods).items():
                if self.per_namespace[ns] + k > lim.max_evictions_per_namespace:
                    return (
                        f"max_evictions_per_namespace ({lim.max_evictions_per_namespace}, "
                        f"namespace {ns})"
                    )
        return None

    def carry(self, pods: Iterable[EvictedPod]) -> None:
        """Count what a run cut short evicted (see ``MoveLedger.carried``) as this run's."""
        for p in pods:
            self._count(p.namespace, p.node, p.queue, p.gpu_milli)

    def _count(self, namespace: str, node: str, queue: str, gpu_milli: int) -> None:
        self.pods += 1
        self.gpu_milli += gpu_milli
        self.per_node[node] += 1
        self.per_namespace[namespace] += 1
        if queue:
            self.per_queue[queue] += 1

    def exhausted(self) -> bool:
        """Nothing more can be evicted this run."""
        cap = self.limits.max_evictions_per_run
        return cap is not None and self.pods >= cap

    # --- disruption budgets -------------------------------------------------------------

    def covering(self, pod: PodRecord) -> tuple[PdbRecord, ...]:
        hit = self._cover.get(id(pod))
        if hit is None:
            hit = tuple(
                b for b in self._pdbs.get(pod.namespace, ()) if b.selector.matches(pod.labels)
            )
            self._cover[id(pod)] = hit
        return hit

    def pdb_reason(self, pods: Sequence[PodRecord]) -> str | None:
        """Why the disruption budgets do not allow evicting all of ``pods``, or None."""
        need: Counter[str] = Counter()
        budgets: dict[str, PdbRecord] = {}
        for p in pods:
            cover = self.covering(p)
            if len(cover) > 1:
                names = ", ".join(sorted(b.name for b in cover))
                return f"pod {p.key} is covered by {len(cover)} disruption budgets ({names})"
            for b in cover:
                need[b.key] += 1
                budgets[b.key] = b
        for key in sorted(need):
            b = budgets[key]
            if not b.current:
                return f"disruption budget {key} has no current status"
            left = b.disruptions_allowed - self._pdb_used[key]
            if need[key] > left:
                return (
                    f"disruption budget {key} allows {max(left, 0)} more disruption(s); "
                    f"the move needs {need[key]}"
                )
        return None

    # --- both ---------------------------------------------------------------------------

    def refusal(self, pods: Sequence[PodRecord], queue: str) -> str | None:
        return self.limit_reason(pods, queue) or self.pdb_reason(pods)

    def take(self, pods: Sequence[PodRecord], queue: str) -> None:
        """Count ``pods`` as evicted (the caller checked :meth:`refusal`)."""
        for p in pods:
            self._count(p.namespace, p.node_name, queue, p.shape.gpu_demand_milli)
            for b in self.covering(p):
                self._pdb_used[b.key] += 1

    def snapshot(self) -> tuple[int, int, Counter[str], Counter[str], Counter[str], Counter[str]]:
        return (
            self.pods,
            self.gpu_milli,
            self.per_node.copy(),
            self.per_namespace.copy(),
            self.per_queue.copy(),
            self._pdb_used.copy(),
        )

    def restore(
        self, saved: tuple[int, int, Counter[str], Counter[str], Counter[str], Counter[str]]
    ) -> None:
        (
            self.pods,
            self.gpu_milli,
            self.per_node,
            self.per_namespace,
            self.per_queue,
            self._pdb_used,
        ) = saved
