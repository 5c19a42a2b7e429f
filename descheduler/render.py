"""The plan as a terminal report: fragmentation per GPU model, the plan gang by gang
with its cost, and what changes."""

from __future__ import annotations

from gangplace.engine.report import render_comparison, render_report
from gangplace.engine.timeparse import format_time

from descheduler.planning.plan_model import Move, Plan
from descheduler.running.run_result import RunResult

__all__ = ["render_plan", "render_run"]

_KIND = {
    "make-room": "make room",
    "defragment": "defragment",
    "release-stale": "release stale gang",
}


def _gpus(x: float) -> str:
    return f"{x:g} GPU" + ("" if x == 1 else "s")


def _move_lines(i: int, m: Move) -> list[str]:
    if m.gang is None:
        who = f"pod {m.namespace}/{m.pods[0].name}"
    elif m.partial:
        who = f"{len(m.pods)} member(s) above minAvailable of gang {m.unit}"
    else:
        who = f"gang {m.unit} (whole, {len(m.pods)} pod{'s' if len(m.pods) != 1 else ''})"
    head = (
        f"{i:>3}. {_KIND[m.kind]}: {who}, {m.method}, priority {m.priority}, "
        f"queue {m.queue}, cost {m.cost:.2f}, {m.at_risk:.1f} GPU-hours at risk"
    )
    lines = [head]
    if m.method == "suspend":
        lines.append(f"     suspends {', '.join(m.workload_names())} (resumed after)")
    if m.for_gang:
        lines.append(f"     makes room for {m.for_gang}")
    if m.kind == "defragment":
        lines.append(f"     lowers fragmentation by {m.gain_gpus:.2f} GPUs")
    if m.kind == "release-stale":
        lines.append(f"     {m.reason}")
    for p in m.pods:
        to = p.target or (
            "(waits for its gang)" if m.kind == "release-stale" else "(waits, suspended)"
        )
        gpus = f"  {_gpus(p.gpu_milli / 1000)}" if p.gpu_milli else ""
        lines.append(f"       {p.namespace}/{p.name:<28} {p.node} -> {to}{gpus}")
    return lines


# Running gangs that may not move, listed one by one up to this many (JSON has all).
NOT_MOVED_SHOWN = 12


def _not_moved_lines(plan: Plan) -> list[str]:
    rows = sorted(plan.not_moved, key=lambda x: (x.priority, x.unit))
    lines = [f"  {x.unit} (priority {x.priority}): {x.reason}" for x in rows[:NOT_MOVED_SHOWN]]
    if len(rows) > NOT_MOVED_SHOWN:
        lines.append(f"  ... and {len(rows) - NOT_MOVED_SHOWN} more (--output json lists all)")
    return lines


def render_plan(plan: Plan, source: str = "") -> str:
    title = f"corral descheduler plan {plan.plan_id} at {format_time(plan.now)}"
    lines = [title + (f" for {source}" if source else ""), ""]
    if plan.report_before is not None:
        lines.append(render_report(plan.report_before, "GPU fragmentation now"))
        lines.append("")
    gpus = sum(m.gpus for m in plan.moves)
    if plan.moves:
        by = plan.by_method()
        lines.append(
            f"Plan: {len(plan.moves)} move(s), {plan.pods_moved} pod(s) moved "
            f"({by['evict']} evicted, {by['suspend']} by suspending their workload), "
            f"{_gpus(gpus)} disrupted, cost {plan.cost:.2f}, "
            f"{plan.at_risk:.1f} GPU-hours of work at risk"
        )
        for i, m in enumerate(plan.moves, 1):
            lines.extend(_move_lines(i, m))
    else:
        lines.append("Plan: nothing to move.")
    if plan.unserved:
        lines.append("")
        lines.append("Waiting gangs the plan cannot help:")
        lines.extend(f"  {u.gang}: {u.reason}" for u in plan.unserved)
    if plan.suspended:
        lines.append("")
        lines.append("Suspended gangs (neither waiting nor moved):")
        lines.extend(f"  {x.unit}: {x.reason}" for x in plan.suspended)
    if plan.not_moved:
        lines.append("")
        lines.append(f"Running gangs not movable ({len(plan.not_moved)}):")
        lines.extend(_not_moved_lines(plan))
    if plan.notes:
        lines.append("")
        lines.append("Notes:")
        lines.extend(f"  {n}" for n in plan.notes)
    if plan.report_before is not None and plan.report_after is not None:
        lines.append("")
        lines.append("Before and after the plan:")
        lines.append(render_comparison(plan.report_before, plan.report_after))
    if plan.largest:
        lines.append("")
        lines.append("Largest pod that fits on one node (whole GPUs), per GPU model:")
        lines.extend(f"  {x.model:<20} now {x.now:>3}   after {x.after:>3}" for x in plan.largest)
    lines.append("")

    def names(xs: list[str]) -> str:
        return ", ".join(xs) if xs else "none"

    lines.append(f"Waiting gangs that cannot start now:   {names(plan.waiting_before)}")
    lines.append(f"Waiting gangs that cannot start after: {names(plan.waiting_after)}")
    return "\n".join(lines)


def render_run(result: RunResult, source: str = "") -> str:
    """The plan, then what the run did with it, gang by gang."""
    lines = [render_plan(result.plan, source), ""]
    counts = {
        s: result.count(s)
        for s in ("evicted", "suspended", "rolled-back", "skipped", "failed", "partially-moved")
    }
    head = (
        f"Run: {result.pods_evicted} pod(s) evicted, {_gpus(result.gpus_freed)} freed; "
        + ", ".join(f"{n} gang(s) {s}" for s, n in counts.items() if n)
    )
    lines.append(head.rstrip("; "))
    for o in result.outcomes:
        line = f"  {o.status:<15} {o.move.unit} ({o.move.method})"
        if o.message:
            line += f": {o.message}"
        lines.append(line)
    for r in result.resumed:
        ok = "" if r.ok else f" -- failed: {r.message}"
        lines.append(f"  {r.action:<15} {r.workload}: {r.reason}{ok}")
    if result.stopped:
        lines.append(f"Stopped early: {result.stopped}")
    lines.append(f"Exit code {result.exit_code}")
    return "\n".join(lines)
