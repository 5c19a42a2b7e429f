"""The runner core against fakes: it evicts what the plan says, gang by gang; dry-run
evicts nothing; a refusal mid-gang stops the run loudly; budgets that say no skip a
gang whole; the loop runs only while leader and survives a failed run."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest

from descheduler import DeschedulerConfig, Move, Plan, parse_config, state_from_list
from descheduler.planning.state import ClusterState
from descheduler.running.metrics import DeschedulerMetrics
from descheduler.running.runner import (
    EXIT_FAILED,
    EXIT_OK,
    RunResult,
    run_loop,
    run_once,
)
from descheduler.running.runner_port import GangEvent, MoveOutcome, NoOpPort, PodResult, Resumed
from tests.builders import objects as b
from tests.builders.descheduler_cluster import NOW, as_list, gang, gpu_node, pod


def two_gang_cluster() -> ClusterState:
    """Two waiting gangs, two groups of moves. A 4-GPU job needs the 2-pod gang "pair"
    moved off n5 (n4..n6 at 7/6/7 GPUs used). A 2 x 8-GPU gang needs sweep-a and
    sweep-b (3 x 2 GPUs each) moved off n0 and n1 into the 2-GPU holes of n2, n3, n7..n10.
    """
    holes = ["n2", "n3", "n7", "n8", "n9", "n10"]
    items: list[Any] = [gpu_node(f"n{i}") for i in range(11)]
    items += gang("sweep-a", ["n0"] * 3, 2)
    items += gang("sweep-b", ["n1"] * 3, 2)
    items += [pod(f"keep-{n}", n, 6, owner_kind="") for n in holes]
    items += [pod("big-4", "n4", 7, owner_kind=""), pod("big-5", "n5", 4, owner_kind="")]
    items += [pod("big-6", "n6", 7, owner_kind="")]
    items += gang("pair", ["n5", "n5"], 1)
    items += gang("pretrain", [], 8, pending=2)
    items += gang("llm", [], 4, pending=1)
    return state_from_list(as_list(items), NOW)


class FakeCluster(NoOpPort):
    """Records every call; ``script`` says what happens to each pod (default: evicted).
    A test plays other parts by setting the method on the instance."""

    def __init__(self, state: ClusterState, script: dict[str, MoveOutcome] | None = None) -> None:
        self.state = state
        self.script = script or {}
        self.evicted: list[str] = []
        self.calls: list[str] = []
        self.events: list[GangEvent] = []
        self.marked: list[tuple[str, datetime]] = []
        self.precheck_says: str | None = None
        self.leader = True

    async def fetch_state(self) -> ClusterState:
        return self.state

    async def evict_gang(self, move: Move, message: str) -> Sequence[PodResult]:
        self.calls.append(move.unit)
        assert message.startswith("corral plan-") and move.reason in message
        out: list[PodResult] = []
        for pm in move.pods:
            outcome = self.script.get(pm.name, MoveOutcome.EVICTED)
            out.append(PodResult(pm.namespace, pm.name, outcome, "scripted"))
            if outcome is MoveOutcome.EVICTED:
                self.evicted.append(pm.name)
            else:  # the evictor stops at the first pod that does not go
                out += [
                    PodResult(r.namespace, r.name, MoveOutcome.ABORTED)
                    for r in move.pods[len(out) :]
                ]
                break
        return out

    async def emit_event(self, event: GangEvent) -> None:
        self.events.append(event)

    async def mark_moved(self, move: Move, now: datetime) -> None:
        self.marked.append((move.unit, now))

    async def precheck(self, group: Sequence[Move]) -> str | None:
        return self.precheck_says

    def is_leader(self) -> bool:
        return self.leader

    def io(self) -> FakeCluster:
        return self


async def test_a_full_run_evicts_what_the_plan_says() -> None:
    fake = FakeCluster(two_gang_cluster())
    result = await run_once(fake.io(), DeschedulerConfig())
    planned = [pm.name for m in result.plan.moves for pm in m.pods]
    assert planned and sorted(fake.evicted) == sorted(planned)
    assert result.exit_code == EXIT_OK and result.stopped is None
    assert {o.status for o in result.outcomes} == {"evicted"}
    # the move is recorded on the gang before its pods go
    assert [u for u, _ in fake.marked] == [m.unit for m in result.plan.moves]
    assert all(t == NOW for _, t in fake.marked)
    assert result.pods_evicted == len(planned)
    assert result.gpus_freed == sum(m.gpus for m in result.plan.moves)


async def test_dry_run_evicts_nothing() -> None:
    fake = FakeCluster(two_gang_cluster())
    result = await run_once(fake.io(), DeschedulerConfig(), dry_run=True)
    assert result.plan.moves
    assert fake.calls == [] and fake.marked == [] and fake.events == []
    assert {o.status for o in result.outcomes} == {"dry-run"}
    assert result.exit_code == EXIT_OK


async def test_a_refusal_mid_gang_stops_the_run_loudly() -> None:
    state = two_gang_cluster()
    probe = await run_once(FakeCluster(state).io(), DeschedulerConfig(), dry_run=True)
    first = probe.plan.moves[0]
    assert first.unit == "default/pair" and len(first.pods) == 2
    fake = FakeCluster(state, {first.pods[1].name: MoveOutcome.REFUSED})
    io = fake.io()
    io.retry_pause = 0.01
    quick = parse_config({"moves": {"retry_deadline": 0.1}})
    result = await run_once(io, quick)
    assert result.exit_code == EXIT_FAILED
    assert result.outcomes[0].status == "partially-moved"
    assert result.stopped and "stops evicting" in result.stopped
    # the rest of the gang was retried until the deadline, nothing after it was tried
    assert set(fake.calls) == {first.unit} and len(fake.calls) > 2
    assert fake.evicted == [first.pods[0].name]
    assert all(o.status == "not-attempted" for o in result.outcomes[1:])
    (event,) = fake.events
    assert event.type == "Warning" and event.reason == "GangEvictionIncomplete"
    assert event.podgroup == first.podgroup and "1 of 2" in event.message


async def test_a_refusal_mid_gang_is_retried_until_it_goes() -> None:
    """The budget frees up within the deadline: the gang is moved whole after all."""
    state = two_gang_cluster()
    first = (await run_once(FakeCluster(state).io(), DeschedulerConfig(), dry_run=True)).plan.moves[
        0
    ]
    fake = FakeCluster(state, {first.pods[1].name: MoveOutcome.REFUSED})
    io = fake.io()
    io.retry_pause = 0.01
    real = io.evict_gang

    async def refuse_twice(move: Move, message: str) -> Sequence[PodResult]:
        if fake.calls.count(first.unit) == 2:
            fake.script.clear()
        return await real(move, message)

    io.evict_gang = refuse_twice
    result = await run_once(io, parse_config({"moves": {"retry_deadline": 5}}))
    assert result.outcomes[0].status == "evicted" and result.exit_code == EXIT_OK
    assert fake.calls[:3] == [first.unit] * 3
    assert sorted(fake.evicted[:2]) == sorted(p.name for p in first.pods)


async def test_budget_refusal_before_any_eviction_skips_the_gang_and_goes_on() -> None:
    state = two_gang_cluster()
    probe = await run_once(FakeCluster(state).io(), DeschedulerConfig(), dry_run=True)
    moves = probe.plan.moves
    first = moves[0]
    fake = FakeCluster(state, {first.pods[0].name: MoveOutcome.REFUSED})
    result = await run_once(fake.io(), DeschedulerConfig())
    assert result.exit_code == EXIT_OK
    assert result.outcomes[0].status == "skipped"
    assert first.pods[0].name not in fake.evicted
    # moves for another waiting gang still run; those for the same one do not
    for m, o in zip(moves[1:], result.outcomes[1:], strict=True):
        if m.for_gang == first.for_gang:
            assert o.status == "not-attempted"
        else:
            assert o.status == "evicted"
    assert fake.events[0].reason == "GangMoveSkipped"


async def test_a_failed_first_eviction_goes_on_but_exits_1() -> None:
    state = two_gang_cluster()
    probe = await run_once(FakeCluster(state).io(), DeschedulerConfig(), dry_run=True)
    first = probe.plan.moves[0]
    fake = FakeCluster(state, {first.pods[0].name: MoveOutcome.FAILED})
    result = await run_once(fake.io(), DeschedulerConfig())
    assert result.exit_code == EXIT_FAILED and result.stopped is None
    assert result.outcomes[0].status == "failed"
    assert fake.events[0].type == "Warning"


async def test_precheck_skips_a_group_whole() -> None:
    fake = FakeCluster(two_gang_cluster())
    fake.precheck_says = "budget training/sweep allows 0 disruptions"
    result = await run_once(fake.io(), DeschedulerConfig())
    assert fake.calls == [] and {o.status for o in result.outcomes} == {"skipped"}
    assert result.exit_code == EXIT_OK


async def test_losing_leadership_stops_evicting() -> None:
    fake = FakeCluster(two_gang_cluster())
    calls = 0

    def leader() -> bool:
        nonlocal calls
        calls += 1
        return calls <= 1  # leader for the first gang only

    io = fake.io()
    io.is_leader = leader
    result = await run_once(io, DeschedulerConfig())
    assert len(fake.calls) == 1
    assert result.stopped and "leadership" in result.stopped


async def test_the_loop_runs_while_leader_and_survives_a_failed_run() -> None:
    fake = FakeCluster(two_gang_cluster())
    results: list[Any] = []
    errors: list[BaseException] = []
    stop = asyncio.Event()
    fetches = 0

    async def flaky_fetch() -> ClusterState:
        nonlocal fetches
        fetches += 1
        if fetches == 1:
            raise ConnectionError("API server away")
        if fetches >= 3:
            stop.set()
        return fake.state

    io = fake.io()
    io.fetch_state = flaky_fetch
    code = await run_loop(
        io,
        DeschedulerConfig(),
        interval=0.01,
        stop=stop,
        dry_run=True,
        on_result=results.append,
        on_error=errors.append,
    )
    assert len(errors) == 1 and isinstance(errors[0], ConnectionError)
    assert len(results) == 2 and code == EXIT_OK
    assert fake.calls == []  # dry run

    fake.leader = False
    stop2 = asyncio.Event()
    task = asyncio.create_task(
        run_loop(
            fake.io(), DeschedulerConfig(), interval=0.01, stop=stop2, on_result=results.append
        )
    )
    await asyncio.sleep(0.05)
    stop2.set()
    await task
    assert len(results) == 2  # not leader: no run


async def _run_with_lease_for(gangs: int | None) -> tuple[list[str], list[str], RunResult]:
    """One run whose leader loses its Lease after ``gangs`` gangs (None: never)."""
    fake = FakeCluster(two_gang_cluster())
    began: list[str] = []
    finished: list[str] = []
    asked = 0

    def is_leader() -> bool:
        nonlocal asked
        asked += 1
        return gangs is None or asked <= gangs

    async def begin(p: Plan) -> None:
        began.append(p.plan_id)

    async def finish(p: Plan) -> None:
        finished.append(p.plan_id)

    io = fake.io()
    io.is_leader, io.begin, io.finish = is_leader, begin, finish
    return began, finished, await run_once(io, DeschedulerConfig())


async def test_only_a_run_through_its_plan_is_closed() -> None:
    """``finish`` tells the next run its limits are whole: not after a run cut short."""
    began, finished, result = await _run_with_lease_for(None)
    assert result.stopped is None and began == finished == [result.plan.plan_id]
    began, finished, result = await _run_with_lease_for(1)
    assert result.stopped is not None and "leadership lost" in result.stopped
    assert began == [result.plan.plan_id] and finished == []


async def test_metrics_count_what_happened() -> None:
    fake = FakeCluster(two_gang_cluster())
    result = await run_once(fake.io(), DeschedulerConfig())
    m = DeschedulerMetrics()
    m.observe(result)
    reg = m.registry
    assert reg.get_sample_value("corral_descheduler_evictions_total", {"result": "evicted"}) == (
        result.pods_evicted
    )
    assert reg.get_sample_value("corral_descheduler_gpus_freed_total") == result.gpus_freed
    assert reg.get_sample_value(
        "corral_descheduler_fragmentation_gpus", {"when": "before"}
    ) == pytest.approx(result.plan.fragmentation_before)
    assert reg.get_sample_value("corral_descheduler_runs_total", {"exit_code": "0"}) == 1


async def test_room_marks_events_and_begin() -> None:
    fake = FakeCluster(two_gang_cluster())
    begun: list[str] = []
    rooms: list[str] = []

    async def begin(plan: Any) -> None:
        begun.append(plan.plan_id)

    async def mark_room(move: Move, now: datetime) -> None:
        assert fake.evicted  # only once something of the group is gone
        rooms.append(move.for_gang or "")

    io = fake.io()
    io.begin, io.mark_room = begin, mark_room
    result = await run_once(io, DeschedulerConfig())
    assert begun == [result.plan.plan_id]
    assert sorted(rooms) == ["default/llm", "default/pretrain"]  # once per group
    moved = [e for e in fake.events if e.reason == "GangMoved"]
    assert [e.podgroup for e in moved] == [m.gang for m in result.plan.moves]
    for e, m in zip(moved, result.plan.moves, strict=True):
        assert e.message.startswith(f"corral {result.plan.plan_id}: ")
        assert m.for_gang is not None and m.for_gang in e.message


async def test_an_interruption_stops_between_gangs() -> None:
    fake = FakeCluster(two_gang_cluster())
    io = fake.io()
    io.interrupted = lambda: "SIGTERM received" if fake.calls else None
    result = await run_once(io, DeschedulerConfig())
    assert len(fake.calls) == 1 and result.exit_code == EXIT_OK
    assert result.stopped == "SIGTERM received: the run stops evicting"
    assert {o.status for o in result.outcomes[1:]} == {"not-attempted"}


def job_cluster() -> ClusterState:
    """7/6/7 with the two 1-GPU pods of n1 each a Job of backoffLimit 0: suspended."""
    items: list[Any] = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 7, owner_kind=""), pod("big-2", "n2", 7, owner_kind="")]
    items += [pod("big-1", "n1", 4, owner_kind="")]
    for name in ("s1", "s2"):
        items.append(pod(name, "n1", 1, owner_kind="Job", owner=name))
        items.append(b.job(name, backoff_limit=0, uid=f"uid-owner-{name}"))
    items += gang("llm", [], 4, pending=1)
    return state_from_list(as_list(items), NOW)


async def test_suspend_moves_go_through_suspend_and_are_counted_by_method() -> None:
    fake = FakeCluster(job_cluster())
    suspended: list[str] = []
    order: list[str] = []

    async def suspend_gang(move: Move, message: str) -> Sequence[PodResult]:
        assert move.method == "suspend" and move.workloads
        assert message.startswith("corral plan-") and move.reason in message
        suspended.append(move.unit)
        return [PodResult(p.namespace, p.name, MoveOutcome.SUSPENDED) for p in move.pods]

    async def resume() -> list[Resumed]:
        order.append("resume")
        return [Resumed("Job default/old", "resume", "gang default/x is bound")]

    async def settle(plan: Plan, outcomes: Sequence[Any]) -> list[Resumed]:
        order.append("settle")
        assert {o.status for o in outcomes} == {"suspended"}
        return [Resumed("Job default/s1", "resume", "bound", ok=False, message="409")]

    io = fake.io()
    io.suspend_gang, io.resume, io.settle = suspend_gang, resume, settle
    result = await run_once(io, DeschedulerConfig())
    assert sorted(suspended) == ["default/pod:s1", "default/pod:s2"] and fake.calls == []
    assert order == ["resume", "settle"]
    assert [r.action for r in result.resumed] == ["resume", "resume"]
    assert result.exit_code == EXIT_FAILED  # a resume that failed is reported
    assert {e.reason for e in fake.events} == {"GangSuspended"}
    assert all(e.workloads for e in fake.events)
    m = DeschedulerMetrics()
    m.observe(result)
    reg = m.registry
    moves = {"method": "suspend", "outcome": "suspended"}
    assert reg.get_sample_value("corral_descheduler_moves_total", moves) == 2
    assert reg.get_sample_value("corral_descheduler_evictions_total", {"result": "evicted"}) is None
    for result_, n in (("ok", 1), ("failed", 1)):
        labels = {"action": "resume", "result": result_}
        assert reg.get_sample_value("corral_descheduler_resumptions_total", labels) == n
    # dry run: neither suspends nor resumes
    order.clear()
    suspended.clear()
    dry = await run_once(io, DeschedulerConfig(), dry_run=True)
    assert {o.status for o in dry.outcomes} == {"dry-run"} and not suspended and not order
