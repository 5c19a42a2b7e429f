"""Prometheus metrics of the webhook, in a registry of its own (so tests and several
apps in one process never collide).

A review is counted on the request path in plain numbers (a dict hit and an add, no
lock: :meth:`WebhookMetrics.observe` runs on the event loop's thread), and the numbers are
moved into the Prometheus children whenever the registry is read (``/metrics``, or a
test's ``get_sample_value``): the exposition is the same, at a fraction of the cost
of five locked increments per review."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric

__all__ = ["CONTENT_TYPE_LATEST", "LATENCY_BUCKETS", "WebhookMetrics"]

# Sub-millisecond resolution where admission lives, then up to the API server's
# default webhook timeout (10 s).
LATENCY_BUCKETS: tuple[float, ...] = (
    0.00005,
    0.0001,
    0.0002,
    0.0003,
    0.0005,
    0.00075,
    0.001,
    0.002,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
    2.5,
    10.0,
)


class _Flush:
    """A collector that yields nothing: registered first, it moves the pending counts
    into the Prometheus children before any of them is read."""

    def __init__(self, metrics: WebhookMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterable[Metric]:
        self._metrics.flush()
        return ()


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        r.register(_Flush(self))
        self.requests = Counter(
            "corral_webhook_requests",
            "Admission reviews answered, by operation, object kind and result.",
            ("operation", "kind", "result"),
            registry=r,
        )
        self.latency = Histogram(
            "corral_webhook_request_duration_seconds",
            "Time from a review's body being read to its answer being ready.",
            ("operation",),
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.patches = Counter(
            "corral_webhook_patches",
            "Reviews answered with a JSON patch, by object kind.",
            ("kind",),
            registry=r,
        )
        self.patch_ops = Counter(
            "corral_webhook_patch_operations",
            "JSON patch operations sent.",
            registry=r,
        )
        self.podgroups = Counter(
            "corral_webhook_podgroups",
            "PodGroups handled by the reconciler, by outcome (created, exists, joined: a "
            "bare pod became one more owner, foreign: another owner's was there, stale: an "
            "earlier owner's was not removed in time, failed, no-owner, dropped).",
            ("outcome",),
            registry=r,
        )
        self.podgroup_waits = Counter(
            "corral_webhook_podgroup_waits",
            "Pod CREATEs answered after waiting for their gang's PodGroup (podGroupWait), "
            "by result (made: made or found in time; late: not in time; failed: could "
            "not be made). A pod whose PodGroup is known to exist waits for nothing.",
            ("result",),
            registry=r,
        )
        self.warnings = Counter(
            "corral_webhook_warnings",
            "Warnings returned to users, by object kind.",
            ("kind",),
            registry=r,
        )
        self.tls_reloads = Counter(
            "corral_webhook_tls_reloads",
            "Serving certificate loads after start, by result (ok, error).",
            ("result",),
            registry=r,
        )
        # Pending counts, each beside the child it goes to: [child, count] for counters;
        # [child, pending count per bucket (the last is +Inf), running sum] for the
        # latency histogram (the sum is kept whole, added in the order Prometheus would).
        self._req: dict[tuple[str, str, str], list[Any]] = {}
        self._lat: dict[str, list[Any]] = {}
        self._patch: dict[str, list[Any]] = {}
        self._warn: dict[str, list[Any]] = {}
        self._ops = 0

    def observe(
        self,
        operation: str,
        kind: str,
        result: str,
        seconds: float,
        patch_ops: int = 0,
        warnings: int = 0,
    ) -> None:
        """Record one answered review (on the event loop's thread)."""
        key = (operation, kind, result)
        c = self._req.get(key)
        if c is None:
            c = self._req[key] = [self.requests.labels(*key), 0]
        c[1] += 1
        h = self._lat.get(operation)
        if h is None:
            h = self._lat[operation] = [
                self.latency.labels(operation),
                [0] * (len(LATENCY_BUCKETS) + 1),
                0.0,
            ]
        # The first bucket whose bound is >= seconds, as Histogram.observe picks it.
        h[1][bisect_left(LATENCY_BUCKETS, seconds)] += 1
        h[2] += seconds
        if patch_ops:
            p = self._patch.get(kind)
            if p is None:
                p = self._patch[kind] = [self.patches.labels(kind), 0]
            p[1] += 1
            self._ops += patch_ops
        if warnings:
            w = self._warn.get(kind)
            if w is None:
                w = self._warn[kind] = [self.warnings.labels(kind), 0]
            w[1] += warnings

    def flush(self) -> None:
        """Move the pending counts into the Prometheus children (done on every read
        of the registry)."""
        for tallies in (self._req, self._patch, self._warn):
            for t in tallies.values():
                if t[1]:
                    n, t[1] = t[1], 0
                    t[0].inc(n)
        for h in self._lat.values():
            child, counts, total = h
            if any(counts):
                h[1] = [0] * len(counts)
                # Histogram has no public way to add many observations at once.
                for i, n in enumerate(counts):
                    if n:
                        child._buckets[i].inc(n)
                child._sum.set(total)
        if self._ops:
            n, self._ops = self._ops, 0
            self.patch_ops.inc(n)

    def podgroup(self, outcome: str) -> None:
        self.podgroups.labels(outcome).inc()

    def podgroup_wait(self, result: str) -> None:
        self.podgroup_waits.labels(result).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
