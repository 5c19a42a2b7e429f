"""What a DELETE answers, from gc-owned-podgroup: a Job removed at once (Background) is a
Status naming it; one kept for the garbage collector (Foreground, Orphan) is the Job with
its finalizer, deletionTimestamp, grace 0 and generation bumped. The collector's own part
(the PodGroup's fate) is the controller models' contract test."""

from __future__ import annotations

from tests.contract.conftest import ReplayFactory


async def test_delete_answers_are_the_recorded_ones(replay: ReplayFactory) -> None:
    async with replay("gc-owned-podgroup") as r:
        for step in r.recording.steps:
            if step.method == "POST":
                r.check(step, await r.send(step))
            elif step.method == "DELETE" or "GET the Job right after" in step.do:
                # A suspended Job's status (Suspended, ready 0) is the Job controller's.
                r.check(step, await r.send(step), ignore=["status"])
