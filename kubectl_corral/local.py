"""``kubectl corral demo --local``: the in-memory cluster the demo runs on.

The in-memory API server and the models of the Job controller, garbage collector,
kubelet, Volcano and kube-scheduler are test code, not installed with the plugin. A
checkout registers them here with ``provide`` (``scripts/demo_local.py``, run by ``make
demo``); the installed plugin alone has none, and ``--local`` says so plainly rather
than reaching into a checkout or falling back to anything else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Protocol

from gangplace.kube import KubeClient

__all__ = ["InMemoryCluster", "LocalUnavailable", "local_cluster", "provide"]

UNAVAILABLE = (
    "the in-memory cluster (API server and controller models) is part of corral's tests, "
    "which are not installed with the plugin: from a checkout of corral run `make demo` "
    "(python -m scripts.demo_local), or run `kubectl corral demo` against a cluster with "
    "corral and Volcano (docs/install.md, Try it on kind)"
)


class InMemoryCluster(Protocol):
    """What ``--local`` needs of a cluster: a client of it, and how to name it on screen."""

    client: KubeClient
    description: str

    async def __aenter__(self) -> InMemoryCluster: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class LocalUnavailable(RuntimeError):
    """No in-memory cluster was provided (the plugin runs without a checkout)."""


_factory: Callable[[], InMemoryCluster] | None = None


def provide(factory: Callable[[], InMemoryCluster] | None) -> None:
    """Register what makes the in-memory cluster (None: forget it)."""
    global _factory
    _factory = factory


@asynccontextmanager
async def local_cluster() -> AsyncIterator[tuple[KubeClient, str]]:
    """A client of a fresh in-memory cluster, and how to name it on screen."""
    if _factory is None:
        raise LocalUnavailable(UNAVAILABLE)
    async with _factory() as cluster:
        yield cluster.client, str(cluster.description)
