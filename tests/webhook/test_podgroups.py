"""The PodGroup reconciler core against a fake API: idempotent (409 is fine),
retried, owner uids from hints or lookups, never for dry runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.builders.reviews import checked, fixture
from webhook.podgroup_intent import Existing, OwnerHint, OwnerRef, PodGroupIntent
from webhook.podgroups.reconciler import PodGroupReconciler, RetryPolicy

FAST = RetryPolicy(attempts=4, base_delay=0.001, max_delay=0.004, owner_wait=0.3, hint_wait=0)
API = "scheduling.volcano.sh/v1beta1"


class ApiError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class FakeApi:
    """Records creates; answers from a script of statuses (None: success)."""

    def __init__(self, script: list[int | None] | None = None, *, exists: bool = False) -> None:
        self.script = list(script or [])
        self.calls: list[dict[str, Any]] = []
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.exists = exists

    async def create(self, intent: PodGroupIntent, body: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        self.calls.append(body)
        if self.script:
            status = self.script.pop(0)
            if status is not None:
                raise ApiError(status)
        key = (intent.namespace, intent.name)
        if self.exists or key in self.stored:
            raise ApiError(409)
        self.stored[key] = body


def intent(name: str = "job-a", owner: OwnerRef | None = None) -> PodGroupIntent:
    body = {
        "apiVersion": API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"minMember": 2},
    }
    return PodGroupIntent(API, "podgroups", "ml", name, body, owner)


JOB = OwnerRef("batch/v1", "Job", "a", "uid-1")


async def run(
    rec: PodGroupReconciler, *intents: PodGroupIntent, dry_run: bool = False
) -> list[bool]:
    await rec.start()
    try:
        accepted = [rec.submit(i, dry_run=dry_run) for i in intents]
        await asyncio.wait_for(rec.drain(), 5)
        return accepted
    finally:
        await rec.stop()


async def test_creates_once_with_the_owner_reference() -> None:
    api = FakeApi()
    outcomes: list[str] = []
    rec = PodGroupReconciler(api.create, policy=FAST, on_outcome=lambda _i, o: outcomes.append(o))
    accepted = await run(rec, intent(owner=JOB), intent(owner=JOB))
    assert accepted == [True, False]  # the second collapsed into the first
    assert len(api.calls) == 1 and outcomes == ["created"]
    assert api.calls[0]["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "a", "uid": "uid-1"}
    ]
    # once created, the same PodGroup for the same owner is not tried again
    await rec.start()
    assert rec.submit(intent(owner=JOB), dry_run=False) is False
    await rec.stop()


async def test_conflict_counts_as_success() -> None:
    api = FakeApi(exists=True)
    outcomes: list[str] = []
    rec = PodGroupReconciler(api.create, policy=FAST, on_outcome=lambda _i, o: outcomes.append(o))
    await run(rec, intent(owner=JOB))
    assert outcomes == ["exists"] and len(api.calls) == 1


@pytest.mark.parametrize("status", [500, 503, 429, None])
async def test_transient_errors_are_retried(status: int | None) -> None:
    class Transport(Exception):
        pass

    api = FakeApi()
    failures = 2

    async def flaky(i: PodGroupIntent, body: dict[str, Any]) -> None:
        nonlocal failures
        if failures:
            failures -= 1
            api.calls.append(body)
            raise ApiError(status) if status else Transport("connection reset")
        await api.create(i, body)

    outcomes: list[str] = []
    rec = PodGroupReconciler(flaky, policy=FAST, on_outcome=lambda _i, o: outcomes.append(o))
    await run(rec, intent(owner=JOB))
    assert len(api.calls) == 3 and outcomes == ["created"]


async def test_final_errors_and_exhausted_retries_fail() -> None:
    api = FakeApi([403])
    outcomes: list[str] = []
    rec = PodGroupReconciler(api.create, policy=FAST, on_outcome=lambda _i, o: outcomes.append(o))
    await run(rec, intent(owner=JOB))
    assert len(api.calls) == 1 and outcomes == ["failed"]
    api = FakeApi([500] * 10)
    outcomes.clear()
    rec = PodGroupReconciler(api.create, policy=FAST, on_outcome=lambda _i, o: outcomes.append(o))
    await run(rec, intent(owner=JOB))
    assert len(api.calls) == FAST.attempts and outcomes == ["failed"]


async def test_dry_run_never_creates() -> None:
    api = FakeApi()
    rec = PodGroupReconciler(api.create, policy=FAST)
    assert await run(rec, intent(owner=JOB), dry_run=True) == [False]
    assert api.calls == []


async def test_owner_uid_from_a_pod_hint() -> None:
    api = FakeApi()
    rec = PodGroupReconciler(api.create, policy=RetryPolicy(base_delay=0.5, owner_wait=5))
    await rec.start()
    try:
        assert rec.submit(intent(owner=OwnerRef("batch/v1", "Job", "a")), dry_run=False)
        await asyncio.sleep(0.01)
        assert api.calls == []  # waiting for the owner to exist
        # a hint for another owner kind is ignored
        rec.hint(OwnerHint(API, "ml", "job-a", OwnerRef("apps/v1", "ReplicaSet", "a", "rs")))
        rec.hint(OwnerHint(API, "ml", "job-a", JOB))
        await asyncio.wait_for(rec.drain(), 2)
    finally:
        await rec.stop()
    assert api.calls[0]["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


async def test_owner_uid_from_a_later_intent_with_uid() -> None:
    api = FakeApi()
    rec = PodGroupReconciler(api.create, policy=RetryPolicy(base_delay=0.5, owner_wait=5))
    await rec.start()
    try:
        rec.submit(intent(owner=OwnerRef("batch/v1", "Job", "a")), dry_run=False)
        assert rec.submit(intent(owner=JOB), dry_run=False) is False  # merged
        await asyncio.wait_for(rec.drain(), 2)
    finally:
        await rec.stop()
    assert len(api.calls) == 1
    assert api.calls[0]["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


async def test_owner_uid_from_a_lookup() -> None:
    api = FakeApi()
    answers: list[str | None] = [None, None, "uid-9"]
    asked: list[OwnerRef] = []

    async def resolve(namespace: str, owner: OwnerRef) -> str | None:
        asked.append(owner)
        return answers.pop(0)

    rec = PodGroupReconciler(api.create, resolve, policy=FAST)
    await run(rec, intent(owner=OwnerRef("batch/v1", "Job", "a")))
    assert len(asked) == 3 and asked[0].name == "a"
    assert api.calls[0]["metadata"]["ownerReferences"][0]["uid"] == "uid-9"


async def test_an_owner_that_never_appears_gets_no_podgroup() -> None:
    api = FakeApi()
    outcomes: list[str] = []

    async def resolve(namespace: str, owner: OwnerRef) -> str | None:
        return None

    rec = PodGroupReconciler(
        api.create,
        resolve,
        policy=RetryPolicy(base_delay=0.01, max_delay=0.02, owner_wait=0.1, hint_wait=0),
        on_outcome=lambda _i, o: outcomes.append(o),
    )
    await run(rec, intent(owner=OwnerRef("batch/v1", "Job", "a")))
    assert api.calls == [] and outcomes == ["no-owner"]


async def test_unowned_gang() -> None:
    api = FakeApi()
    rec = PodGroupReconciler(api.create, policy=FAST)
    await run(rec, intent(owner=None))
    assert "ownerReferences" not in api.calls[0]["metadata"]


async def test_a_workload_made_again_gets_its_podgroup_again() -> None:
    api = FakeApi()
    rec = PodGroupReconciler(api.create, policy=FAST)
    await run(rec, intent(owner=JOB))
    api.stored.clear()  # garbage-collected with the first Job
    await run(rec, intent(owner=OwnerRef("batch/v1", "Job", "a", "uid-2")))
    assert [c["metadata"]["ownerReferences"][0]["uid"] for c in api.calls] == ["uid-1", "uid-2"]


async def test_full_queue_drops_and_says_so() -> None:
    api = FakeApi()
    outcomes: list[str] = []
    rec = PodGroupReconciler(
        api.create, policy=FAST, queue_size=2, on_outcome=lambda _i, o: outcomes.append(o)
    )
    accepted = [rec.submit(intent(f"g{i}", JOB), dry_run=False) for i in range(3)]
    assert accepted == [True, True, False] and outcomes == ["dropped"]
    await rec.start()
    await asyncio.wait_for(rec.drain(), 2)
    await rec.stop()
    assert len(api.calls) == 2


async def test_a_crashing_create_does_not_kill_the_workers() -> None:
    calls = 0

    async def broken(i: PodGroupIntent, body: dict[str, Any]) -> None:
        nonlocal calls
        calls += 1
        raise ApiError(400)

    rec = PodGroupReconciler(broken, policy=FAST, workers=1)
    await run(rec, intent("a", JOB), intent("b", JOB))
    assert calls == 2


async def test_intents_from_admission_end_to_end() -> None:
    # Job admitted (owner uid unknown), then its pod (uid known): one PodGroup, owned.
    job_res, _ = checked(fixture("job-create-mpi-train.json"))
    pod_res, _ = checked(fixture("pod-create-from-job-mpi-train.json"))
    api = FakeApi()
    rec = PodGroupReconciler(api.create, policy=RetryPolicy(base_delay=0.5, owner_wait=5))
    await rec.start()
    try:
        for i in job_res.intents:
            rec.submit(i, dry_run=job_res.dry_run)
        for i in pod_res.intents:
            rec.submit(i, dry_run=pod_res.dry_run)
        await asyncio.wait_for(rec.drain(), 2)
    finally:
        await rec.stop()
    assert len(api.calls) == 1
    pg = api.calls[0]
    assert pg["metadata"]["name"] == "job-mpi-train"
    assert pg["metadata"]["ownerReferences"][0]["uid"] == "0bc7ef1a-72f8-41ee-8542-7c51e3afd7e4"
    assert pg["spec"]["minMember"] == 3


# --- following a scaled workload ------------------------------------------------------------


def scaled(n: int, owner: OwnerRef = JOB) -> PodGroupIntent:
    body = {
        "apiVersion": API,
        "kind": "PodGroup",
        "metadata": {"name": "job-a", "namespace": "ml"},
        "spec": {"minMember": n},
    }
    return PodGroupIntent(API, "podgroups", "ml", "job-a", body, owner, update=True)


class Scaler:
    """An ``update`` function over FakeApi's stored PodGroups, with a gate to hold it."""

    def __init__(self, api: FakeApi) -> None:
        self.api = api
        self.seen: list[int] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(
        self, intent: PodGroupIntent, owner: OwnerRef | None, body: dict[str, Any]
    ) -> Existing:
        await self.gate.wait()
        self.seen.append(body["spec"]["minMember"])
        stored = self.api.stored[(intent.namespace, intent.name)]
        refs = stored["metadata"].get("ownerReferences") or []
        if owner is None or not any(r["uid"] == owner.uid for r in refs):
            return Existing.OTHER
        if stored["spec"] == body["spec"]:
            return Existing.OURS
        stored["spec"] = dict(body["spec"])
        return Existing.UPDATED


