"""Two candidates for one Lease never lead at once, and leadership moves on when the
leader stops, is cut off, or hangs."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from gangplace.kube import LeaderElector

from tests.kubeapi import CLIENT_HEADER, ApiServer
from tests.kubeapi import objects as o

# Short, but with the leader's margin (lease - renew deadline) well above scheduling noise.
TIMING = {"lease_duration": 1.0, "renew_deadline": 0.5, "retry_period": 0.1}


@dataclass
class Candidate:
    elector: LeaderElector
    terms: list[list[float]] = field(default_factory=list)  # [start, end] of each term
    task: asyncio.Task[None] | None = None

    async def work(self) -> None:
        self.terms.append([time.monotonic(), float("inf")])
        try:
            await asyncio.Event().wait()
        finally:
            self.terms[-1][1] = time.monotonic()

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(self.work))

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    @property
    def leading(self) -> bool:
        return bool(self.terms) and self.terms[-1][1] == float("inf")


class Referee:
    """Samples both candidates every few milliseconds: at no instant may both count
    themselves leader, nor may both run their leader's work."""

    def __init__(self, a: Candidate, b: Candidate) -> None:
        self.a, self.b = a, b
        self.samples = 0
        self.overlaps: list[str] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.samples += 1
            if self.a.elector.is_leader and self.b.elector.is_leader:
                self.overlaps.append("both is_leader")
            if self.a.leading and self.b.leading:
                self.overlaps.append("both running leader work")
            await asyncio.sleep(0.003)

    def __enter__(self) -> Referee:
        self._task = asyncio.create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


def no_overlap(a: Candidate, b: Candidate) -> None:
    for s1, e1 in a.terms:
        for s2, e2 in b.terms:
            assert e1 <= s2 or e2 <= s1, f"terms overlap: a={a.terms} b={b.terms}"


async def until(cond: Callable[[], bool], timeout: float) -> float:
    t0 = time.monotonic()
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.005)
    return time.monotonic() - t0


@pytest.fixture
async def pair(api: ApiServer) -> AsyncIterator[tuple[Candidate, Candidate]]:
    api.store.load([o.namespace("corral")])

    def candidate(name: str) -> Candidate:
        kube = api.client(name, request_timeout=5)
        return Candidate(
            LeaderElector(
                kube, name="corral-descheduler", namespace="corral", identity=name, **TIMING
            )
        )

    a, b = candidate("a"), candidate("b")
    yield a, b
    await a.stop()
    await b.stop()


