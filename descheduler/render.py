"""The plan as a terminal report: fragmentation per GPU model, the plan gang by gang
with its cost, and what changes."""

from __future__ import annotations

import textwrap

from gangplace.engine.report import (
    WIDTH,
    fit_label,
    model_width,
    render_comparison,
    render_report,
)
from gangplace.engine.timeparse import format_time

from descheduler.planning.plan_model import Move, Plan

__all__ = ["gpus_text", "render_plan"]

_KIND = {
    "make-room": "make room",
    "defragment": "defragment",
    "release-stale": "release stale gang",
}


def gpus_text(x: float) -> str:
    """``x`` GPUs in words: "1 GPU", "2.5 GPUs"."""
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
    if m.nominate:
        ns = m.for_gang_namespace
        held = ", ".join(f"{ns}/{k} -> {v}" for k, v in sorted(m.nominate.items()))
        lines.append(f"     holds it through the scheduler: nominates {held}")
    if m.kind == "defragment":
        lines.append(f"     lowers fragmentation by {m.gain_gpus:.2f} GPUs")
    if m.kind == "release-stale":
        lines.append(f"     {m.reason}")
    for p in m.pods:
        to = p.target or (
            "(waits for its gang)" if m.kind == "release-stale" else "(waits, suspended)"
        )
        gpus = f"  {gpus_text(p.gpu_milli / 1000)}" if p.gpu_milli else ""
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


def _unserved_lines(plan: Plan) -> list[str]:
    """One line per reason, naming the gangs it holds for (a long list cut with how many
    are left), up to :data:`NOT_MOVED_SHOWN` reasons; JSON has every gang."""
    by_reason: dict[str, list[str]] = {}
    for u in plan.unserved:
        by_reason.setdefault(u.reason, []).append(u.gang)
    lines = []
    for reason, gangs in list(by_reason.items())[:NOT_MOVED_SHOWN]:
        who = ", ".join(gangs[:3]) + (f" and {len(gangs) - 3} more" if len(gangs) > 3 else "")
        lines.append(f"  {who}: {reason}")
    rest = sum(len(g) for g in list(by_reason.values())[NOT_MOVED_SHOWN:])
    if rest:
        lines.append(f"  ... and {rest} more gang(s) (--output json lists all)")
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
            f"{gpus_text(gpus)} disrupted, cost {plan.cost:.2f}, "
            f"{plan.at_risk:.1f} GPU-hours of work at risk"
        )
        for i, m in enumerate(plan.moves, 1):
            lines.extend(_move_lines(i, m))
    else:
        lines.append("Plan: nothing to move.")
    if plan.unserved:
        lines.append("")
        lines.append(f"Waiting gangs the plan cannot help ({len(plan.unserved)}):")
        lines.extend(_unserved_lines(plan))
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
        mw = model_width([x.model for x in plan.largest], 22, least=20)
        lines.extend(
            f"  {fit_label(x.model, mw):<{mw}} now {x.now:>3}   after {x.after:>3}"
            for x in plan.largest
        )
    lines.append("")
    lines += _gang_list("Waiting gangs that cannot start now:  ", plan.waiting_before)
    lines += _gang_list("Waiting gangs that cannot start after:", plan.waiting_after)
    return "\n".join(lines)


# Waiting gangs named one by one up to this many in a list (JSON has all).
GANGS_SHOWN = 20


def _gang_list(label: str, gangs: list[str]) -> list[str]:
    """``label`` and the gangs, wrapped at ``WIDTH`` columns; a long list is cut with
    how many are left and how many in all."""
    if not gangs:
        return [f"{label} none"]
    text = ", ".join(gangs[:GANGS_SHOWN])
    if len(gangs) > GANGS_SHOWN:
        text += (
            f" and {len(gangs) - GANGS_SHOWN} more ({len(gangs)} in all; --output json lists all)"
        )
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=f"{label} ",
        subsequent_indent=" " * (len(label) + 1),
        break_long_words=False,
        break_on_hyphens=False,
    )
