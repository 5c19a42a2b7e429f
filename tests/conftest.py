"""Fixtures: an in-memory API server per test, and clients that talk to it over HTTP."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The repo root makes ``tests.kubeapi`` importable; this folder makes ``helpers`` so.
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from gangplace.kube import KubeClient  # noqa: E402
from needs_data import (  # noqa: E402, F401  (hooks: tests that need absent data are left out)
    pytest_collection_modifyitems,
    pytest_terminal_summary,
)

from tests.kubeapi import ApiServer  # noqa: E402


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    """A fresh in-memory API server on 127.0.0.1 with quick bookmarks."""
    async with ApiServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
async def kube(api: ApiServer) -> KubeClient:
    """A real kubernetes-asyncio client of :func:`api` (closed with the server)."""
    return api.client("test")