class ManualClock:
    """The electors' clock, moved only by the test: a loaded machine cannot make a
    renewal late, nor a Lease expire, and a candidate can take the Lease over only when
    its holder hands it back."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lease_requests(api: ApiServer, who: str, method: str) -> int:
    """Requests of candidate ``who`` (its token is its name) for the Lease."""
    return sum(
        1
        for r in api.requests(method, "/leases/corral-descheduler")
        if r.authorization == f"Bearer {who}"
    )


def renewals(api: ApiServer, who: str) -> int:
    return lease_requests(api, who, "PUT")


def tries(api: ApiServer, who: str) -> int:
    return lease_requests(api, who, "GET")


async def test_failover_when_the_leader_stops(api: ApiServer) -> None:
    api.store.load([o.namespace("corral")])
    clock = ManualClock()
    api.accept("a", "b")  # the server knows their tokens: an unknown one is 401

    def candidate(name: str) -> Candidate:
        kube = api.client(name, token=name, request_timeout=30)
        return Candidate(
            LeaderElector(
                kube,
                name="corral-descheduler",
                namespace="corral",
                identity=name,
                clock=clock,
                **TIMING,
            )
        )

    a, b = candidate("a"), candidate("b")
    try:
        with Referee(a, b) as ref:
            a.start()
            await until(lambda: a.leading, 30)
            b.start()
            # Several renewals of a, several tries of b: b stays a follower throughout.
            puts, gets = renewals(api, "a"), tries(api, "b")
            await until(lambda: renewals(api, "a") >= puts + 5 and tries(api, "b") >= gets + 5, 30)
            assert a.leading and not b.terms and a.elector.terms == 1
            assert b.elector.leader == "a"
            await a.stop()  # stops its work, then releases the Lease
            # The clock stands still: b cannot wait the Lease out, only take it back.
            await until(lambda: b.leading, 30)
            assert a.terms[0][1] <= b.terms[0][0]
        assert ref.samples > 10 and ref.overlaps == []
        no_overlap(a, b)
        lease = api.store.get(
            api.store.resource("leases", "coordination.k8s.io"), "corral", "corral-descheduler"
        )
        assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    finally:
        await a.stop()
        await b.stop()


@pytest.mark.slow
async def test_failover_when_the_leader_is_cut_off(
    api: ApiServer, pair: tuple[Candidate, Candidate]
) -> None:
    a, b = pair
    with Referee(a, b) as ref:
        a.start()
        await until(lambda: a.leading, 2)
        b.start()
        await asyncio.sleep(0.3)
        api.faults.fail(503, times=-1, header=(CLIENT_HEADER, "a"))  # a loses the API server
        cut = time.monotonic()
        await until(lambda: not a.leading, 2)
        assert time.monotonic() - cut <= TIMING["renew_deadline"] + 0.2
        await until(lambda: b.leading, 3)
        assert b.terms[0][0] - a.terms[0][1] > 0.2  # b waited the lease out
        api.faults.clear()  # a comes back: a follower now
        await asyncio.sleep(1.2)
        assert b.leading and len(a.terms) == 1
    assert ref.overlaps == []
    no_overlap(a, b)


@pytest.mark.slow
async def test_a_hanging_renewal_ends_leadership_on_time(
    api: ApiServer, pair: tuple[Candidate, Candidate]
) -> None:
    a, b = pair
    with Referee(a, b) as ref:
        a.start()
        await until(lambda: a.leading, 2)
        b.start()
        await asyncio.sleep(0.2)
        api.faults.delay(30, header=(CLIENT_HEADER, "a"))  # every request of a hangs
        hang = time.monotonic()
        await until(lambda: not a.leading, 2)
        assert time.monotonic() - hang <= TIMING["renew_deadline"] + 0.2
        await until(lambda: b.leading, 3)
    assert ref.overlaps == []
    no_overlap(a, b)


async def test_simultaneous_start_elects_one(
    api: ApiServer, pair: tuple[Candidate, Candidate]
) -> None:
    a, b = pair
    with Referee(a, b) as ref:
        a.start()
        b.start()
        await until(lambda: a.leading or b.leading, 2)
        await asyncio.sleep(0.6)
        assert a.leading != b.leading
    assert ref.overlaps == []


async def test_work_that_finishes_releases_the_lease(api: ApiServer) -> None:
    api.store.load([o.namespace("corral")])
    done = []

    async def work() -> None:
        done.append(True)

    el = LeaderElector(api.client("x"), name="l", namespace="corral", identity="x", **TIMING)
    await asyncio.wait_for(el.run(work), 3)
    assert done == [True] and not el.is_leader
    lease = api.store.get(api.store.resource("leases", "coordination.k8s.io"), "corral", "l")
    assert lease["spec"]["holderIdentity"] == ""

    async def broken() -> None:
        raise RuntimeError("the loop failed")

    with pytest.raises(RuntimeError, match="the loop failed"):
        await asyncio.wait_for(el.run(broken), 3)


def test_bad_timings_are_refused() -> None:
    with pytest.raises(ValueError, match="retry_period < renew_deadline < lease_duration"):
        LeaderElector(
            None, name="l", namespace="n", identity="i", lease_duration=2, renew_deadline=3
        )  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="whole"):
        LeaderElector(
            None,
            name="l",
            namespace="n",
            identity="i",
            lease_duration=0.5,
            renew_deadline=0.3,
            retry_period=0.1,
        )  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="required"):
        LeaderElector(None, name="", namespace="n", identity="i")  # type: ignore[arg-type]
