"""Fixtures: an in-memory API server per test, and clients that talk to it over HTTP."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The repo root makes ``tests.kubeapi`` importable; this folder makes ``helpers`` so.
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from gangplace.kube import KubeClient  # noqa: E402

from tests.kubeapi import ApiServer  # noqa: E402
from tests.kubeapi.controllers import Kubelet  # noqa: E402


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
