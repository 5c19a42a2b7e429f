"""Junk never produces a 500 and never crashes the server: hypothesis-generated bodies
(random bytes, random JSON, AdmissionReviews with random parts broken), first through
admit() directly, then over HTTPS to a running server."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders.reviews import FIXTURE_NAMES, fixture, review
from webhook.admission.entry import admit
from webhook.admission.native_gangs import Served
from webhook.admission.review import ReviewError, decode_patch
from webhook.config import WebhookConfig, parse_config
from webhook.metrics import WebhookMetrics
from webhook.server import init_app, start
from webhook.tls.certificates import new_bundle
from webhook.tls.contexts import client_context, load_pair, server_context

_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["CREATE", "Pod", "batch", "v1", "100%", "abc", "true", "", "-1", "1e9"]),
)
_json = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(
                st.text(max_size=8),
                st.sampled_from(
                    ["metadata", "spec", "annotations", "labels", "template", "replicas"]
                ),
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=20,
)
_USER_KEYS = [
    "corral.dev/gang",
    "corral.dev/min-available",
    "corral.dev/queue",
    "corral.dev/gang-timeout",
    "corral.dev/skip",
]


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _workload_reviews() -> list[dict[str, Any]]:
    from tests.webhook.test_roles import CASES

    out = []
    for _, obj, _, _ in CASES:
        group, _, version = obj["apiVersion"].rpartition("/")
        out.append(review(obj, group=group, version=version))
    return out


# The captured reviews and one hand-built review of every workload kind.
_BASES = [fixture(n) for n in FIXTURE_NAMES] + _workload_reviews()

_INTERESTING = frozenset(
    {
        "spec",
        "metadata",
        "annotations",
        "labels",
        "template",
        "affinity",
        "containers",
        "initContainers",
        "resources",
        "requests",
        "ownerReferences",
        "parallelism",
        "completions",
        "nodeSelector",
        "tolerations",
        "schedulerName",
        "priorityClassName",
    }
)


@st.composite
def broken_review(draw: st.DrawFn) -> Any:
    """A captured review with a few random parts replaced, removed or given user keys."""
    base = draw(st.sampled_from(_BASES))
    rev = copy.deepcopy(base)
    paths = list(_paths(rev))
    # Most breakage goes where admission looks: specs, metadata maps, templates, counts.
    interesting = [p for p in paths if p and p[-1] in _INTERESTING]
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.one_of(st.sampled_from(interesting), st.sampled_from(paths)))
        if not path:
            continue
        parent: Any = rev
        try:
            for p in path[:-1]:
                parent = parent[p]
            action = draw(st.sampled_from(["replace", "delete", "user-key"]))
            if action == "replace":
                parent[path[-1]] = draw(_json)
            elif action == "delete" and isinstance(parent, dict):
                del parent[path[-1]]
            elif isinstance(parent, dict):
                target = parent[path[-1]]
                if isinstance(target, dict):
                    target[draw(st.sampled_from(_USER_KEYS))] = draw(
                        st.one_of(
                            st.text(max_size=6),
                            st.sampled_from(["3", "80%", "0", "150%", "30m", "x y"]),
                            # Past Python's int conversion, float range and int32.
                            st.sampled_from(
                                ["9" * 5000, "9" * 5000 + "%", "9" * 400 + "h", "2147483648"]
                            ),
                        )
                    )
        except (KeyError, IndexError, TypeError):
            continue
    return rev


_CONFIGS = [
    WebhookConfig(),
    parse_config({"backend": "yunikorn", "nodePool": {"key": "pool", "value": "a"}}),
    parse_config({"backend": "kueue"}),
    parse_config({"backend": "coscheduling", "gangTimeout": "5m"}),
    parse_config({"backend": "kai"}),
    parse_config({"backend": "kubernetes"}),
]
# What admission is told the API server serves: the native gang API of 1.37 with
# CompositePodGroup, and a Volcano 1.14 PodGroup, so every dialect's writer is reached.
_SERVED = Served(
    frozenset({"v1beta1"}),
    frozenset({"v1beta1"}),
    frozenset({"networkTopology", "subGroupPolicy"}),
    frozenset({"v1alpha3"}),
)


def _check_result(body: Any, config: WebhookConfig) -> None:
    try:
        res = admit(body, None, config, _SERVED)
    except ReviewError:
        return
    resp = res.review["response"]
    assert resp["uid"] == body["request"]["uid"]
    assert isinstance(resp["allowed"], bool)
    if resp["allowed"] and resp.get("patch"):
        obj = body["request"]["object"]
        patched = jsonpatch.apply_patch(obj, decode_patch(resp))
        again = copy.deepcopy(body)
        again["request"]["object"] = patched
        assert admit(again, None, config, _SERVED).patch == []
    json.dumps(res.review)  # always serialisable


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_json, broken_review()), st.sampled_from(range(len(_CONFIGS))))
def test_admit_answers_or_raises_review_error(body: Any, config_index: int) -> None:
    _check_result(body, _CONFIGS[config_index])


# --- over HTTPS, against one server running in a thread ---------------------------------


class ThreadedServer:
    def __init__(self) -> None:
        self.bundle = new_bundle(
            "corral-webhook", "corral-system", dt.datetime.now(dt.UTC), ips=["127.0.0.1"]
        )
        self.metrics = WebhookMetrics()
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        ctx = server_context()
        load_pair(ctx, self.bundle.cert, self.bundle.key)
        app = init_app(WebhookConfig(), metrics=self.metrics)
        self.runner, self.port = self.loop.run_until_complete(start(app, "127.0.0.1", 0, ctx))
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.runner.cleanup())

    def __enter__(self) -> ThreadedServer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=client_context(self.bundle.ca_cert), timeout=10
        )


@pytest.fixture(scope="module")
def threaded() -> Iterator[ThreadedServer]:
    with ThreadedServer() as s:
        yield s


_bodies = st.one_of(
    st.binary(max_size=200),
    _json.map(lambda v: json.dumps(v).encode()),
    broken_review().map(lambda v: json.dumps(v).encode()),
)
_types = st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", ""])


@pytest.mark.slow
@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=_bodies, content_type=_types)
def test_junk_over_https_never_500(
    threaded: ThreadedServer, body: bytes, content_type: str
) -> None:
    conn = threaded.connection()
    try:
        headers = {"Content-Type": content_type} if content_type else {}
        conn.request("POST", "/mutate", body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
    finally:
        conn.close()
    assert r.status in (200, 400), (r.status, data[:300])
    doc = json.loads(data)
    if r.status == 200:
        assert doc["kind"] == "AdmissionReview" and "uid" in doc["response"]
    else:
        assert doc["kind"] == "Status" and doc["message"]


def test_after_the_junk_the_server_is_healthy_and_never_failed(threaded: ThreadedServer) -> None:
    conn = threaded.connection()
    conn.request("GET", "/healthz")
    assert conn.getresponse().read() == b"ok"
    conn.close()
    text = threaded.metrics.render().decode()
    # an unexpected exception inside admit() is counted as result="error"
    assert 'result="error"' not in text


_SPOTS: list[tuple[str, tuple[Any, ...], Any]] = [
    ("pod-create-plain-cpu.json", ("spec",), ["not", "a", "spec"]),
    ("pod-create-plain-cpu.json", ("spec",), "x"),
    ("pod-create-plain-cpu.json", ("spec", "containers"), {"a": 1}),
    ("pod-create-plain-cpu.json", ("spec", "containers", 0, "resources"), {"requests": "lots"}),
    (
        "pod-create-plain-cpu.json",
        ("spec", "affinity"),
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": ["x", 3]}
            }
        },
    ),
    ("pod-create-plain-cpu.json", ("spec", "affinity"), {"nodeAffinity": "x"}),
    ("pod-create-plain-cpu.json", ("spec", "affinity"), [1]),
    ("pod-create-plain-cpu.json", ("spec", "tolerations"), "abc"),
    ("pod-create-plain-cpu.json", ("spec", "nodeSelector"), ["a"]),
    ("pod-create-plain-cpu.json", ("spec", "priorityClassName"), {"a": 1}),
    ("pod-create-plain-cpu.json", ("spec", "schedulerName"), 7),
    ("pod-create-plain-cpu.json", ("metadata", "annotations"), ["a"]),
    ("pod-create-plain-cpu.json", ("metadata", "labels"), "x"),
    ("pod-create-plain-cpu.json", ("metadata", "ownerReferences"), "x"),
    (
        "pod-create-plain-cpu.json",
        ("metadata", "ownerReferences"),
        [{"controller": True, "kind": 3}],
    ),
    ("pod-create-plain-cpu.json", ("metadata", "name"), 12),
    ("pod-create-llm-worker-0.json", ("metadata", "annotations", "corral.dev/min-available"), 4),
    ("pod-create-llm-worker-0.json", ("metadata", "annotations", "corral.dev/gang"), None),
    ("job-create-mpi-train.json", ("spec", "template"), "x"),
    ("job-create-mpi-train.json", ("spec", "template", "metadata"), ["x"]),
    ("job-create-mpi-train.json", ("spec", "template", "spec"), 5),
    ("job-create-mpi-train.json", ("spec", "parallelism"), 2.5),
    ("job-create-mpi-train.json", ("spec", "parallelism"), True),
    ("job-create-mpi-train.json", ("spec", "parallelism"), -3),
    ("job-create-mpi-train.json", ("spec",), None),
    ("job-create-mpi-train.json", ("apiVersion",), 5),
]


@pytest.mark.parametrize(("name", "path", "value"), _SPOTS)
@pytest.mark.parametrize("config_index", range(len(_CONFIGS)))
def test_junk_in_known_places(
    name: str, path: tuple[Any, ...], value: Any, config_index: int
) -> None:
    rev = fixture(name)
    node: Any = rev["request"]["object"]
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    _check_result(rev, _CONFIGS[config_index])
    if config_index == 1:  # node-pool pinning touches the affinity
        _check_result(rev, _CONFIGS[config_index])
