"""Run step-function controllers in the background, as their processes would run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

from tests.kubeapi.store import ApiStore

__all__ = ["run_loop"]


@asynccontextmanager
async def run_loop(
    store: ApiStore, controllers: Sequence[Callable[[ApiStore], int]], interval: float = 0.05
) -> AsyncIterator[None]:
    """``async with run_loop(store, [kubelet]):`` -- every ``interval`` seconds, one pass of
    each controller, until the block ends (the task is cancelled and awaited)."""

    async def loop() -> None:
        while True:
            for c in controllers:
                c(store)
            await asyncio.sleep(interval)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
