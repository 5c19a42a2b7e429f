"""Trace replay benchmark: policy x pod list, median unallocated GPU over seeds.

Replays the Alibaba v2023 pod lists as the FGD paper does (seeds 42..51, 130% of GPU
capacity arrived, shuffled, no departures) with each policy and prints the median
unallocated GPU % at the end, the paper's published medians beside them where it has
them, and the seconds per run of each policy. ``--json`` prints one JSON object with
the same figures (and every run). Runs spread over ``--workers`` processes.

    .venv/bin/python -m bench.trace                       # the whole grid
    .venv/bin/python -m bench.trace --policies fgd,corral --traces default,cpu200
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from gangplace.engine.policies import PAPER_POLICIES, POLICIES
from gangplace.sim.trace_csv import GPU_NODE_FILE, load_pods, pod_list_path, trace_names
from gangplace.sim.trace_run import run_trace

from bench._common import die, parse_seeds, run_all, trace_folder

# The paper's medians (unallocated GPU %, 10 seeds, 130% arrived).
PAPER = {
    ("random", "default"): 12.62,
    ("dotprod", "default"): 9.20,
    ("gpuclustering", "default"): 8.21,
    ("gpupacking", "default"): 7.94,
    ("bestfit", "default"): 6.89,
    ("fgd", "default"): 4.60,
    ("gpupacking", "cpu200"): 9.62,
    ("fgd", "cpu200"): 4.92,
}

_PODS: dict[str, Any] = {}


def _one(trace_dir: str, trace: str, policy: str, seed: int, inflate: float) -> dict[str, Any]:
    d = Path(trace_dir)
    if trace not in _PODS:
        _PODS[trace] = load_pods(pod_list_path(trace, d))
    res = run_trace(d / GPU_NODE_FILE, _PODS[trace], policy, seed, inflate)
    return {
        "policy": policy,
        "trace": trace,
        "seed": seed,
        "unallocated_gpu_pct": res.final.unallocated_gpu_pct,
        "fragmented_gpu_pct": res.final.fragmented_gpu_pct,
        "pods_unallocated": res.pods_unallocated,
        "seconds": res.seconds,
    }


def _csv(text: str, allowed: list[str] | None, flag: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if allowed is not None:
        bad = [x for x in items if x not in allowed]
        if bad:
            die(f"{flag}: unknown {', '.join(bad)}; choose from {', '.join(allowed)}")
    if not items:
        die(f"{flag}: empty")
    return items


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--trace-dir", help="folder of the trace CSVs (default: found upward)")
    ap.add_argument(
        "--policies", default=",".join([*PAPER_POLICIES, "corral"]), help="comma-separated"
    )
    ap.add_argument("--traces", default="all", help="comma-separated pod lists, or all")
    ap.add_argument("--seeds", default="42-51", help="e.g. 42-51 or 42,43")
    ap.add_argument("--inflate", type=float, default=1.3)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="processes")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    ap.add_argument("--json-out", help="also write the JSON object to this file")
    args = ap.parse_args(argv)

    trace_dir = trace_folder(args.trace_dir, Path(__file__).parent)
    names = trace_names(trace_dir)
    traces = names if args.traces == "all" else _csv(args.traces, names, "--traces")
    if "default" in traces:  # the paper's headline trace first
        traces = ["default", *[t for t in traces if t != "default"]]
    policies = _csv(args.policies, list(POLICIES), "--policies")
    seeds = parse_seeds(args.seeds)
    if args.workers < 1:
        die("--workers must be >= 1")

    jobs = [
        (str(trace_dir), t, p, s, args.inflate) for t in traces for p in policies for s in seeds
    ]
    tty = sys.stderr.isatty() and not args.json
    start = time.perf_counter()
    runs: list[dict[str, Any]] = run_all(_one, jobs, args.workers, progress=tty)
    wall = time.perf_counter() - start

    def cell(p: str, t: str) -> list[float]:
        return [r["unallocated_gpu_pct"] for r in runs if r["policy"] == p and r["trace"] == t]

    medians = {p: {t: round(statistics.median(cell(p, t)), 2) for t in traces} for p in policies}
    ranges = {p: {t: [min(cell(p, t)), max(cell(p, t))] for t in traces} for p in policies}
    secs = {
        p: round(statistics.mean(r["seconds"] for r in runs if r["policy"] == p), 2)
        for p in policies
    }
    doc = {
        "metric": "unallocated GPU % at the end (130% arrived), median over seeds",
        "seeds": seeds,
        "medians": medians,
        "ranges": ranges,
        "paper": {f"{p}/{t}": v for (p, t), v in PAPER.items()},
        "seconds_per_run": secs,
        "runs": len(runs),
        "wall_seconds": round(wall, 1),
        "workers": args.workers,
        "all_runs": sorted(runs, key=lambda r: (r["trace"], r["policy"], r["seed"])),
    }
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(doc))
    if args.json:
        print(json.dumps(doc))
        return 0
    print(
        f"Unallocated GPU % at {round(args.inflate * 100)}% arrived, median of "
        f"{len(seeds)} seeds ({seeds[0]}..{seeds[-1]}); paper's figure in brackets"
    )
    width = max(len(t) for t in traces) + 2
    print(f"{'trace':<{width}}" + "".join(f"{p:>16}" for p in policies))
    for t in traces:
        row = f"{t:<{width}}"
        for p in policies:
            ref = PAPER.get((p, t))
            txt = f"{medians[p][t]:.2f}" + (f" [{ref:.2f}]" if ref is not None else "")
            row += f"{txt:>16}"
        print(row)
    if "fgd" in policies and "corral" in policies:
        better = sum(medians["corral"][t] < medians["fgd"][t] for t in traces)
        print(f"corral below fgd on {better}/{len(traces)} pod lists")
    print()
    print("seconds per run: " + ", ".join(f"{p} {s:.1f}" for p, s in secs.items()))
    print(f"{len(runs)} runs in {wall:.0f} s wall on {args.workers} workers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
