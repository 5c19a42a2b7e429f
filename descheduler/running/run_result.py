"""What one run did: the plan, gang by gang what became of its moves, and the exit code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from descheduler.planning.plan_model import Plan
from descheduler.running.runner_port import GangOutcome, MoveOutcome, Resumed

__all__ = ["DONE", "EXIT_FAILED", "EXIT_OK", "RunResult"]

# A pod in one of these outcomes has left its node.
DONE = (MoveOutcome.EVICTED, MoveOutcome.GONE, MoveOutcome.SUSPENDED)

EXIT_OK, EXIT_FAILED = 0, 1


@dataclass(slots=True)
class RunResult:
    plan: Plan
    outcomes: list[GangOutcome]
    plan_seconds: float
    exit_code: int = EXIT_OK
    stopped: str | None = None
    resumed: list[Resumed] = field(default_factory=list)
    # Stopped from outside (SIGTERM, a lost Lease) before the plan was through: the
    # run's record stays open, and the next run shares its limits.
    cut_short: bool = False
    lease_lost: bool = False  # it stopped because this replica no longer leads

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def pods_evicted(self) -> int:
        return sum(1 for o in self.outcomes for r in o.results if r.outcome in DONE)

    def to_dict(self) -> dict[str, Any]:
        """The plan (``Plan.to_dict``) with what the run did: ``run.outcomes`` gang by
        gang, each pod's result, the exit code and why the run stopped early, if it did."""
        out = self.plan.to_dict()
        out["run"] = {
            "exit_code": self.exit_code,
            "stopped": self.stopped,
            "plan_seconds": round(self.plan_seconds, 3),
            "pods_evicted": self.pods_evicted,
            "gpus_freed": self.gpus_freed,
            "resumed": [r.to_dict() for r in self.resumed],
            "outcomes": [
                {
                    "unit": o.move.unit,
                    "for_gang": o.move.for_gang,
                    "method": o.move.method,
                    "status": o.status,
                    "message": o.message,
                    "pods": [
                        {
                            "namespace": r.namespace,
                            "name": r.name,
                            "outcome": r.outcome.value,
                            "message": r.message,
                        }
                        for r in o.results
                    ],
                }
                for o in self.outcomes
            ],
        }
        return out

    @property
    def gpus_freed(self) -> float:
        done = {
            (r.namespace, r.name) for o in self.outcomes for r in o.results if r.outcome in DONE
        }
        return sum(
            p.gpu_milli / 1000
            for o in self.outcomes
            for p in o.move.pods
            if (p.namespace, p.name) in done
        )
