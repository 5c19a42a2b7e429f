"""job-evicted-podfailurepolicy: with a podFailurePolicy Ignore on DisruptionTarget, the
Job controller model neither counts nor replaces an evicted pod that never reaches phase
Failed (A: it stays terminating with its finalizer), and once the kubelet makes it Failed
(B) ignores the failure and replaces the pod after the pod-failure backoff -- as the real
v1.28 controller did."""

from __future__ import annotations

from typing import Any

import pytest

from tests.contract.conftest import ReplayFactory
from tests.contract.controller_models import (
    NO_JOB_DEFAULTS,
    Models,
    answers_ignore,
    same_events,
    same_pods,
)
from tests.kubeapi.recording import Replay, assert_same

A, B = "rec-jobpfp", "rec-jobpfp-kubelet"


STRICT = [
    pytest.param(False, id="controllers"),
    pytest.param(
        True, id="every-field", marks=pytest.mark.xfail(strict=True, reason=NO_JOB_DEFAULTS)
    ),
]


async def _create_and_evict(r: Replay, m: Models, variant: str, ns: str, strict: bool) -> None:
    rec = r.recording
    create = rec.step(f"[{variant}] create the Job")
    r.check(create, await r.send(create), ignore=answers_ignore(strict, create=True))
    await m.settle()
    before = rec.observation(f"[{variant}] before the eviction: {variant} pods")
    mine = m.items("pods", ns)
    m.learn_names(before.object["items"], mine)
    same_pods(r, before.object, mine, f"{variant}: before the eviction")
    evict = rec.step(f"[{variant}] evict")
    pod = mine[0]["metadata"]["name"]
    path = evict.path.replace(before.object["items"][0]["metadata"]["name"], pod)
    body: Any = {**evict.body, "metadata": {**evict.body["metadata"], "name": pod}}
    r.check(evict, await r.send(evict, path=path, body=body))


def _last(r: Replay, prefix: str) -> Any:
    return [o for o in r.recording.observed if o.after.startswith(prefix)][-1].object


@pytest.mark.parametrize("strict", STRICT)
async def test_an_ignored_disruption_is_neither_counted_nor_replaced_until_failed(
    replay: ReplayFactory, strict: bool
) -> None:
    async with replay("job-evicted-podfailurepolicy") as r:
        m = Models(r, backoff=10.0)
        try:
            # A: the loop only deletes (grace 0): the pod stays terminating, kept by the
            # Job controller's finalizer, and the Job waits for it.
            await _create_and_evict(r, m, "A grace-0 delete", A, strict)
            await m.settle()
            m.clock.advance(45)
            await m.settle()
            after = "[A grace-0 delete] after the eviction: A grace-0 delete"
            assert_same(
                _last(r, f"{after} job")["status"], m.get("jobs", A, "ignore", "batch")["status"]
            )
            same_pods(r, _last(r, f"{after} pods"), m.items("pods", A), "A: stuck terminating")
            for name in (
                "[A grace-0 delete] GET the Job",
                "[A grace-0 delete] list the Job's pods",
            ):
                step = r.recording.step(name)
                r.check(step, await r.send(step), ignore=answers_ignore(strict))

            # B: the kubelet makes the evicted pod Failed, then deletes it.
            m.kubelet.fail_terminating = True
            m.kubelet.hold.update(f"{A}/{p['metadata']['name']}" for p in m.items("pods", A))
            await _create_and_evict(r, m, "B Failed then delete", B, strict)
            await m.settle()
            after = "[B Failed then delete] after the eviction: B Failed then delete"
            job = m.get("jobs", B, "ignore", "batch")
            assert_same(
                r.recording.observation(f"{after} job").object["status"],
                job["status"],
                what="B: the failure is ignored, the replacement waits",
            )
            assert m.items("pods", B) == []
            m.clock.advance(10)  # the pod-failure backoff
            await m.settle()
            replacement = m.items("pods", B)
            m.learn_names(_last(r, f"{after} pods")["items"], replacement)
            same_pods(r, _last(r, f"{after} pods"), replacement, "B: replaced")
            assert_same(
                _last(r, f"{after} job")["status"], m.get("jobs", B, "ignore", "batch")["status"]
            )
            for name in (
                "[B Failed then delete] GET the Job",
                "[B Failed then delete] list the Job's pods",
            ):
                step = r.recording.step(name)
                r.check(step, await r.send(step), ignore=answers_ignore(strict))
            for ns in (A, B):
                (step,) = [s for s in r.recording.steps if s.do == f"Events of namespace {ns}"]
                same_events(r, step.response, m.items("events", ns), f"Events of {ns}")
        finally:
            await m.close()
