"""Prometheus metrics of the webhook, in a registry of its own (so tests and several
apps in one process never collide). Children are cached: a labelled lookup on the
request path costs a dict hit, not a lock and a tuple build."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "LATENCY_BUCKETS", "Metrics"]

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


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
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
        self._req: dict[tuple[str, str, str], Counter] = {}
        self._lat: dict[str, Histogram] = {}
        self._patch: dict[str, Counter] = {}
        self._warn: dict[str, Counter] = {}

    def observe(
        self,
        operation: str,
        kind: str,
        result: str,
        seconds: float,
        patch_ops: int = 0,
        warnings: int = 0,
    ) -> None:
        """Record one answered review."""
        key = (operation, kind, result)
        c = self._req.get(key)
        if c is None:
            c = self._req[key] = self.requests.labels(*key)
        c.inc()
        h = self._lat.get(operation)
        if h is None:
            h = self._lat[operation] = self.latency.labels(operation)
        h.observe(seconds)
        if patch_ops:
            p = self._patch.get(kind)
            if p is None:
                p = self._patch[kind] = self.patches.labels(kind)
            p.inc()
            self.patch_ops.inc(patch_ops)
        if warnings:
            w = self._warn.get(kind)
            if w is None:
                w = self._warn[kind] = self.warnings.labels(kind)
            w.inc(warnings)

    def podgroup(self, outcome: str) -> None:
        self.podgroups.labels(outcome).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
