"""watch-too-old: a watch from a resourceVersion the server no longer holds is HTTP 200 with
one ERROR event (a 410 Expired Status, byte for byte) and the end of the stream; a watch
the server still covers replays history; lists at an exact old version are served until
compaction, then 410; a quiet watch with allowWatchBookmarks gets BOOKMARKs shaped like
the real ones; a limited list pages with a continue token."""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.contract.conftest import ReplayFactory
from tests.kubeapi.kubelet import Kubelet
from tests.kubeapi.recording import Answer, Replay, Step, assert_same, normalise

# the smallest pod template a Job may have (restartPolicy is required)
_NEVER = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}

# Waits for real bookmarks and watch ends (seconds): not in `make test-fast`.
pytestmark = pytest.mark.slow

NS = "rec-watch"


def _raw(line: bytes | str) -> str:
    text = line.decode() if isinstance(line, bytes) else line
    return re.sub(
        r"too old resource version: (\d+) \(\d+\)",
        r"too old resource version: \1 (N)",
        text.strip(),
    )


def _one_error_then_end(step: Step, answer: Answer) -> None:
    assert step.stream is not None
    assert answer.status == step.status == 200
    assert answer.headers.get("Content-Type") == step.headers["Content-Type"]
    assert answer.headers.get("Transfer-Encoding") == "chunked"
    assert [_raw(line) for line in answer.lines] == [_raw(e["raw"]) for e in step.stream]


def _pod(r: Replay) -> dict[str, object]:
    """The pod the recording created during its bookmark watch, as it was sent."""
    step = r.recording.step("watch pods with allowWatchBookmarks")
    assert step.stream is not None
    added = step.stream[0]["event"]["object"]
    containers = [
        {k: c[k] for k in ("name", "image", "command", "resources") if k in c}
        for c in added["spec"]["containers"]
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": added["metadata"]["name"], "namespace": NS},
        "spec": {"containers": containers},
    }


async def test_too_old_watches_end_with_one_error_and_bookmarks_are_real(
    replay: ReplayFactory,
) -> None:
    async with replay("watch-too-old", controllers=[Kubelet()], bookmark_interval=0.3) as r:
        rec = r.recording
        start = r.store.rv  # the oldest version this server still holds
        # Watches from resourceVersion=1, older than anything held: one ERROR, then the end.
        for do in ("watch namespace pods", "watch all pods"):
            step = rec.step(do)
            _one_error_then_end(step, await r.send(step))

        # The bookmark watch, from the current version: the pod's versions, then a BOOKMARK.
        step = rec.step("watch pods with allowWatchBookmarks")
        path = re.sub(r"resourceVersion=\d+", f"resourceVersion={r.store.rv}", step.path)
        path = path.replace("timeoutSeconds=80", "timeoutSeconds=2")
        before_pod = r.store.rv

        async def lifecycle() -> None:
            r.store.create(r.store.resource("pods"), NS, _pod(r))
            r.bind(NS, "watched")
            r.settle()

        sent = asyncio.create_task(r.send(step, path=path, watch_seconds=5))
        await asyncio.sleep(0.1)
        await lifecycle()
        answer = await sent
        assert step.stream is not None
        events = answer.events
        kinds = [e["type"] for e in events]
        assert (
            kinds[:3] == [e["type"] for e in step.stream[:3]] == ["ADDED", "MODIFIED", "MODIFIED"]
        )
        assert set(kinds[3:]) == {"BOOKMARK"}, kinds
        assert_same([e["event"] for e in step.stream[:3]], events[:3], names=r.names)
        bookmark = step.stream[3]
        assert _raw(
            re.sub(rb'"resourceVersion":"\d+"', b'"resourceVersion":"RV"', answer.lines[3])
        ) == _raw(re.sub(r'"resourceVersion":"\d+"', '"resourceVersion":"RV"', bookmark["raw"]))
        assert int(events[3]["object"]["metadata"]["resourceVersion"]) == r.store.rv

        # Lists: resourceVersion=1 without a match is served from the cache (any newer one).
        step = rec.step("list pods with resourceVersion=1 (not a watch)")
        r.check(step, await r.send(step))

        # Exact: the state at that version while it is held (the recording's revision 1 was
        # the empty namespace; here the version before the pod was created), then 410.
        step = rec.step("list pods with resourceVersion=1&resourceVersionMatch=Exact BEFORE")
        exact = step.path.replace("resourceVersion=1", f"resourceVersion={before_pod}")
        answer = await r.send(step, path=exact)
        assert answer.status == 200 and answer.body["items"] == []
        assert answer.body["metadata"]["resourceVersion"] == str(before_pod)
        r.store.compact()  # etcd's compaction
        step = rec.step("list pods with resourceVersion=1&resourceVersionMatch=Exact after")
        r.check(step, await r.send(step, path=exact))
        r.check(step, await r.send(step))

        # The same watches of a custom resource, and of pods after the compaction.
        for do in ("watch podgroups (a CRD", "watch podgroups in a namespace", "watch pods from"):
            step = rec.step(do)
            _one_error_then_end(step, await r.send(step))

        # A watch the server still covers replays the history and stays open.
        step = rec.step("watch jobs")
        jobs = r.store.resource("jobs", "batch")
        r.store.create(jobs, NS, {"metadata": {"name": "once"}, "spec": {"template": _NEVER}})
        answer = await r.send(
            step,
            path=step.path.replace("resourceVersion=1", f"resourceVersion={r.store.rv - 1}"),
            watch_seconds=0.5,
        )
        assert answer.status == 200 and [e["type"] for e in answer.events] == ["ADDED"]
        assert start < r.store.rv

        # A limited list: one item, a continue token and the count of the rest.
        other = {**_pod(r), "metadata": {"name": "other", "namespace": NS}}
        r.store.create(r.store.resource("pods"), NS, other)
        step = rec.step("list pods with limit=1")
        answer = await r.send(step)
        assert answer.status == 200 and len(answer.body["items"]) == 1
        assert set(answer.body["metadata"]) == set(normalise(step.response)["metadata"])
        assert answer.body["metadata"]["remainingItemCount"] == 1
