"""Finding a PodGroup owner's uid: from a hint while one may still come, then from
the API server with backoff, and giving up once the owner wait has passed."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest

from webhook.podgroup_intent import OwnerRef, PodGroupIntent
from webhook.podgroups.owner_lookup import find_owner
from webhook.podgroups.reconciler_port import RetryPolicy
from webhook.podgroups.work_item import WorkItem

API = "scheduling.volcano.sh/v1beta1"
JOB = OwnerRef("batch/v1", "Job", "train")
POLICY = RetryPolicy(base_delay=0.001, max_delay=0.004, owner_wait=0.2, hint_wait=0.05)


def item(owner: OwnerRef | None = JOB) -> WorkItem:
    loop = asyncio.get_running_loop()
    return WorkItem(
        PodGroupIntent(API, "podgroups", "team", "train", {}, owner), owner, loop.time()
    )


class Resolver:
    def __init__(self, answers: list[str | Exception | None]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, OwnerRef]] = []

    async def __call__(self, namespace: str, owner: OwnerRef) -> str | None:
        self.asked.append((namespace, owner))
        answer = self.answers.pop(0) if self.answers else None
        if isinstance(answer, Exception):
            raise answer
        return answer


async def find(work: WorkItem, resolve: Resolver | None) -> OwnerRef | bool | None:
    loop = asyncio.get_running_loop()
    return await find_owner(
        work, resolve=resolve, policy=POLICY, clock=loop.time, rng=random.Random(1)
    )


async def test_a_gang_nobody_owns_has_no_owner_to_find() -> None:
    resolve = Resolver(["uid-1"])
    assert await find(item(None), resolve) is None
    assert resolve.asked == []


async def test_a_hint_within_the_hint_wait_saves_the_read() -> None:
    work = item()
    resolve = Resolver(["uid-read"])

    async def hint() -> None:
        await asyncio.sleep(0.01)
        work.owner = JOB._replace(uid="uid-hinted")
        work.woken.set()

    task = asyncio.create_task(hint())
    got = await find(work, resolve)
    await task
    assert got == JOB._replace(uid="uid-hinted")
    assert resolve.asked == []


async def test_without_a_hint_the_owner_is_read_after_the_hint_wait() -> None:
    work = item()
    resolve = Resolver([None, "uid-1"])  # not there yet, then created
    loop = asyncio.get_running_loop()
    started = loop.time()
    got = await find(work, resolve)
    assert got == JOB._replace(uid="uid-1") and work.owner == got
    assert loop.time() - started >= POLICY.hint_wait
    assert [o for _, o in resolve.asked] == [JOB, JOB]
    assert resolve.asked[0][0] == "team"


async def test_a_pod_owner_is_read_at_once() -> None:
    pod = OwnerRef("v1", "Pod", "worker-0")
    resolve = Resolver(["uid-pod"])
    loop = asyncio.get_running_loop()
    started = loop.time()
    got = await find(item(pod), resolve)
    assert got == pod._replace(uid="uid-pod")
    assert loop.time() - started < POLICY.hint_wait


async def test_a_failed_read_is_logged_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    resolve = Resolver([ConnectionError("reset"), "uid-1"])
    with caplog.at_level(logging.INFO, logger="webhook.podgroups.owner_lookup"):
        got = await find(item(), resolve)
    assert got == JOB._replace(uid="uid-1")
    assert any("owner lookup failed" in r.getMessage() for r in caplog.records)


async def test_an_owner_that_never_shows_is_given_up_after_the_owner_wait() -> None:
    resolve = Resolver([])
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await find(item(), resolve) is False
    assert POLICY.owner_wait <= loop.time() - started < POLICY.owner_wait + 0.1
    assert len(resolve.asked) >= 2


async def test_without_a_lookup_only_a_hint_can_give_the_owner() -> None:
    assert await find(item(), None) is False
