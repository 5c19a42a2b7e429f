"""job-evicted-backofflimit-0: the Job controller model counts an evicted pod as a failure
at once (the pod never reaches phase Failed), fails a Job of backoffLimit 0 with
BackoffLimitExceeded and makes no replacement -- as the real v1.28 controller did."""

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

NS = "rec-job0"


STRICT = [
    pytest.param(False, id="controllers"),
    pytest.param(
        True, id="every-field", marks=pytest.mark.xfail(strict=True, reason=NO_JOB_DEFAULTS)
    ),
]


@pytest.mark.parametrize("strict", STRICT)
async def test_an_evicted_pod_fails_a_job_of_backoff_limit_0(
    replay: ReplayFactory, strict: bool
) -> None:
    async with replay("job-evicted-backofflimit-0") as r:
        m = Models(r)
        try:
            rec = r.recording
            create = rec.step("create the Job")
            r.check(create, await r.send(create), ignore=answers_ignore(strict, create=True))
            await m.settle()
            before = rec.observation("before the eviction: pods")
            mine = m.items("pods", NS)
            m.learn_names(before.object["items"], mine)
            same_pods(r, before.object, mine, "before the eviction")
            assert_same(
                rec.observation("before the eviction: job").object["status"],
                m.get("jobs", NS, "once", "batch")["status"],
                what="the Job before the eviction",
            )

            evict = rec.step("evict the Job's Running pod")
            pod = mine[0]["metadata"]["name"]
            path = evict.path.replace(before.object["items"][0]["metadata"]["name"], pod)
            body = {**evict.body, "metadata": {**evict.body["metadata"], "name": pod}}
            r.check(evict, await r.send(evict, path=path, body=body))
            same_pods(
                r,
                rec.observation("after the eviction: pods").object,
                m.items("pods", NS),
                "right after the eviction",
            )

            await m.settle()
            assert_same(
                rec.observation("after the eviction: job").object["status"],
                m.get("jobs", NS, "once", "batch")["status"],
                what="the Job once the controller saw the eviction",
            )
            assert m.items("pods", NS) == []  # no replacement

            final = rec.step("GET the Job at the end")
            r.check(final, await r.send(final), ignore=answers_ignore(strict))
            events = rec.step("Events of the namespace")
            same_events(r, events.response, m.items("events", NS), "the namespace's Events")
        finally:
            await m.close()
