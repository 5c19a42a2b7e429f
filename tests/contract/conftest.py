"""Fixtures for the contract tests: a replay of a recording against a fresh in-memory API
server, its cluster laid out as the recording's was (nodes n1..n3, its namespaces)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest

from tests.kubeapi import ApiServer
from tests.kubeapi.recording import ADMIN_TOKEN, Controller, Replay, load

ReplayFactory = Callable[..., AbstractAsyncContextManager[Replay]]


@pytest.fixture
def replay() -> ReplayFactory:
    """``async with replay("eviction-created", controllers=[...]) as r:`` -- a Replay of the
    named recording against a fresh server (``authenticate``: only tokens are let in)."""

    @asynccontextmanager
    async def make(
        name: str,
        *,
        controllers: tuple[Controller, ...] | list[Controller] = (),
        authenticate: bool = False,
        bookmark_interval: float = 1.0,
        setup: bool = True,
    ) -> AsyncIterator[Replay]:
        tokens = frozenset({ADMIN_TOKEN}) if authenticate else None
        async with (
            ApiServer(tokens=tokens, bookmark_interval=bookmark_interval) as api,
            Replay(load(name), api, controllers=controllers) as r,
        ):
            if setup:
                r.setup()
            yield r

    return make
