"""A gang's PodGroup before its first pod is answered (``podGroupWait``): what
:meth:`PodGroupReconciler.before_answer` waits for, what it costs the later pods, and
what happens when the PodGroup cannot be made in time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from gangplace.config_errors import ConfigError
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders.reviews import fixture
from tests.webhook.test_podgroups import API, FAST, FakeApi, intent
from tests.webhook.test_server import metric, post, serve
from webhook.config import WebhookConfig, parse_config
from webhook.metrics import WebhookMetrics
from webhook.podgroup_intent import OwnerHint, OwnerRef, PodGroupIntent, Removed
from webhook.podgroups.reconciler import PodGroupReconciler, RetryPolicy


def pod(name: str) -> OwnerRef:
    return OwnerRef("v1", "Pod", name)


class SlowApi(FakeApi):
    """Creates that take ``delay`` seconds."""

    def __init__(self, delay: float, script: list[int | None] | None = None) -> None:
        super().__init__(script)
        self.delay = delay

    async def create(self, intent: PodGroupIntent, body: dict[str, Any]) -> None:
        await asyncio.sleep(self.delay)
        await super().create(intent, body)


async def test_a_bare_pod_gangs_first_pod_waits_for_an_unowned_create_its_others_do_not() -> None:
    api = FakeApi()
    rec = PodGroupReconciler(api.create, policy=FAST)
    await rec.start()
    try:
        first = intent("pair", pod("pair-0"))
        rec.submit(first, dry_run=False)
        assert await rec.before_answer([first], [], 1.0) == "made"
        assert api.calls[0]["metadata"].get("ownerReferences") is None
        assert ("ml", "pair") in api.stored
        second = intent("pair", pod("pair-1"))
        rec.submit(second, dry_run=False)
        calls = len(api.calls)
        assert await rec.before_answer([second], [], 1.0) == "ready"
        assert len(api.calls) == calls  # no call on the request path
    finally:
        await rec.stop(drain_timeout=0)


async def test_pods_arriving_together_share_one_create() -> None:
    api = SlowApi(0.05)
    rec = PodGroupReconciler(api.create, policy=FAST)
    await rec.start()
    try:
        intents = [intent("trio", pod(f"trio-{i}")) for i in range(3)]
        for i in intents:
            rec.submit(i, dry_run=False)
        got = await asyncio.gather(*(rec.before_answer([i], [], 1.0) for i in intents))
        assert got == ["made"] * 3
        unowned = [c for c in api.calls if not c["metadata"].get("ownerReferences")]
        assert len(unowned) == 1
    finally:
        await rec.stop(drain_timeout=0)


async def test_a_workloads_pod_waits_for_the_pending_create_with_its_owner() -> None:
    """The Job's intent (no uid at its CREATE) gets the uid from the pod's hint and is
    made with its ownerReference before the pod is answered."""
    api = FakeApi()
    rec = PodGroupReconciler(api.create, policy=RetryPolicy(base_delay=0.5, owner_wait=5))
    await rec.start()
    try:
        rec.submit(intent("job-a", OwnerRef("batch/v1", "Job", "a")), dry_run=False)
        hint = OwnerHint(API, "ml", "job-a", OwnerRef("batch/v1", "Job", "a", "uid-1"))
        rec.hint(hint)
        assert await rec.before_answer([], [hint], 1.0) == "made"
        assert api.calls[0]["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
        rec.hint(hint)
        assert await rec.before_answer([], [hint], 1.0) == "ready"
        assert len(api.calls) == 1
    finally:
        await rec.stop(drain_timeout=0)


async def test_not_in_time_is_late_and_the_work_goes_on() -> None:
    api = SlowApi(0.3)
    rec = PodGroupReconciler(api.create, policy=FAST)
    await rec.start()
    try:
        first = intent("pair", pod("pair-0"))
        rec.submit(first, dry_run=False)
        assert await rec.before_answer([first], [], 0.05) == "late"
        await asyncio.sleep(0.4)
        assert ("ml", "pair") in api.stored  # made all the same, for the next pod
        second = intent("pair", pod("pair-1"))
        rec.submit(second, dry_run=False)
        assert await rec.before_answer([second], [], 0.05) == "ready"
    finally:
        await rec.stop(drain_timeout=0)


async def test_a_create_refused_is_failed() -> None:
    api = FakeApi([403])
    rec = PodGroupReconciler(api.create, policy=FAST)
    await rec.start()
    try:
        first = intent("pair", pod("pair-0"))
        rec.submit(first, dry_run=False)
        assert await rec.before_answer([first], [], 1.0) == "failed"
    finally:
        await rec.stop(drain_timeout=0)


async def test_an_unowned_podgroup_whose_pod_never_appears_is_removed() -> None:
    api = FakeApi()
    removed: list[tuple[str, OwnerRef]] = []

    async def remove(i: PodGroupIntent, owner: OwnerRef) -> Removed:
        removed.append((i.name, owner))
        api.stored.pop((i.namespace, i.name), None)
        return "removed"

    async def resolve(namespace: str, owner: OwnerRef) -> str | None:
        return None  # refused further down the chain: it never exists

    outcomes: list[str] = []
    rec = PodGroupReconciler(
        api.create,
        resolve,
        remove=remove,
        policy=RetryPolicy(base_delay=0.01, max_delay=0.02, owner_wait=0.1, hint_wait=0),
        on_outcome=lambda _i, o: outcomes.append(o),
    )
    await rec.start()
    try:
        first = intent("pair", pod("pair-0"))
        rec.submit(first, dry_run=False)
        assert await rec.before_answer([first], [], 1.0) == "made"
        await asyncio.wait_for(rec.drain(), 2)
    finally:
        await rec.stop()
    assert outcomes == ["created", "no-owner", "removed"]
    assert removed == [("pair", OwnerRef("v1", "Pod", "pair-0"))]
    assert api.stored == {}


def test_pod_group_wait_key() -> None:
    assert WebhookConfig().pod_group_wait_seconds == 2.0
    assert parse_config({"podGroupWait": "0s"}).pod_group_wait_seconds == 0.0
    assert parse_config({"podGroupWait": "5s"}).pod_group_wait_seconds == 5.0
    # Only Volcano refuses a pod whose PodGroup is not there.
    assert parse_config({"backend": "coscheduling"}).pod_group_wait_seconds == 0.0
    with pytest.raises(ConfigError, match='podGroupWait: "soon" is not a duration'):
        parse_config({"podGroupWait": "soon"})
    with pytest.raises(
        ConfigError, match='podGroupWait: "1m" is too long: at most 29s; allowed: "0s"'
    ):
        parse_config({"podGroupWait": "1m"})


@pytest.mark.parametrize(
    ("api", "wait", "why"),
    [(SlowApi(5.0), "late", "not made yet"), (FakeApi([403]), "failed", "could not be made")],
    ids=["slow", "refused"],
)
async def test_the_server_answers_in_time_with_a_warning(api: FakeApi, wait: str, why: str) -> None:
    """Never later than podGroupWait, never a 500: the pod is allowed with its patch and
    a warning that Volcano may refuse it; the wait is counted."""
    config = WebhookConfig(pod_group_wait="1s")
    rec = PodGroupReconciler(api.create, policy=FAST)
    s = await serve(config=config, reconciler=rec, metrics=WebhookMetrics())
    try:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        status, body = await post(s, fixture("pod-create-llm-worker-0.json"))
        took = loop.time() - t0
        async with s.session.get(f"{s.url}/metrics") as r:
            text = await r.text()
    finally:
        await s.session.close()
        await s.runner.cleanup()
    assert status == 200 and body["response"]["allowed"] is True
    assert body["response"]["patch"]
    assert body["response"]["warnings"][-1] == (
        f"corral: PodGroup llm {why} (podGroupWait 1s); "
        "Volcano may refuse this pod until it is there"
    )
    assert took < (1.5 if wait == "late" else 0.5)
    assert metric(text, "corral_webhook_podgroup_waits_total", result=wait) == 1


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(min_value=1, max_value=6),
    delays=st.lists(st.floats(min_value=0, max_value=0.005), min_size=6, max_size=6),
    create_delay=st.floats(min_value=0, max_value=0.01),
)
async def test_a_bare_pod_gangs_pods_in_any_order_wait_for_one_create(
    size: int, delays: list[float], create_delay: float
) -> None:
    """However a gang's pods interleave, each is answered with its PodGroup there, and
    the request path makes one create for the whole gang."""
    api = SlowApi(create_delay)
    rec = PodGroupReconciler(api.create, policy=FAST)
    await rec.start()
    try:

        async def one(i: int) -> tuple[str, bool]:
            await asyncio.sleep(delays[i])
            it = intent("gang", pod(f"gang-{i}"))
            rec.submit(it, dry_run=False)
            got = await rec.before_answer([it], [], 1.0)
            return got, ("ml", "gang") in api.stored

        answers = await asyncio.gather(*(one(i) for i in range(size)))
    finally:
        await rec.stop(drain_timeout=0)
    assert all(there for _, there in answers)
    assert {got for got, _ in answers} <= {"made", "ready"}
    assert len([c for c in api.calls if not c["metadata"].get("ownerReferences")]) == 1
