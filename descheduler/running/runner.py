"""Carrying a plan out: one run (``run --once``) and the loop (``run --interval``).

The runner is I/O-free itself: it talks to a :class:`~descheduler.running.runner_port.RunnerPort`
that fetches the cluster state, evicts one gang, writes an Event and records a gang's
move, so it runs against fakes in tests and against the Kubernetes layer in a cluster.
Its rules:

- Moves that make room for one waiting gang form a group. Before a group, a
  live check (the disruption budgets as they are now) may skip it whole.
- Before a gang is evicted its move is recorded (``corral.dev/last-moved`` on the
  PodGroup), so a stateless CronJob honours the cool-down next time. Once the first
  gang of a group is evicted, the waiting gang it makes room for is marked too
  (``corral.dev/room-made``): if it still waits on a later run, the room went to other
  pods, and the planner moves no more gangs for it until the cool-down ends.
- Every gang evicted gets an Event that names the plan and the gang it makes room for;
  so does every gang skipped or broken.
- A gang is evicted whole or not at all. If nothing of it was evicted (budgets refused,
  a limit), the gang and the rest of its group are skipped and the run goes on. If the
  first eviction failed outright, the run goes on and exits 1. If it broke part way --
  some members evicted, then a refusal or an error -- a Warning Event goes on the gang,
  the run stops evicting, and it exits 1.
- The limits hold per run, and across a run cut short (a crash, SIGTERM, a lost
  Lease) and the run after it: ``begin`` records the run, each gang's pods are recorded
  before they go, and ``finish`` closes the record when the run ends on its own (its
  plan through, or stopped by a gang broken part way), a run without moves too; the
  next run within ``runner.interval`` of the last eviction of a record left open counts
  its evictions as its own.
- A move's method says how: ``evict`` (the Evictor: a dry run of every member first,
  then the real evictions) or ``suspend`` (the workload's suspend switch, atomic by
  construction). A gang whose eviction is refused after some members went is retried
  until ``moves.retry_deadline``, then reported as partially moved (a Warning Event,
  the ``partially-moved`` status in the metrics, exit code 1). A suspend whose pods did
  not go within ``moves.suspend_grace`` is rolled back by the suspender (switch,
  PodGroup, mark) and reported ``rolled-back``: a Warning Event, the rest of its group
  not attempted, the workload marked never to be suspended again.
- Before planning, the suspensions corral made that are due end (``resume``): the gang
  they made room for is bound, or ``moves.resume_after`` passed (for a capacity room,
  its hold ended; those are resumed first); a crash between a suspend and its resume is
  healed there. After the moves, ``settle`` waits up to
  ``moves.resume_wait`` for the gangs room was made for, resuming as they bind.
- Dry-run plans and reports and touches nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from descheduler.config import DeschedulerConfig
from descheduler.planning.plan_model import Move, Plan
from descheduler.planning.planner import plan as make_plan
from descheduler.planning.state import ClusterState
from descheduler.running.run_result import DONE as _DONE
from descheduler.running.run_result import EXIT_FAILED, EXIT_OK, RunResult
from descheduler.running.runner_port import (
    GangEvent,
    GangOutcome,
    MoveOutcome,
    PodResult,
    Resumed,
    RunnerPort,
)

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "GangEvent",
    "GangOutcome",
    "MoveOutcome",
    "PodResult",
    "Resumed",
    "RunResult",
    "RunnerPort",
    "eviction_message",
    "run_loop",
    "run_once",
]

log = logging.getLogger(__name__)


def eviction_message(plan: Plan, move: Move) -> str:
    """The Event text for a move's evictions: the plan, the gang, and why."""
    return f"corral {plan.plan_id}: {move.reason}"


def _groups(moves: Sequence[Move]) -> list[list[Move]]:
    out: list[list[Move]] = []
    for m in moves:
        if out and m.for_gang is not None and out[-1][0].for_gang == m.for_gang:
            out[-1].append(m)
        else:
            out.append([m])
    return out


def _event(plan: Plan, move: Move, type_: str, reason: str, message: str) -> GangEvent:
    """An Event on the move's gang; its text names the plan, and the gang it makes room
    for when there is one."""
    text = f"corral {plan.plan_id}: {message}"
    if move.for_gang and move.for_gang not in message:
        text += f" (room for waiting gang {move.for_gang})"
    return GangEvent(
        type_,
        reason,
        text,
        move.namespace,
        move.podgroup,
        move.podgroup_api,
        tuple(p.name for p in move.pods),
        tuple(move.workloads) if move.method == "suspend" else (),
    )


_HELD_BACK = (MoveOutcome.REFUSED, MoveOutcome.SKIPPED, MoveOutcome.ABORTED)


