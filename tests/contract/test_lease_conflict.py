"""lease-conflict: optimistic concurrency on a Lease, as a leader elector meets it."""

from __future__ import annotations

from tests.contract.conftest import ReplayFactory


async def test_every_answer_is_the_recorded_one(replay: ReplayFactory) -> None:
    async with replay("lease-conflict") as r:
        await r.run()
