"""Every pod and Job a recording created, created again here: the answer is the object the
real API server returned (defaulted spec, generated selector and labels, the initial
status), with only what varies between runs masked."""

from __future__ import annotations

import re

import orjson
import pytest

from tests.kubeapi import ApiStore
from tests.kubeapi.recording import Step, assert_same, load, recordings_dir

_CREATES = re.compile(r"^/(api/v1|apis/batch/v1)/namespaces/([^/]+)/(pods|jobs)$")


def _creates() -> list[tuple[str, Step]]:
    out = []
    for path in sorted(recordings_dir().glob("*.json")):
        rec = load(path.stem)
        for step in rec.steps:
            if step.method == "POST" and step.status == 201 and _CREATES.match(step.path):
                out.append((rec.name, step))
    return out


@pytest.mark.parametrize(
    ("recording", "step"),
    _creates(),
    ids=lambda x: x if isinstance(x, str) else x.do.replace(" ", "-"),
)
def test_a_created_object_is_answered_as_recorded(recording: str, step: Step) -> None:
    m = _CREATES.match(step.path)
    assert m is not None
    store = ApiStore()
    store.load([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": m.group(2)}}])
    rt = store.resource(m.group(3), "batch" if m.group(3) == "jobs" else "")
    got = store.create(rt, m.group(2), step.body)
    # The uid is also in the generated selector and labels: the same token on both sides.
    mine, theirs = got["metadata"]["uid"], step.response["metadata"]["uid"]
    recorded = orjson.loads(orjson.dumps(step.response).replace(theirs.encode(), b"UID"))
    answer = orjson.loads(orjson.dumps(got).replace(mine.encode(), b"UID"))
    assert_same(recorded, answer, what=f"{recording}: {step.do}")
