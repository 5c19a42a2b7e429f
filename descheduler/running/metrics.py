"""Prometheus metrics of the runner: evictions by result, gang moves by method and
outcome, resumptions, GPUs freed, fragmentation before and after each plan, plan time,
and the state of the loop (leader, last run).
``run --interval`` serves them on ``/metrics``."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from descheduler.planning.strategies.make_room.make_room import ROOM_TAKEN
from descheduler.running.run_result import RunResult

__all__ = ["DeschedulerMetrics"]


class DeschedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.evictions = Counter(
            "corral_descheduler_evictions",
            "Pods the descheduler tried to evict, by result",
            ["result"],
            registry=r,
        )
        self.gangs = Counter(
            "corral_descheduler_gang_moves",
            "Gang moves, by status (evicted, suspended, rolled-back, skipped, failed, "
            "partially-moved, dry-run, not-attempted)",
            ["status"],
            registry=r,
        )
        self.moves = Counter(
            "corral_descheduler_moves",
            "Gang moves by method (evict, suspend) and outcome (the status of the move)",
            ["method", "outcome"],
            registry=r,
        )
        self.resumptions = Counter(
            "corral_descheduler_resumptions",
            "What runs did about the suspensions corral made, by action (resume, forget, "
            "heal) and result (ok, failed)",
            ["action", "result"],
            registry=r,
        )
        self.suspended = Gauge(
            "corral_descheduler_suspended_gangs",
            "Gangs whose workload is suspended in the last plan, by who suspended it",
            ["by"],
            registry=r,
        )
        self.gpus_freed = Counter(
            "corral_descheduler_gpus_freed", "GPUs held by the pods evicted", registry=r
        )
        self.fragmentation = Gauge(
            "corral_descheduler_fragmentation_gpus",
            "FGD fragmentation F(M) of the cluster in GPUs, before and after the last plan",
            ["when"],
            registry=r,
        )
        self.waiting = Gauge(
            "corral_descheduler_waiting_gangs",
            "Waiting gangs that cannot start, before and after the last plan",
            ["when"],
            registry=r,
        )
        self.plan_seconds = Histogram(
            "corral_descheduler_plan_seconds",
            "Time to make one plan",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
            registry=r,
        )
        self.runs = Counter(
            "corral_descheduler_runs", "Runs, by exit code", ["exit_code"], registry=r
        )
        self.run_errors = Counter(
            "corral_descheduler_run_errors",
            "Runs that raised before finishing (the API server away, a bad object)",
            registry=r,
        )
        self.last_run = Gauge(
            "corral_descheduler_last_run_timestamp_seconds",
            "When the last run finished (Unix time)",
            registry=r,
        )
        self.leader = Gauge(
            "corral_descheduler_leader",
            "1 while this replica holds the Lease (always 1 without leader election)",
            registry=r,
        )
        self.room_taken = Gauge(
            "corral_descheduler_room_taken_gangs",
            "Waiting gangs whose room, made within the cool-down, went to other pods",
            registry=r,
        )

    def observe(self, result: RunResult) -> None:
        p = result.plan
        self.plan_seconds.observe(result.plan_seconds)
        self.fragmentation.labels("before").set(p.fragmentation_before)
        self.fragmentation.labels("after").set(p.fragmentation_after)
        self.waiting.labels("before").set(len(p.waiting_before))
        self.waiting.labels("after").set(len(p.waiting_after))
        for o in result.outcomes:
            self.gangs.labels(o.status).inc()
            self.moves.labels(o.move.method, o.status).inc()
            if o.move.method == "evict":
                for r in o.results:
                    self.evictions.labels(r.outcome.value).inc()
        for res in result.resumed:
            self.resumptions.labels(res.action, "ok" if res.ok else "failed").inc()
        mine = sum(1 for x in p.suspended if "suspended by corral" in x.reason)
        self.suspended.labels("corral").set(mine)
        self.suspended.labels("other").set(len(p.suspended) - mine)
        self.gpus_freed.inc(result.gpus_freed)
        self.runs.labels(str(result.exit_code)).inc()
        self.room_taken.set(sum(1 for u in p.unserved if u.reason.startswith(ROOM_TAKEN)))
        self.last_run.set(time.time())

    def error(self) -> None:
        self.run_errors.inc()
        self.runs.labels("1").inc()
        self.last_run.set(time.time())