async def run_once(
    io: RunnerPort,
    config: DeschedulerConfig,
    *,
    dry_run: bool = False,
    planner: Callable[[ClusterState, DeschedulerConfig], Plan] = make_plan,
    started: Callable[[RunResult], None] | None = None,
) -> RunResult:
    """Fetch, plan, evict gang by gang; see the module docstring for the rules.
    ``started(result)`` is handed the result once the plan is made; it fills in as the
    run goes, so a caller whose run is cancelled still knows what it did."""
    state = await io.fetch_state()
    resumed: list[Resumed] = []
    if not dry_run:
        resumed = await io.resume()
        if resumed:
            state = await io.fetch_state()
    t0 = time.perf_counter()
    plan = planner(state, config)
    result = RunResult(plan, [], time.perf_counter() - t0, resumed=resumed)
    if started is not None:
        started(result)
    if dry_run:
        note = "dry run: nothing evicted or suspended"
        result.outcomes = [GangOutcome(m, "dry-run", note) for m in plan.moves]
        return result
    if any(not r.ok for r in resumed):
        result.exit_code = EXIT_FAILED
    if plan.moves:
        await io.begin(plan)
    groups = _groups(plan.moves)
    try:
        for group in groups:
            if result.stopped is not None:
                result.outcomes.extend(
                    GangOutcome(m, "not-attempted", result.stopped) for m in group
                )
                continue
            await _run_group(io, plan, group, result, config.moves.retry_deadline)
    except asyncio.CancelledError:
        # Cancelled between gangs (see gang_lock): what is left was not attempted.
        result.cut_short = True
        if result.stopped is None:
            result.lease_lost = not io.is_leader()
            why = "leadership lost" if result.lease_lost else "cancelled"
            result.stopped = f"{why}: the run stops evicting"
        seen = {id(o.move) for o in result.outcomes}
        result.outcomes.extend(
            GangOutcome(m, "not-attempted", result.stopped)
            for g in groups
            for m in g
            if id(m) not in seen
        )
        raise
    if any(o.status == "suspended" for o in result.outcomes):
        settled = await io.settle(plan, result.outcomes)
        result.resumed.extend(settled)
        if any(not r.ok for r in settled):
            result.exit_code = EXIT_FAILED
    if not result.cut_short:
        try:
            await io.finish(plan)
        except Exception as e:  # the next run within the interval counts this one's too
            log.warning("could not record the run as finished: %s", e)
    return result


async def _move_gang(io: RunnerPort, move: Move, message: str) -> list[PodResult]:
    if move.method == "suspend":
        return list(await io.suspend_gang(move, message))
    return list(await io.evict_gang(move, message))


async def _retry_rest(
    io: RunnerPort, move: Move, message: str, results: list[PodResult], deadline: float
) -> list[PodResult]:
    """A gang evicted only in part: evict the rest again until ``deadline`` (monotonic
    seconds), or until the run must stop. The latest result of each pod."""
    latest = {(r.namespace, r.name): r for r in results}
    while time.monotonic() < deadline and _stop_reason(io) is None:
        rest = [p for p in move.pods if latest[(p.namespace, p.name)].outcome not in _DONE]
        if not rest:
            break
        await asyncio.sleep(max(min(io.retry_pause, deadline - time.monotonic()), 0))
        for r in await io.evict_gang(replace(move, pods=rest), message):
            latest[(r.namespace, r.name)] = r
    return [latest[(p.namespace, p.name)] for p in move.pods if (p.namespace, p.name) in latest]


async def _run_group(
    io: RunnerPort, plan: Plan, group: list[Move], result: RunResult, retry_deadline: float = 0.0
) -> None:
    why = await io.precheck(group)
    if why:
        for m in group:
            result.outcomes.append(GangOutcome(m, "skipped", why))
            await io.emit_event(_event(plan, m, "Normal", "GangMoveSkipped", why))
        return
    room_marked = False
    for i in range(len(group)):
        async with io.gang_lock or contextlib.nullcontext():
            stop = _stop_reason(io)
            if stop is not None:
                result.stopped = stop
                result.cut_short = True
                result.lease_lost = not io.is_leader()
                result.outcomes.extend(GangOutcome(m, "not-attempted", stop) for m in group[i:])
                return
            room_marked, go_on = await _move_one(
                io, plan, group, i, result, retry_deadline, room_marked
            )
        if not go_on:
            return


