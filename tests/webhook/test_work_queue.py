"""The one queue the request path and the PodGroup controller share: one item per
slot, in arrival order, bounded, and drained only when the last item's work ends."""

from __future__ import annotations

import asyncio

from webhook.podgroup_intent import OwnerRef, PodGroupIntent
from webhook.podgroups.work_item import Slot, WorkItem, slot_of
from webhook.podgroups.work_queue import WorkQueue

API = "scheduling.volcano.sh/v1beta1"


def item(name: str, owner: OwnerRef | None = None) -> tuple[Slot, WorkItem]:
    intent = PodGroupIntent(API, "podgroups", "ml", name, {}, owner)
    return slot_of(intent), WorkItem(intent, owner, 0.0)


async def test_slots_come_out_in_order_with_their_items() -> None:
    q = WorkQueue(10)
    (a, ia), (b, ib) = item("a"), item("b")
    assert q.put(a, ia) and q.put(b, ib)
    assert len(q) == 2 and q.get(a) is ia
    assert await q.take() == (a, ia)
    q.done(a)
    assert q.get(a) is None and len(q) == 1
    assert await q.take() == (b, ib)


async def test_a_bare_pod_gangs_pods_each_have_a_slot() -> None:
    q = WorkQueue(10)
    pod = item("gang", OwnerRef("v1", "Pod", "p-0"))
    other = item("gang", OwnerRef("v1", "Pod", "p-1"))
    job = item("gang", OwnerRef("batch/v1", "Job", "j"))
    assert all(q.put(*x) for x in (pod, other, job))  # none collapses into another
    assert len(q) == 3
    assert job[0] == (API, "ml", "gang", "podgroups", "")
    assert pod[0] == (API, "ml", "gang", "podgroups", "p-0")


async def test_a_full_queue_takes_nothing() -> None:
    q = WorkQueue(1)
    (a, ia), (b, ib) = item("a"), item("b")
    assert q.put(a, ia)
    assert not q.put(b, ib)
    assert q.get(b) is None and len(q) == 1


async def test_drained_waits_for_the_last_items_work_to_end() -> None:
    q = WorkQueue(10)
    await asyncio.wait_for(q.drained(), 1)  # nothing queued: at once
    (a, ia), (b, ib) = item("a"), item("b")
    q.put(a, ia)
    q.put(b, ib)
    drained = asyncio.create_task(q.drained())
    for slot in (a, b):
        assert (await q.take())[0] == slot
        await asyncio.sleep(0)
        assert not drained.done()  # taken is not ended
        q.done(slot)
    await asyncio.wait_for(drained, 1)
    assert q.put(a, ia)  # a later intent for the same PodGroup is queued anew
