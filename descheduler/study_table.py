"""The figures of ``corral-descheduler study``: per (load, mode), each figure's median and
range over the seeds (:func:`summarize`), and the text a user reads (:func:`render`), at
most 100 columns wide.

A queue is *stable* in a run when its p95 wait does not grow with the run's length: the
whole run's p95 is within :data:`STABLE_RATIO` x (plus :data:`STABLE_SLACK` job lengths)
of the p95 of the same run cut at half its length.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from gangplace.sim.gang_study import DetailedResult

__all__ = [
    "FIGURES",
    "STABLE_RATIO",
    "STABLE_SLACK",
    "render",
    "stable",
    "summarize",
    "wrap",
]

STABLE_RATIO = 1.5
STABLE_SLACK = 0.1  # job lengths

# Figures summarised per load and mode (median, min, max over the seeds).
FIGURES = (
    "offered_pct",
    "started",
    "never_started",
    "busy_gpu_pct",
    "useful_gpu_pct",
    "partial_gpu_pct",
    "mean_wait",
    "p95_wait",
    "p95_wait_half",
    "mean_wait_gang",
    "p95_wait_gang",
    "mean_wait_single",
    "p95_wait_single",
    "pods_moved",
    "jobs_moved",
    "lost_gpu_hours",
    "lost_pct",
    "rooms_made",
    "rooms_reached",
    "rooms_taken",
    "rooms_unused",
)
WIDTH = 100


def stable(r: DetailedResult) -> bool:
    """The run's p95 wait did not grow with its length (see the module doc)."""
    if r.p95_wait_half is None:
        return True
    return r.p95_wait <= STABLE_RATIO * r.p95_wait_half + STABLE_SLACK


def _figure(r: DetailedResult, name: str, job_hours: float) -> float | None:
    if name == "lost_gpu_hours":
        return r.lost_gpu * job_hours
    v = getattr(r, name)
    return None if v is None else float(v)


def summarize(results: Sequence[DetailedResult], job_hours: float) -> list[dict[str, Any]]:
    """Per (load, mode): each figure's median, min and max over the seeds (None when no
    seed had such jobs), the seeds' own values, how many seeds kept a stable queue, and
    the refusals summed."""
    groups: dict[tuple[int, str], list[DetailedResult]] = {}
    for r in results:
        groups.setdefault((r.load_pct, r.label), []).append(r)
    out = []
    for (load, label), rs in groups.items():
        row: dict[str, Any] = {"load_pct": load, "mode": label, "seeds": [r.seed for r in rs]}
        for f in FIGURES:
            vals = [_figure(r, f, job_hours) for r in rs]
            xs = [v for v in vals if v is not None]
            row[f] = (
                {
                    "median": round(statistics.median(xs), 3),
                    "min": round(min(xs), 3),
                    "max": round(max(xs), 3),
                    "per_seed": [None if v is None else round(v, 3) for v in vals],
                }
                if xs
                else None
            )
        row["stable_seeds"] = sum(1 for r in rs if stable(r))
        refusals: Counter[str] = Counter()
        for r in rs:
            refusals.update(r.refusals)
        row["refusals"] = dict(refusals.most_common())
        out.append(row)
    return out


def _cell(fig: dict[str, float] | None, fmt: str) -> str:
    if fig is None:
        return "-"
    if fig["min"] == fig["max"]:
        return f"{fig['median']:{fmt}}"
    return f"{fig['median']:{fmt}} [{fig['min']:{fmt}}-{fig['max']:{fmt}}]"


# (heading, figure, format); each block is one table per load.
_BLOCKS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "GPUs",
        (
            ("busy %", "busy_gpu_pct", ".1f"),
            ("useful %", "useful_gpu_pct", ".1f"),
            ("lost GPU-h", "lost_gpu_hours", ".0f"),
            ("lost %", "lost_pct", ".2f"),
        ),
    ),
    (
        "waits, all jobs",
        (
            ("mean wait", "mean_wait", ".2f"),
            ("p95 wait", "p95_wait", ".2f"),
            ("p95, half run", "p95_wait_half", ".2f"),
            ("never started", "never_started", ".0f"),
        ),
    ),
    (
        "waits by kind",
        (
            ("gangs mean", "mean_wait_gang", ".2f"),
            ("gangs p95", "p95_wait_gang", ".2f"),
            ("single mean", "mean_wait_single", ".2f"),
            ("single p95", "p95_wait_single", ".2f"),
        ),
    ),
)


