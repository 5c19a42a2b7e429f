"""Contract: the AdmissionReviews the in-memory API server sends are those the real one
sent (../shared/recordings/admission-reviews-update.json), replayed step by step
against a recording webhook registered by URL exactly as in the recording.

What the fake does alone is checked strictly: which requests reach the webhook (none
for an eviction under a ``pods`` rule; an Eviction review once ``pods/eviction`` is in
the rules), and every review's envelope (uid, kind, resource, subResource,
requestKind, requestResource, name -- absent for generateName --, namespace, operation,
userInfo, dryRun, options, object/oldObject presence) and the admission-time metadata
of its objects (no uid or generated name on CREATE, ``creationTimestamp: null`` for
built-in kinds, the stored resourceVersion and generation on UPDATE).

The Job controller's own writes (its pod CREATE and, after the Job is deleted, its
finalizer-removing pod UPDATE) need a Job controller in the fake: the pod CREATE is
played here from the recorded object, as the job-controller's ServiceAccount, so the
later pod steps can run; the finalizer UPDATE, and whole-object equality (the API
server's defaults for Jobs and pods), are xfails naming what is missing.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from webhook_capture import CaptureWebhook

from tests.kubeapi import ApiServer
from tests.kubeapi import objects as o
from tests.kubeapi.app import WRITES

Json = dict[str, Any]
RECORDING = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "recordings"
    / ("admission-reviews-update.json")
)


def recording() -> Json:
    doc: Json = json.loads(RECORDING.read_text())
    return doc


def recorded_groups(rec: Json) -> list[tuple[str, list[Json]]]:
    """(group label, its reviews' requests) in order."""
    out: list[tuple[str, list[Json]]] = []
    for entry in rec["observed"]:
        if entry.get("what") == "group":
            out.append((entry["after"], []))
        elif entry.get("what") == "AdmissionReview":
            out[-1][1].append(entry["object"]["request"])
    return out


@dataclass
class Replay:
    """The replay's outcome: per recorded group, the reviews the fake sent, and each
    step's status against the recorded one."""

    groups: list[list[Json]] = field(default_factory=list)
    statuses: list[tuple[str, int, int]] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # recorded name -> the fake's


async def replay(api: ApiServer, hook: CaptureWebhook) -> Replay:
    rec = recording()
    steps = rec["steps"]
    groups = recorded_groups(rec)
    out = Replay()
    store = api.store
    store.create(store.resource("namespaces"), "", o.namespace("rec-adm", {"rec-capture": "yes"}))
    jc_user = groups[0][1][1]["userInfo"]  # the job-controller's userInfo, as recorded
    generated = groups[0][1][1]["object"]  # the pod the Job controller created
    recorded_pod = steps[5]["request"]["path"].rsplit("/", 1)[1]  # adm-rcdbz

    async with aiohttp.ClientSession() as session:

        async def send(step: Json) -> int:
            req = step["request"]
            path = req["path"]
            for recorded, ours in out.names.items():
                path = path.replace(f"/{recorded}", f"/{ours}")
            body = copy.deepcopy(req["body"])
            if step["do"].startswith("register"):
                body["webhooks"][0]["clientConfig"] = {
                    "url": hook.url,
                    "caBundle": hook.ca_bundle,
                }
            if req["method"] == "PUT":  # the recorded resourceVersion is the recording's
                current = store.get(store.resource("jobs", "batch"), "rec-adm", "adm")
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            data = None if body is None else orjson.dumps(body)
            headers = {"Content-Type": req.get("contentType") or "application/json"}
            async with session.request(
                req["method"], api.url + path, data=data, headers=headers
            ) as r:
                await r.read()
                out.statuses.append((step["do"], step["response"]["status"], r.status))
                return r.status

        def group() -> None:
            out.groups.append(list(hook.reviews))
            hook.reviews.clear()

        writes = api.app[WRITES]
        await send(steps[0])  # register
        await send(steps[1])  # create Job adm
        # The Job controller's pod, played from the recorded object (no Job controller
        # runs in the fake): through admission, as the job-controller.
        job = store.get(store.resource("jobs", "batch"), "rec-adm", "adm")
        pod = copy.deepcopy(generated)
        pod["metadata"]["ownerReferences"][0]["uid"] = job["metadata"]["uid"]
        made = await writes.create(store.resource("pods"), "rec-adm", pod, user=jc_user)
        out.names[recorded_pod] = made["metadata"]["name"]
        group()
        for i in (2, 3, 4, 5, 6):  # Job UPDATEs, the pod label, the dry-run Job
            await send(steps[i])
            group()
        await send(steps[7])  # PodGroup CREATE
        await send(steps[8])  # and UPDATE
        group()
        await send(steps[9])  # bare pod evictme
        group()
        await send(steps[10])  # its eviction: nothing for a webhook on "pods"
        await asyncio.sleep(0.2)
        group()
        await send(steps[11])  # DELETE Job adm
        await asyncio.sleep(0.2)
        group()
        await send(steps[12])  # pods/eviction in the rules
        # The recording created evictme2 as it did evictme (that step is not listed).
        bare = copy.deepcopy(steps[9])
        bare["request"]["body"]["metadata"]["name"] = "evictme2"
        bare["do"] = "create bare pod evictme2"
        bare["request"]["path"] = steps[9]["request"]["path"]
        await send(bare)
        group()
        await send(steps[13])  # evict evictme2: an Eviction review
        group()
        await send(steps[14])  # remove the webhook
    return out


@pytest.fixture
async def replayed(api: ApiServer) -> AsyncIterator[tuple[Replay, list[tuple[str, list[Json]]]]]:
    async with CaptureWebhook() as hook:
        yield await replay(api, hook), recorded_groups(recording())


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


def test_the_same_requests_reach_the_webhook(
    replayed: tuple[Replay, list[tuple[str, list[Json]]]],
) -> None:
    ours, recorded = replayed
    counts = [len(g) for g in ours.groups]
    expected = [len(reviews) for _, reviews in recorded]
    # The Job controller's finalizer UPDATE after the Job's deletion (group 10) needs a
    # Job controller and garbage collector: checked in the xfail below.
    assert counts[:9] + counts[10:] == expected[:9] + expected[10:]
    assert counts[9] == 0  # the eviction under a "pods" rule: nothing


def test_every_review_has_the_recorded_envelope(
    replayed: tuple[Replay, list[tuple[str, list[Json]]]],
) -> None:
    ours, recorded = replayed
    for (label, want), got in zip(recorded, ours.groups, strict=True):
        if "Job DELETE" in label:
            continue  # the Job controller's finalizer removal: the xfail below
        assert len(got) == len(want), label
        for w, g in zip(want, got, strict=True):
            gr = g["request"]
            assert envelope(gr, ours.names) == envelope(w, {}), label
            assert admission_meta(gr) == admission_meta(w), label
            assert gr["uid"] and gr["uid"] != w["uid"]


@pytest.mark.xfail(
    strict=True,
    reason="the fake does not validate Job updates: spec.completions is immutable (the "
    "recorded PATCH got 422 after the webhook saw it; the fake answers 200)",
)
def test_every_step_answers_as_recorded(
    replayed: tuple[Replay, list[tuple[str, list[Json]]]],
) -> None:
    ours, _ = replayed
    assert [(do, got) for do, _, got in ours.statuses] == [
        (do, want) for do, want, _ in ours.statuses
    ]


@pytest.mark.xfail(
    strict=True,
    reason="needs the Job controller and garbage collector in the fake: after a Background "
    "DELETE of the Job the controller removes its job-tracking finalizer from the pod (an "
    "UPDATE review as system:serviceaccount:kube-system:job-controller)",
)
def test_the_job_controllers_finalizer_update_is_reviewed(
    replayed: tuple[Replay, list[tuple[str, list[Json]]]],
) -> None:
    ours, recorded = replayed
    [(label, want)] = [(lbl, r) for lbl, r in recorded if "Job DELETE" in lbl]
    got = ours.groups[[lbl for lbl, _ in recorded].index(label)]
    assert [envelope(g["request"], ours.names) for g in got] == [envelope(w, {}) for w in want]


def _vary(x: Any, key: str = "") -> Any:
    """Values that differ between runs (README: uids, resourceVersions, timestamps,
    generated names, the node) replaced by a marker."""
    varying = {
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "startTime",
        "lastTransitionTime",
        "lastProbeTime",
        "controller-uid",
        "batch.kubernetes.io/controller-uid",
        "nodeName",
        "name",
    }
    if isinstance(x, dict):
        return {k: _vary(v, k) for k, v in x.items()}
    if isinstance(x, list):
        return [_vary(v, key) for v in x]
    if key in varying and x is not None:
        return "<varies>"
    return x


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: {'only in the fake' if k not in a else 'only recorded'}")
            else:
                out += _diff(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(x, y, f"{path}/{i}")
        ]
    return [] if a == b else [f"{path}: {b!r} != recorded {a!r}"]


@pytest.mark.xfail(
    strict=True,
    reason="the fake does not default objects as the API server does (Job selector and "
    "controller-uid labels, pod template and container defaults, Job status counters, "
    "pod status left empty at admission): the fake's defaulting, not the admission chain",
)
def test_review_objects_equal_the_recorded_ones(
    replayed: tuple[Replay, list[tuple[str, list[Json]]]],
) -> None:
    ours, recorded = replayed
    diffs: list[str] = []
    for (label, want), got in zip(recorded, ours.groups, strict=True):
        for w, g in zip(want, got, strict=False):
            for part in ("object", "oldObject"):
                diffs += [
                    f"{label[:40]} {part}{d}"
                    for d in _diff(_vary(w.get(part)), _vary(g["request"].get(part)))
                ]
    assert diffs == []
