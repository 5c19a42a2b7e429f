"""gc-owned-podgroup: the garbage collector model removes a PodGroup owned by a deleted Job
in the background, first in a foreground deletion (then lets the Job go), and orphans it
(ownerReference removed) when told to -- as the real collector did."""

from __future__ import annotations

from tests.contract.conftest import ReplayFactory
from tests.contract.controller_models import Models
from tests.kubeapi.recording import Replay


async def test_background_foreground_and_orphan(replay: ReplayFactory) -> None:
    async with replay("gc-owned-podgroup") as r:
        m = Models(r)
        try:

            async def settle(_: Replay) -> None:
                await m.settle()

            async def one_gc_pass(_: Replay) -> None:
                await m.step("garbage-collector")

            await r.run(
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
                }
            )
            jobs = m.items("jobs", "rec-gc", "batch")
            assert [j["metadata"]["name"] for j in jobs] == []
            groups = m.items("podgroups", "rec-gc", "scheduling.volcano.sh")
            assert [
                (g["metadata"]["name"], g["metadata"].get("ownerReferences")) for g in groups
            ] == [("pg-orphan", None)]
        finally:
            await m.close()
