"""The webhook's metrics count on the request path in plain numbers and hand them to
the Prometheus children when the registry is read: what ``/metrics`` shows must be
exactly what counting each review straight into Prometheus would show."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from webhook.metrics import LATENCY_BUCKETS, WebhookMetrics

_CREATED = re.compile(rb"^\S+_created(\{[^}]*\})? .*$\n", re.M)

reviews = st.tuples(
    st.sampled_from(["CREATE", "UPDATE", "other", "unknown"]),
    st.sampled_from(["Pod", "Job", "other"]),
    st.sampled_from(["patched", "unchanged", "denied", "bad_request"]),
    # Bucket bounds exactly (a bound is inclusive), between them, and past the last.
    st.one_of(st.sampled_from([0.0, *LATENCY_BUCKETS, 11.0]), st.floats(0, 20)),
    st.integers(0, 4),
    st.integers(0, 3),
)


def _reference(registry: CollectorRegistry) -> tuple[Counter, Histogram, Counter, Counter, Counter]:
    """The same metrics, each review counted straight into Prometheus."""
    m = WebhookMetrics(CollectorRegistry())  # only for the names, help texts and labels
    return (
        Counter(
            m.requests._name, m.requests._documentation, m.requests._labelnames, registry=registry
        ),
        Histogram(
            m.latency._name,
            m.latency._documentation,
            m.latency._labelnames,
            buckets=LATENCY_BUCKETS,
            registry=registry,
        ),
        Counter(
            m.patches._name, m.patches._documentation, m.patches._labelnames, registry=registry
        ),
        Counter(m.patch_ops._name, m.patch_ops._documentation, registry=registry),
        Counter(
            m.warnings._name, m.warnings._documentation, m.warnings._labelnames, registry=registry
        ),
    )


def _families(text: bytes, names: tuple[str, ...]) -> bytes:
    """The lines of the given families, without the creation times."""
    keep = [
        line
        for line in _CREATED.sub(b"", text).splitlines()
        if any(n.encode() in line for n in names)
    ]
    return b"\n".join(keep)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(reviews, max_size=30), min_size=1, max_size=4))
def test_metrics_text_is_what_counting_each_review_gives(batches: list[list[tuple]]) -> None:
    ours = WebhookMetrics()
    ref_registry = CollectorRegistry()
    requests, latency, patches, patch_ops, warnings = _reference(ref_registry)
    names = (
        "corral_webhook_requests",
        "corral_webhook_request_duration_seconds",
        "corral_webhook_patches",
        "corral_webhook_patch_operations",
        "corral_webhook_warnings",
    )
    for batch in batches:  # a scrape after each batch: pending counts move each time
        for op, kind, result, seconds, ops, warns in batch:
            ours.observe(op, kind, result, seconds, ops, warns)
            requests.labels(op, kind, result).inc()
            latency.labels(op).observe(seconds)
            if ops:
                patches.labels(kind).inc()
                patch_ops.inc(ops)
            if warns:
                warnings.labels(kind).inc(warns)
        assert _families(ours.render(), names) == _families(generate_latest(ref_registry), names)


def test_a_test_reading_one_sample_sees_the_pending_counts() -> None:
    m = WebhookMetrics()
    m.observe("CREATE", "Pod", "patched", 0.0004, 3, 1)
    m.observe("CREATE", "Pod", "patched", 0.0004, 2, 0)
    reg = m.registry
    assert (
        reg.get_sample_value(
            "corral_webhook_requests_total",
            {"operation": "CREATE", "kind": "Pod", "result": "patched"},
        )
        == 2
    )
    assert reg.get_sample_value("corral_webhook_patch_operations_total") == 5
    assert (
        reg.get_sample_value(
            "corral_webhook_request_duration_seconds_bucket",
            {"operation": "CREATE", "le": "0.0005"},
        )
        == 2
    )
    assert reg.get_sample_value("corral_webhook_warnings_total", {"kind": "Pod"}) == 1
