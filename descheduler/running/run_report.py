"""A run as a terminal report: the plan it carried out, then what it did, gang by gang
(``corral-descheduler run``'s output)."""

from __future__ import annotations

from descheduler.render import gpus_text, render_plan
from descheduler.running.run_result import RunResult

__all__ = ["render_run"]


def render_run(result: RunResult, source: str = "") -> str:
    """The plan, then what the run did with it, gang by gang."""
    lines = [render_plan(result.plan, source), ""]
    counts = {
        s: result.count(s)
        for s in ("evicted", "suspended", "rolled-back", "skipped", "failed", "partially-moved")
    }
    head = (
        f"Run: {result.pods_evicted} pod(s) evicted, {gpus_text(result.gpus_freed)} freed; "
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
