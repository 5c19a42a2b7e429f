"""Run controller models beside the in-memory API server.

A controller is anything with ``name`` and ``async step() -> bool`` (one reconcile
pass over what the API server holds now; True when it wrote something). A test either
steps them itself -- ``await ctl.settle()`` runs passes until one changes nothing, which
is deterministic -- or runs them as asyncio tasks with ``ctl.start(period=...)`` and
``await ctl.stop()``, as a cluster runs its controllers. ``ManualClock`` lets a test
move time (backoffs, deadlines) without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Protocol

__all__ = [
    "Controller",
    "ControllerSet",
    "ManualClock",
    "NotSettled",
    "StoreController",
    "until",
    "wall_clock",
]

log = logging.getLogger(__name__)


def wall_clock() -> datetime:
    return datetime.now(UTC)


class ManualClock:
    """A clock a test moves by hand: ``clock()`` reads it, ``clock.advance(10)``."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 12, 3, 9, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Controller(Protocol):
    name: str

    async def step(self) -> bool: ...


class StoreController:
    """A model that works on the store in-process (``fn(store) -> writes``, as the fake's
    kubelet does) run in step with the HTTP ones."""

    def __init__(self, name: str, fn: Callable[[Any], int], store: Any) -> None:
        self.name = name
        self.fn = fn
        self.store = store

    async def step(self) -> bool:
        return self.fn(self.store) > 0


class NotSettled(AssertionError):
    """The controllers kept writing: a loop between models, or a model that never rests."""


class ControllerSet:
    """Several controllers stepped in a fixed order, or run as tasks."""

    def __init__(self, controllers: Iterable[Controller] = ()) -> None:
        self.controllers: list[Controller] = list(controllers)
        self._tasks: list[asyncio.Task[None]] = []
        self.errors: list[BaseException] = []

    def add(self, *controllers: Controller) -> ControllerSet:
        self.controllers.extend(controllers)
        return self

    async def step(self, only: Sequence[str] = ()) -> bool:
        """One pass of every controller (or of those named); True if any wrote."""
        changed = False
        for c in self.controllers:
            if not only or c.name in only:
                changed |= await c.step()
        return changed

    async def settle(self, max_rounds: int = 50, only: Sequence[str] = ()) -> int:
        """Step until a whole pass writes nothing; the number of passes that wrote."""
        for i in range(max_rounds):
            if not await self.step(only):
                return i
        raise NotSettled(f"controllers still writing after {max_rounds} passes")

    def start(self, period: float = 0.05) -> None:
        """Run each controller in its own task, one pass every ``period`` seconds."""
        for c in self.controllers:
            self._tasks.append(asyncio.create_task(self._loop(c, period), name=c.name))

    async def _loop(self, c: Controller, period: float) -> None:
        while True:
            try:
                await c.step()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a model error must not kill the loop silently
                log.exception("controller %s failed", c.name)
                self.errors.append(e)
            await asyncio.sleep(period)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks.clear()
        for c in self.controllers:
            close = getattr(c, "close", None)
            if close is not None:
                await close()

    async def __aenter__(self) -> ControllerSet:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def until(cond: Callable[[], bool], timeout: float = 5.0, interval: float = 0.02) -> None:
    """Wait for ``cond`` (when controllers run as tasks)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(interval)
