"""``kubectl corral demo --local``: the in-memory cluster the demo runs on.

The in-memory API server and the models of the Job controller, garbage collector,
kubelet, Volcano and kube-scheduler are test code: they live in corral's ``tests``
package and are not installed with the plugin. ``--local`` finds them in the checkout
the plugin is installed from (``pip install -e .``, as ``make`` does) and says so
plainly when there is none; it never falls back to anything else.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from gangplace.kube import KubeClient

__all__ = ["LocalUnavailable", "local_cluster"]

CHECKOUT = Path(__file__).resolve().parents[1]
HARNESS = "tests.builders.demo_cluster"


class LocalUnavailable(RuntimeError):
    """No checkout of corral (or not a complete one) beside the plugin."""


def _harness() -> object:
    if not (CHECKOUT / "tests" / "builders" / "demo_cluster.py").is_file():
        raise LocalUnavailable(
            "the in-memory cluster (API server and controller models) is part of corral's "
            "tests, which are not installed with the plugin: run it from a checkout of corral "
            "(`make demo`), or run `kubectl corral demo` against a cluster with corral and "
            "Volcano (docs/install.md, Try it on kind)"
        )
    if str(CHECKOUT) not in sys.path:
        sys.path.insert(0, str(CHECKOUT))
    try:
        return importlib.import_module(HARNESS)
    except ImportError as e:
        raise LocalUnavailable(
            f"the checkout at {CHECKOUT} has no working in-memory cluster: {e}"
        ) from None


@asynccontextmanager
async def local_cluster() -> AsyncIterator[tuple[KubeClient, str]]:
    """A client of a fresh in-memory cluster, and how to name it on screen."""
    harness = _harness()
    async with harness.LocalCluster() as cluster:  # type: ignore[attr-defined]
        client: KubeClient = cluster.client
        yield client, str(cluster.description)
