"""Contract: the AdmissionReviews the in-memory API server sends are those the real one
sent (admission-reviews-update), replayed step by step with the recordings' harness
against a recording webhook registered by URL as in the recording, with the Job
controller, garbage collector, kube-scheduler and kubelet models playing the control
plane (the Job controller as system:serviceaccount:kube-system:job-controller).

Checked strictly: which requests reach the webhook (none for an eviction under a
``pods`` rule; an Eviction review once ``pods/eviction`` is in the rules; the Job
controller's pod CREATE and, after the Job is deleted, its finalizer-removing pod
UPDATE), every review's envelope (uid, kind, resource, subResource, requestKind,
requestResource, name -- absent for generateName --, namespace, operation, userInfo,
dryRun, options, object/oldObject presence), and the admission-time metadata of its
objects (no uid or generated name on CREATE, ``creationTimestamp: null`` for built-in
kinds, the stored resourceVersion and generation on UPDATE), and every object and old
object whole, once what varies between runs is masked; and every step's status, the
422 of a PATCH changing a Job's immutable spec.completions (refused after the webhook saw
it) included.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.builders.capture_webhook import CaptureWebhook
from tests.contract.conftest import ReplayFactory
from tests.controllers import (
    ControllerSet,
    GarbageCollector,
    JobController,
    ManualClock,
    PodScheduler,
    Rest,
    StoreController,
)
from tests.kubeapi.kubelet import Kubelet
from tests.kubeapi.recording import Recording, Replay, differences, normalise

# The whole recording replayed with the control plane's models, once per test: not in
# `make test-fast`.
pytestmark = pytest.mark.scenario

Json = dict[str, Any]
NS = "rec-adm"
JOB_CONTROLLER_TOKEN = "job-controller-token"


def recorded_groups(rec: Recording) -> list[tuple[str, list[Json]]]:
    """(group label, its reviews' requests) in order."""
    out: list[tuple[str, list[Json]]] = []
    for entry in rec.observed:
        if entry.what == "group":
            out.append((entry.after, []))
        elif entry.what == "AdmissionReview":
            out[-1][1].append(entry.object["request"])
    return out


def with_uid(obj: Any, recorded: str, mine: str) -> Any:
    """``obj`` with every string value equal to the ``recorded`` uid replaced by ``mine``."""
    if isinstance(obj, dict):
        return {k: with_uid(v, recorded, mine) for k, v in obj.items()}
    if isinstance(obj, list):
        return [with_uid(v, recorded, mine) for v in obj]
    return mine if obj == recorded else obj


@dataclass
class Outcome:
    """Per recorded group, the reviews the fake sent; each step's status beside the
    recorded one; this run's names for the recording's."""

    groups: list[list[Json]] = field(default_factory=list)
    statuses: list[tuple[str, int, int]] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    uids: dict[str, str] = field(default_factory=dict)  # recorded uid -> this run's
    recorded: list[tuple[str, list[Json]]] = field(default_factory=list)


async def replay_reviews(r: Replay, hook: CaptureWebhook) -> Outcome:
    rec = r.recording
    out = Outcome(recorded=recorded_groups(rec))
    jc_user = out.recorded[0][1][1]["userInfo"]  # the job-controller, as recorded
    r.api.settings.users[JOB_CONTROLLER_TOKEN] = jc_user
    store = r.store
    ns = store.get(store.resource("namespaces"), "", NS)
    store.replace(
        store.resource("namespaces"),
        "",
        NS,
        {
            **ns,
            "metadata": {
                **ns["metadata"],
                "labels": {**ns["metadata"].get("labels", {}), "rec-capture": "yes"},
            },
        },
    )
    url = r.api.url
    clock = ManualClock()
    models = ControllerSet(
        [
            JobController(
                Rest(url, {"Authorization": f"Bearer {JOB_CONTROLLER_TOKEN}"}),
                clock=clock,
                backoff=0,
            ),
            GarbageCollector(Rest(url)),
            PodScheduler(Rest(url), clock=clock),
            StoreController("kubelet", Kubelet(), store),
        ]
    )
    steps = rec.steps
    recorded_uid = steps[1].response["metadata"]["uid"]  # the Job's
    recorded_pod = steps[5].path.rsplit("/", 1)[1]  # the Job's pod, adm-<generated>

    async def send(i: int, **kw: Any) -> None:
        step = steps[i]
        answer = await r.send(step, **kw)
        out.statuses.append((step.do, step.status, answer.status))

    def group() -> None:
        out.groups.append(list(hook.reviews))
        hook.reviews.clear()

    try:
        register = copy.deepcopy(steps[0].body)
        register["webhooks"][0]["clientConfig"] = {"url": hook.url, "caBundle": hook.ca_bundle}
        await send(0, body=register)
        await send(1)  # create Job adm
        await models.settle()  # the Job controller creates its pod
        [pod] = store.items(store.resource("pods"), NS)
        out.names[recorded_pod] = pod["metadata"]["name"]
        group()
        await send(2)  # PATCH parallelism and completions: 422 after the webhook saw it
        group()
        await send(3)  # PATCH parallelism 2
        await models.settle()
        group()
        job = store.get(store.resource("jobs", "batch"), NS, "adm")
        # The Job as the recording read it, with this run's uid wherever the recorded one
        # stood (also as the controller-uid label and selector value, which are immutable).
        put = with_uid(r.translate(steps[4].body), recorded_uid, job["metadata"]["uid"])
        put["metadata"]["resourceVersion"] = job["metadata"]["resourceVersion"]
        await send(4, body=put)  # PUT parallelism 1
        await models.settle()
        group()
        await send(5, path=steps[5].path.replace(recorded_pod, out.names[recorded_pod]))
        group()
        await send(6)  # dry-run Job
        group()
        await send(7)  # PodGroup CREATE
        await send(8)  # and UPDATE
        group()
        await send(9)  # bare pod evictme
        await models.settle()
        group()
        await send(10)  # its eviction: nothing for a webhook on "pods"
        await models.settle()
        await asyncio.sleep(0.1)
        group()
        await send(11)  # DELETE Job adm, Background
        await models.settle()
        await asyncio.sleep(0.1)
        group()
        await send(12)  # pods/eviction in the rules
        # The recording created evictme2 as it did evictme (that step is not listed).
        body = copy.deepcopy(steps[9].body)
        body["metadata"]["name"] = "evictme2"
        answer = await r.send(steps[9], body=body)
        out.statuses.append(("create bare pod evictme2", 201, answer.status))
        await models.settle()
        group()
        await send(13)  # evict evictme2: an Eviction review
        await models.settle()
        group()
        await send(14)  # remove the webhook
        out.uids = dict(r.values)
    finally:
        await models.stop()
    return out


@pytest.fixture
async def replayed(replay: ReplayFactory) -> AsyncIterator[Outcome]:
    async with replay("admission-reviews-update") as r, CaptureWebhook() as hook:
        yield await replay_reviews(r, hook)


ENVELOPE = (
    "kind",
    "resource",
    "subResource",
    "requestKind",
    "requestResource",
    "requestSubResource",
    "namespace",
    "operation",
    "userInfo",
    "dryRun",
    "options",
)


def envelope(req: Json, names: dict[str, str]) -> Json:
    out = {k: req.get(k, "<absent>") for k in ENVELOPE}
    name = req.get("name", "<absent>")
    out["name"] = {v: k for k, v in names.items()}.get(name, name)
    out["keys"] = list(req)
    out["object"] = None if req.get("object") is None else "object"
    out["oldObject"] = None if req.get("oldObject") is None else "object"
    return out


def admission_meta(req: Json) -> Json:
    """The metadata admission is responsible for, in a form runs can share."""
    obj, old = req.get("object"), req.get("oldObject")
    out: Json = {}
    if obj is not None:
        meta = obj.get("metadata", {})
        out["uid"] = "set" if meta.get("uid") else "absent"
        out["name"] = "set" if meta.get("name") else "absent"
        out["generateName"] = meta.get("generateName", "<absent>")
        out["creationTimestamp"] = (
            "<absent>" if "creationTimestamp" not in meta else meta["creationTimestamp"] and "set"
        )
        if old is not None:
            ometa = old.get("metadata", {})
            out["same resourceVersion"] = meta.get("resourceVersion") == ometa.get(
                "resourceVersion"
            )
            out["same generation"] = meta.get("generation") == ometa.get("generation")
    return out


def test_the_same_requests_reach_the_webhook(replayed: Outcome) -> None:
    counts = [len(g) for g in replayed.groups]
    expected = [len(reviews) for _, reviews in replayed.recorded]
    assert counts == expected
    assert counts[8] == 0  # the eviction under a "pods" rule: nothing


def test_every_review_has_the_recorded_envelope(replayed: Outcome) -> None:
    for (label, want), got in zip(replayed.recorded, replayed.groups, strict=True):
        assert len(got) == len(want), label
        for w, g in zip(want, got, strict=True):
            gr = g["request"]
            assert envelope(gr, replayed.names) == envelope(w, {}), label
            assert admission_meta(gr) == admission_meta(w), label
            assert gr["uid"] and gr["uid"] != w["uid"]


def test_every_step_answers_as_recorded(replayed: Outcome) -> None:
    assert [(do, got) for do, _, got in replayed.statuses] == [
        (do, want) for do, want, _ in replayed.statuses
    ]


def test_review_objects_equal_the_recorded_ones(replayed: Outcome) -> None:
    diffs: list[str] = []
    names = {n: "<pod>" for pair in replayed.names.items() for n in pair}
    names.update({u: f"<uid {a[:8]}>" for a, b in replayed.uids.items() for u in (a, b)})
    for (label, want), got in zip(replayed.recorded, replayed.groups, strict=True):
        for w, g in zip(want, got, strict=False):
            for part in ("object", "oldObject"):
                diffs += [
                    f"{label[:40]} {part}: {d}"
                    for d in differences(
                        normalise(w.get(part), names), normalise(g["request"].get(part), names)
                    )
                ]
    assert diffs == []
