"""gc-owned-podgroup: the garbage collector model removes a PodGroup owned by a deleted Job
in the background, first in a foreground deletion (then lets the Job go), and orphans it
(ownerReference removed) when told to -- as the real collector did."""

from __future__ import annotations

import pytest

from tests.contract.conftest import ReplayFactory
from tests.contract.controller_models import NO_JOB_DEFAULTS, Models, answers_ignore
from tests.kubeapi.recording import Replay

# Where the in-memory API server itself still differs (not the collector): compared in the
# strict variant only.
DELETE_ANSWERS = (
    "the in-memory API server answers a DELETE that removes the object at once with the "
    "object, not a Status with details, and does not bump metadata.generation when it sets "
    "deletionTimestamp"
)


STRICT = [
    pytest.param(False, id="controllers"),
    pytest.param(
        True,
        id="every-field",
        marks=pytest.mark.xfail(strict=True, reason=f"{NO_JOB_DEFAULTS}; {DELETE_ANSWERS}"),
    ),
]


@pytest.mark.parametrize("strict", STRICT)
async def test_background_foreground_and_orphan(replay: ReplayFactory, strict: bool) -> None:
    async with replay("gc-owned-podgroup") as r:
        m = Models(r)
        try:

            async def settle(_: Replay) -> None:
                await m.settle()

            async def one_gc_pass(_: Replay) -> None:
                await m.step("garbage-collector")

            ignore = {}
            for step in r.recording.steps:
                if "create a suspended Job" in step.do:
                    ignore[step.index] = answers_ignore(strict, create=True)
                elif "the Job" in step.do:
                    ignore[step.index] = answers_ignore(strict)
                    if not strict and step.method == "DELETE" and step.status == 200:
                        if step.response.get("kind") == "Status":
                            ignore[step.index] += ["apiVersion", "kind", "details", "metadata"]
                            ignore[step.index] += ["spec", "status"]
                        else:
                            ignore[step.index].append("metadata.generation")
                    elif not strict and step.method == "GET":
                        ignore[step.index].append("metadata.generation")
            await r.run(
                ignore=ignore,
                before={
                    "[Background] DELETE": settle,
                    "[Background] GET the PodGroup once gone": settle,
                    "[Foreground] DELETE": settle,
                    # the collector deletes the dependent before it lets the owner go
                    "[Foreground] GET the Job right after": one_gc_pass,
                    "[Foreground] GET the PodGroup once gone": settle,
                    "[Orphan] DELETE": settle,
                    # the collector orphans the dependent before it lets the owner go
                    "[Orphan] GET the Job right after": one_gc_pass,
                    "[Orphan] GET the PodGroup 3 s later": settle,
                },
            )
            jobs = m.items("jobs", "rec-gc", "batch")
            assert [j["metadata"]["name"] for j in jobs] == []
            groups = m.items("podgroups", "rec-gc", "scheduling.volcano.sh")
            assert [
                (g["metadata"]["name"], g["metadata"].get("ownerReferences")) for g in groups
            ] == [("pg-orphan", None)]
        finally:
            await m.close()
