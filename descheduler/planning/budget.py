"""What one plan may still disrupt: the configured limits and the disruption budgets.

The check itself is the engine's (:mod:`gangplace.engine.eviction_budget`), the one the
evictor holds again while it evicts; this module turns the ``limits`` section of the
config into its budgets (:func:`limits_of`, named by their config keys) and counts a
plan's moves against them. The runner checks the live budgets again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from gangplace.engine import PodRecord
from gangplace.engine.eviction_budget import (
    Budget as EngineBudget,
)
from gangplace.engine.eviction_budget import (
    DisruptionBudgets,
    EvictionTarget,
    Limits,
)
from gangplace.engine.objects import PdbRecord

from descheduler.config import LimitSettings
from descheduler.planning.state import EvictedPod

__all__ = ["PER_RUN", "PlanBudget", "limits_of"]

PER_RUN = "max_evictions_per_run"


def limits_of(cfg: LimitSettings) -> list[EngineBudget]:
    """The config's limits as budgets named by their keys, in the order they are
    checked: per run, GPUs, per queue, per node, per namespace."""
    out: list[EngineBudget] = []
    if cfg.max_evictions_per_run is not None:
        out.append(EngineBudget.per_run(cfg.max_evictions_per_run, PER_RUN))
    gpus = cfg.max_gpus_disrupted_per_run
    if gpus is not None:
        out.append(
            EngineBudget.gpus_per_run(round(gpus * 1000), "max_gpus_disrupted_per_run", f"{gpus:g}")
        )
    if cfg.max_evictions_per_queue is not None:
        out.append(EngineBudget.per_queue(cfg.max_evictions_per_queue, "max_evictions_per_queue"))
    if cfg.max_evictions_per_node is not None:
        out.append(EngineBudget.per_node(cfg.max_evictions_per_node, "max_evictions_per_node"))
    if cfg.max_evictions_per_namespace is not None:
        out.append(
            EngineBudget.per_namespace(
                cfg.max_evictions_per_namespace, "max_evictions_per_namespace"
            )
        )
    return out


def _evicted(p: EvictedPod) -> EvictionTarget:
    return EvictionTarget(p.namespace, p.name, node=p.node, queue=p.queue, gpu_milli=p.gpu_milli)


Saved = tuple[Counter[tuple[str, str]], Counter[str]]


class PlanBudget:
    """The limits and disruption budgets of one plan, and what its moves used of them.
    A move's pods are admitted or refused as a whole, so a limit never splits a gang."""

    def __init__(self, limits: LimitSettings, pdbs: Iterable[PdbRecord] = ()) -> None:
        self.limits = Limits(limits_of(limits))
        self.pdbs = DisruptionBudgets(pdbs)
        self._targets: dict[tuple[int, str], tuple[PodRecord, EvictionTarget]] = {}

    def targets(self, pods: Sequence[PodRecord], queue: str) -> list[EvictionTarget]:
        """``pods`` of a unit in ``queue`` as the check sees them (made once per pod)."""
        out = []
        for p in pods:
            hit = self._targets.get((id(p), queue))
            if hit is None or hit[0] is not p:
                hit = (p, EvictionTarget.from_record(p, queue=queue))
                self._targets[(id(p), queue)] = hit
            out.append(hit[1])
        return out

    def limit_reason(self, pods: Sequence[PodRecord], queue: str) -> str | None:
        """Which limit evicting ``pods`` (of a unit in ``queue``) would break, or None."""
        hit = self.limits.hit(self.targets(pods, queue))
        return None if hit is None else hit.short

    def pdb_reason(self, pods: Sequence[PodRecord], queue: str = "") -> str | None:
        """Why the disruption budgets do not allow evicting all of ``pods``, or None."""
        check = self.pdbs.check(self.targets(pods, queue))
        return None if check.allowed else check.reasons[0]

    def refusal(self, pods: Sequence[PodRecord], queue: str) -> str | None:
        return self.limit_reason(pods, queue) or self.pdb_reason(pods, queue)

    def carry(self, pods: Iterable[EvictedPod]) -> None:
        """Count what a run cut short evicted (see ``MoveLedger.carried``) as this run's."""
        self.limits.reserve([_evicted(p) for p in pods])

    def exhausted(self) -> bool:
        """Nothing more can be evicted this run."""
        return self.limits.full(PER_RUN)

    def take(self, pods: Sequence[PodRecord], queue: str) -> None:
        """Count ``pods`` as evicted (the caller checked :meth:`refusal`)."""
        targets = self.targets(pods, queue)
        self.limits.reserve(targets)
        self.pdbs.take(targets)

    def snapshot(self) -> Saved:
        return self.limits.used.copy(), self.pdbs.used.copy()

    def restore(self, saved: Saved) -> None:
        self.limits.used, self.pdbs.used = saved[0].copy(), saved[1].copy()