async def test_an_update_brings_the_existing_podgroup_to_the_new_size() -> None:
    api = FakeApi()
    scaler = Scaler(api)
    outcomes: list[str] = []
    rec = PodGroupReconciler(
        api.create, policy=FAST, update=scaler, on_outcome=lambda _i, o: outcomes.append(o)
    )
    await run(rec, intent(owner=JOB))
    # A created PodGroup is remembered, yet an update is not dropped as a duplicate.
    await run(rec, scaled(4))
    assert api.stored[("ml", "job-a")]["spec"]["minMember"] == 4
    await run(rec, scaled(4))
    assert outcomes == ["created", "updated", "exists"]


async def test_the_last_update_wins() -> None:
    api = FakeApi()
    scaler = Scaler(api)
    rec = PodGroupReconciler(api.create, policy=FAST, update=scaler, workers=1)
    await run(rec, intent(owner=JOB))
    scaler.gate.clear()
    await rec.start()
    try:
        assert rec.submit(scaled(3), dry_run=False)
        await asyncio.sleep(0.01)  # the first update is in flight, held at the gate
        assert rec.submit(scaled(5), dry_run=False)
        assert rec.submit(scaled(6), dry_run=False)
        scaler.gate.set()
        await asyncio.wait_for(rec.drain(), 5)
    finally:
        await rec.stop()
    assert scaler.seen == [3, 6]
    assert api.stored[("ml", "job-a")]["spec"]["minMember"] == 6


async def test_an_update_never_touches_another_owners_podgroup() -> None:
    api = FakeApi()
    scaler = Scaler(api)
    outcomes: list[str] = []
    rec = PodGroupReconciler(
        api.create, policy=FAST, update=scaler, on_outcome=lambda _i, o: outcomes.append(o)
    )
    await run(rec, intent(owner=JOB))
    await run(rec, scaled(4, OwnerRef("batch/v1", "Job", "a", "uid-2")))
    assert api.stored[("ml", "job-a")]["spec"]["minMember"] == 2
    assert outcomes[-1] == "foreign"


async def test_an_update_of_a_missing_podgroup_creates_it() -> None:
    api = FakeApi()
    rec = PodGroupReconciler(api.create, policy=FAST, update=Scaler(api))
    await run(rec, scaled(3))
    assert api.stored[("ml", "job-a")]["spec"]["minMember"] == 3