async def _move_one(
    io: RunnerPort,
    plan: Plan,
    group: list[Move],
    i: int,
    result: RunResult,
    retry_deadline: float,
    room_marked: bool,
) -> tuple[bool, bool]:
    """Move the group's ``i``-th gang whole, or not at all; (room marked, go on with
    the group)."""
    move, rest = group[i], group[i + 1 :]
    try:
        await io.mark_moved(move, plan.now)
    except Exception as e:
        # Nothing went, but the cluster refused a write: the run reports failure.
        why = f"could not record the move on the gang: {e}"
        log.error("%s: %s", move.unit, why)
        result.exit_code = EXIT_FAILED
        result.outcomes.append(GangOutcome(move, "skipped", why))
        result.outcomes.extend(GangOutcome(m, "not-attempted", why) for m in rest)
        return room_marked, False
    message = eviction_message(plan, move)
    results = await _move_gang(io, move, message)
    done = [r for r in results if r.outcome in _DONE]
    if done and len(done) < len(move.pods) and move.method == "evict":
        results = await _retry_rest(io, move, message, results, time.monotonic() + retry_deadline)
        done = [r for r in results if r.outcome in _DONE]
    if done and not room_marked and move.for_gang:
        room_marked = True
        try:
            await io.mark_room(move, plan.now)
        except Exception as e:  # the evictions stand; the next run may try again
            log.warning("%s: could not record the room made: %s", move.for_gang, e)
    if len(done) == len(move.pods):
        if move.method == "suspend":
            result.outcomes.append(GangOutcome(move, "suspended", "", results))
            text = f"{move.reason}; {move.how}"
            await io.emit_event(_event(plan, move, "Normal", "GangSuspended", text))
            return room_marked, True
        result.outcomes.append(GangOutcome(move, "evicted", "", results))
        await io.emit_event(_event(plan, move, "Normal", "GangMoved", move.reason))
        return room_marked, True
    bad = next((r for r in results if r.outcome not in _DONE), None)
    detail = ""
    if bad is not None:
        detail = f"{bad.namespace}/{bad.name}: {bad.outcome.value} {bad.message}".strip()
    back = next((r for r in results if r.outcome == MoveOutcome.ROLLED_BACK), None)
    if back is not None and all(r.outcome == MoveOutcome.ROLLED_BACK for r in results):
        msg = f"suspend rolled back: {back.message}"
        result.outcomes.append(GangOutcome(move, "rolled-back", msg, results))
        why = f"an earlier move for its gang was rolled back ({back.message})"
        result.outcomes.extend(GangOutcome(m, "not-attempted", why) for m in rest)
        log.warning("%s: %s", move.unit, msg)
        await io.emit_event(_event(plan, move, "Warning", "GangSuspendRolledBack", msg))
        return room_marked, False
    if not done and all(r.outcome in _HELD_BACK for r in results):
        msg = f"not moved, nothing evicted ({detail})"
        result.outcomes.append(GangOutcome(move, "skipped", msg, results))
        why = f"an earlier move for its gang was skipped ({detail})"
        result.outcomes.extend(GangOutcome(m, "not-attempted", why) for m in rest)
        await io.emit_event(_event(plan, move, "Normal", "GangMoveSkipped", msg))
        return room_marked, False
    result.exit_code = EXIT_FAILED
    if not done:
        msg = f"eviction failed, nothing evicted ({detail})"
        result.outcomes.append(GangOutcome(move, "failed", msg, results))
        result.outcomes.extend(
            GangOutcome(m, "not-attempted", f"an earlier move for its gang failed ({detail})")
            for m in rest
        )
        await io.emit_event(_event(plan, move, "Warning", "GangEvictionFailed", msg))
        return room_marked, False
    msg = (
        f"gang partially moved: {len(done)} of {len(move.pods)} pods ({detail}), "
        f"retried for {retry_deadline:g}s; the run stops evicting"
    )
    result.outcomes.append(GangOutcome(move, "partially-moved", msg, results))
    result.stopped = msg
    result.outcomes.extend(GangOutcome(m, "not-attempted", msg) for m in rest)
    log.error("%s: %s", move.unit, msg)
    await io.emit_event(_event(plan, move, "Warning", "GangEvictionIncomplete", msg))
    return room_marked, False


def _stop_reason(io: RunnerPort) -> str | None:
    if not io.is_leader():
        return "leadership lost: the run stops evicting"
    why = io.interrupted()
    if why:
        return f"{why}: the run stops evicting"
    return None


async def run_loop(
    io: RunnerPort,
    config: DeschedulerConfig,
    *,
    interval: float,
    stop: asyncio.Event,
    dry_run: bool = False,
    on_result: Callable[[RunResult], None] | None = None,
    on_error: Callable[[BaseException], None] | None = None,
) -> int:
    """Run every ``interval`` seconds until ``stop`` is set, only while leader. A run
    that raises is reported to ``on_error`` and the loop goes on. Returns the exit code
    of the last run (1 if the last attempt raised)."""
    code = EXIT_OK
    while not stop.is_set():
        if io.is_leader():
            try:
                result = await run_once(io, config, dry_run=dry_run)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                code = EXIT_FAILED
                log.exception("descheduler run failed")
                if on_error is not None:
                    on_error(e)
            else:
                code = result.exit_code
                if on_result is not None:
                    on_result(result)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)
    return code
