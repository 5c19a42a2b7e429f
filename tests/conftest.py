"""Fixtures: an in-memory API server per test, and clients that talk to it over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from gangplace.kube import KubeClient

from tests.kubeapi import ApiServer
from tests.kubeapi.kubelet import Kubelet, run_loop
from tests.needs_data import (  # noqa: F401  (hooks: tests that need absent data are left out)
    pytest_collection_modifyitems,
    pytest_terminal_summary,
)


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    """A fresh in-memory API server on 127.0.0.1 with quick bookmarks."""
    async with ApiServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
async def kube(api: ApiServer) -> KubeClient:
    """A real kubernetes-asyncio client of :func:`api` (closed with the server)."""
    return api.client("test")


@pytest.fixture
def kubelet(api: ApiServer) -> Callable[[], int]:
    """The kubelets of :func:`api`'s nodes, run on demand: ``kubelet()`` ticks until they
    have nothing left to do (bound pods Running, deleted pods gone); how many writes."""
    model = Kubelet()

    def settle() -> int:
        total = 0
        while n := model.step(api.store):
            total += n
        return total

    return settle


@pytest.fixture
async def kubelet_loop(api: ApiServer) -> AsyncIterator[Kubelet]:
    """The kubelets of :func:`api`'s nodes running beside the test, a tick every 50 ms, as
    they would beside a live component (a descheduler whose evictions must finish)."""
    model = Kubelet()
    async with run_loop(api.store, [model.step], interval=0.05):
        yield model