def _table(rows: Sequence[dict[str, Any]], cols: Sequence[tuple[str, str, str]]) -> list[str]:
    width = max(len("mode"), *(len(r["mode"]) for r in rows))
    cells = [[_cell(r[key], fmt) for _, key, fmt in cols] for r in rows]
    w = [max(len(c[0]), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    head = f"{'mode':<{width}}" + "".join(f"  {c[0]:>{w[i]}}" for i, c in enumerate(cols))
    out = [head, "-" * len(head)]
    for r, row in zip(rows, cells, strict=True):
        out.append(f"{r['mode']:<{width}}" + "".join(f"  {x:>{w[i]}}" for i, x in enumerate(row)))
    return out


def render(summary: Sequence[dict[str, Any]], gpus: int, top: int = 4) -> str:
    """The study's text: per load the offered load, then GPUs, waits and moves, one row
    per mode; the seeds' own figures; the rooms corral made; why gangs got none."""
    lines = [
        "medians over the seeds [min-max]; waits in mean job lengths, counting jobs never started",
        "(as waiting till the end); lost %: of the GPU-hours running jobs used",
    ]
    loads = sorted({r["load_pct"] for r in summary})
    for load in loads:
        rows = [x for x in summary if x["load_pct"] == load]
        off = rows[0]["offered_pct"]
        head = (
            f"== load {load}%: offered {_cell(off, '.1f')}% of the {gpus} GPUs the mix can "
            f"use, {_cell(rows[0]['started'], '.0f')} jobs started"
        )
        lines += ["", *wrap(head)]
        for title, cols in _BLOCKS:
            lines += ["", f"{title}:", *_table(rows, cols)]
        moves = [
            ("pods moved", "pods_moved", ".0f"),
            ("jobs moved", "jobs_moved", ".0f"),
            ("rooms made", "rooms_made", ".0f"),
            ("reached", "rooms_reached", ".0f"),
            ("taken", "rooms_taken", ".0f"),
        ]
        lines += ["", "moves:", *_table(rows, moves)]
        stab = ", ".join(f"{r['mode']} {r['stable_seeds']}/{len(r['seeds'])}" for r in rows)
        lines += wrap(f"queue stable (p95 not growing with the run's length), seeds: {stab}", WIDTH)
    lines += _per_seed(summary)
    refused = [r for r in summary if r["refusals"]]
    if refused:
        lines += ["", "why waiting gangs got no room (planner rounds x gangs, summed over seeds)"]
        for r in refused:
            total = sum(r["refusals"].values())
            lines.append(f"  load {r['load_pct']}% {r['mode']}: {total}")
            for why, n in list(r["refusals"].items())[:top]:
                text = f"    {n:>7}  {why}"
                lines.append(text if len(text) <= WIDTH else text[: WIDTH - 3] + "...")
    return "\n".join(lines)


def _per_seed(summary: Sequence[dict[str, Any]]) -> list[str]:
    seeds = summary[0]["seeds"] if summary else []
    label = max(len(f"{r['load_pct']}% {r['mode']}") for r in summary) if summary else 0
    out: list[str] = []
    for title, key, fmt in (
        ("p95 wait, all jobs", "p95_wait", ".2f"),
        ("p95 wait, gangs", "p95_wait_gang", ".2f"),
        ("busy GPU %", "busy_gpu_pct", ".1f"),
        ("lost %", "lost_pct", ".2f"),
    ):
        out += ["", f"per seed -- {title}:"]
        out.append(" " * (label + 2) + "".join(f"{s:>7}" for s in seeds))
        for r in summary:
            fig = r[key]
            vals = fig["per_seed"] if fig is not None else [None] * len(r["seeds"])
            cells = "".join(f"{'-' if v is None else format(v, fmt):>7}" for v in vals)
            out.append(f"  {str(r['load_pct']) + '% ' + r['mode']:<{label}}{cells}")
    return out


def wrap(text: str, width: int = WIDTH) -> list[str]:
    """``text`` in lines of at most ``width`` (longer words stay whole), the rest indented."""
    out: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = "  " + word
        else:
            line = f"{line} {word}" if line else word
    if line:
        out.append(line)
    return out
