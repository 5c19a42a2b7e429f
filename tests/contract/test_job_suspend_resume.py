"""job-suspend-resume: the Job controller model suspends a running Job without a failure
(finalizers stripped, pods deleted, Suspended=True JobSuspended, startTime kept), resumes
it (Suspended=False JobResumed, a new startTime, new pods) and leaves a Job created
suspended without pods or startTime -- as the real v1.28 controller did."""

from __future__ import annotations

import pytest

from tests.contract.conftest import ReplayFactory
from tests.contract.controller_models import (
    NO_JOB_DEFAULTS,
    Models,
    answers_ignore,
    same_events,
    same_pods,
)
from tests.kubeapi.recording import assert_same

NS = "rec-suspend"


STRICT = [
    pytest.param(False, id="controllers"),
    pytest.param(
        True, id="every-field", marks=pytest.mark.xfail(strict=True, reason=NO_JOB_DEFAULTS)
    ),
]


@pytest.mark.parametrize("strict", STRICT)
async def test_suspend_and_resume(replay: ReplayFactory, strict: bool) -> None:
    async with replay("job-suspend-resume") as r:
        m = Models(r)
        try:
            rec = r.recording

            def job(name: str = "pair") -> dict:  # type: ignore[type-arg]
                return m.get("jobs", NS, name, "batch")

            create = rec.step("create the Job (parallelism 2)")
            r.check(create, await r.send(create), ignore=answers_ignore(strict, create=True))
            await m.settle()
            running = rec.observation("both pods Running: pods")
            m.learn_names(running.object["items"], m.items("pods", NS))
            same_pods(r, running.object, m.items("pods", NS), "both pods Running")
            assert_same(rec.observation("both pods Running: job").object["status"], job()["status"])
            started = job()["status"]["startTime"]

            suspend = rec.step("suspend")
            r.check(suspend, await r.send(suspend), ignore=answers_ignore(strict))
            await m.settle()
            after = [o for o in rec.observed if o.after.startswith("after suspend: job")][-1]
            assert_same(after.object["status"], job()["status"], what="suspended")
            assert job()["status"]["startTime"] == started  # kept while the pods go
            assert m.items("pods", NS) == []
            assert "failed" not in job()["status"]

            m.clock.advance(2)
            resume = rec.step("resume")
            r.check(resume, await r.send(resume), ignore=answers_ignore(strict))
            await m.settle()
            settled = rec.observation("after resume, settled: job")
            assert_same(settled.object["status"], job()["status"], what="resumed")
            assert job()["status"]["startTime"] != started  # a new one
            pods = m.items("pods", NS)
            resumed = [o for o in rec.observed if o.after.startswith("after resume: pods")][-1]
            m.learn_names(resumed.object["items"], pods)
            same_pods(r, resumed.object, pods, "resumed")

            held = rec.step("create a Job with suspend true")
            r.check(held, await r.send(held), ignore=answers_ignore(strict, create=True))
            await m.settle()
            for name in ("GET it 3 s later", "its pods (none)"):
                step = rec.step(name)
                r.check(step, await r.send(step), ignore=answers_ignore(strict))
            events = rec.step("Events of the namespace")
            same_events(r, events.response, m.items("events", NS), "the namespace's Events")
        finally:
            await m.close()
