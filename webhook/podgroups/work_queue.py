"""The one queue of PodGroup work: the request path puts work items in
(:mod:`~webhook.podgroups.intake`, :mod:`~webhook.podgroups.hints`), the controller's
workers (:mod:`~webhook.podgroups.controller`) take them out, and the request-path
create (:mod:`~webhook.podgroups.first_pod`) reads what is in progress.

Work is queued by slot (:data:`~webhook.podgroups.work_item.Slot`: the PodGroup, and for
a bare-pod gang the pod): one item per slot at a time, so intents for the same PodGroup
collapse while it is pending."""

from __future__ import annotations

import asyncio

from webhook.podgroups.work_item import Slot, WorkItem

__all__ = ["WorkQueue"]


class WorkQueue:
    """Slots in arrival order, the work item of each, and whether any is left."""

    def __init__(self, size: int) -> None:
        self._order: asyncio.Queue[Slot] = asyncio.Queue(size)
        # In progress, by PodGroup -- and by pod, for a bare-pod gang: each of its pods
        # is an owner of its own that must join the PodGroup.
        self._items: dict[Slot, WorkItem] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, slot: Slot) -> WorkItem | None:
        """The work in progress in ``slot``, if any."""
        return self._items.get(slot)

    def put(self, slot: Slot, item: WorkItem) -> bool:
        """Queue ``item`` in ``slot`` (which holds none); False when the queue is full."""
        try:
            self._order.put_nowait(slot)
        except asyncio.QueueFull:
            return False
        self._items[slot] = item
        self._idle.clear()
        return True

    async def take(self) -> tuple[Slot, WorkItem | None]:
        """The next slot to work on and its item; :meth:`done` when the work ends."""
        slot = await self._order.get()
        return slot, self._items.get(slot)

    def done(self, slot: Slot) -> None:
        """The work in ``slot`` ended: a later intent for it is queued anew."""
        self._items.pop(slot, None)
        self._order.task_done()
        if not self._items:
            self._idle.set()

    async def drained(self) -> None:
        """Wait until nothing is queued or in progress."""
        await self._idle.wait()
