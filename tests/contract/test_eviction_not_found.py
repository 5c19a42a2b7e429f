"""eviction-not-found: a missing pod or namespace is 404 with the real Status; a body naming
another pod than the URL is 400."""

from __future__ import annotations

from tests.contract.conftest import ReplayFactory


async def test_every_answer_is_the_recorded_one(replay: ReplayFactory) -> None:
    async with replay("eviction-not-found") as r:
        await r.run()
