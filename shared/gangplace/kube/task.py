"""One coroutine run as a background task, started and stopped the same way everywhere
(informers, the snapshot feed, the webhook's cluster view)."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["BackgroundTask"]


class BackgroundTask:
    """Runs :meth:`run` as one asyncio task named :attr:`task_name`: :meth:`start` it
    (again once it has ended), ``await`` :meth:`stop` to cancel it and wait until it is
    gone."""

    task_name = "background task"
    _task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        raise NotImplementedError

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=self.task_name)
        return self._task

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()
