"""Defragmentation by moving pods, on the FGD paper's trace replay: policy x {no moves,
with moves}.

Each run replays the Alibaba v2023 default pod list as ``gangplace simulate`` does
(seeds 42..51, arrivals in the paper's order until 130% of GPU capacity, a pod that
fits nowhere stays unallocated, none leaves); "with moves" is
``corral-descheduler simulate``: the same replay with the descheduler's planner run at
the chosen points (default every 10% of capacity arrived), at most ``--max-moves``
pods moved per round, each moved pod placed again by the replay's policy (the planner
proves it fits) and failed pods never retried. Printed: the median unallocated GPU %
over the seeds (min-max), the pods moved as % of the arrivals, and seconds per run;
then every seed. ``--repack`` adds, for each no-moves run, what re-laying out every
GPU-sharing pod of the final cluster by best-fit-decreasing would leave idle (CPU and
memory ignored: an optimistic figure for migration, not a bound) and the idle GPU on
GPUs that hold one 810-milli pod alone (only a pod of 190 milli or less can use it).
Runs spread over ``--workers`` processes.

    .venv/bin/python -m bench.defrag_planner                     # fgd and corral, 10 seeds
    .venv/bin/python -m bench.defrag_planner --seeds 42 --policies corral --json
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

import numpy as np
from gangplace.engine.policies import POLICIES
from gangplace.sim.relayout_heuristic import lone_share_idle_pct, relayout_idle_pct
from gangplace.sim.trace_csv import GPU_NODE_FILE, load_pods, pod_list_path
from gangplace.sim.trace_run import prepare_trace

from bench._common import die, parse_seeds, run_all, trace_folder
from descheduler.config import DeschedulerConfig
from descheduler.replay_with_moves import replay_with_moves
from descheduler.replay_with_moves_command import trace_config

_PODS: dict[str, Any] = {}


def _one(job: dict[str, Any]) -> dict[str, Any]:
    d = Path(job["trace_dir"])
    trace = job["trace"]
    if trace not in _PODS:
        _PODS[trace] = load_pods(pod_list_path(trace, d))
    pods = _PODS[trace]
    nodes = d / GPU_NODE_FILE
    out: dict[str, Any] = {"policy": job["policy"], "seed": job["seed"], "moves": job["moves"]}
    if job["moves"]:
        cfg = trace_config(DeschedulerConfig(), job["max_moves"], job["min_gain"])
        res, hook = replay_with_moves(
            nodes, pods, job["policy"], job["seed"], job["inflate"], cfg, job["pcts"]
        )
        out.update(
            pods_moved=hook.pods_moved,
            pods_moved_pct=100.0 * hook.pods_moved / res.pods,
            rounds=len(hook.rounds),
            max_round=max((r.pods_moved for r in hook.rounds), default=0),
            plan_seconds=hook.plan_seconds,
        )
    else:
        run = prepare_trace(nodes, pods, job["policy"], job["seed"], job["inflate"])
        t = time.perf_counter()
        res = run.replay()
        res.seconds = time.perf_counter() - t
        out.update(pods_moved=0, pods_moved_pct=0.0, rounds=0, max_round=0, plan_seconds=0.0)
        if job["repack"]:
            out.update(
                repacked_unallocated_gpu_pct=relayout_idle_pct(run.snap),
                idle_on_lone_810m_gpus_pct=lone_share_idle_pct(run.snap, 810),
            )
    out.update(
        unallocated_gpu_pct=res.final.unallocated_gpu_pct,
        pods_unallocated=res.pods_unallocated,
        pods=res.pods,
        seconds=res.seconds,
    )
    return out


def _pcts(args: argparse.Namespace) -> list[float]:
    try:
        if args.plan_at:
            return sorted({float(x) for x in args.plan_at.split(",") if x.strip()})
        step = float(args.plan_every.rstrip("%"))
    except ValueError:
        die("--plan-every/--plan-at: expected percentages")
    if step <= 0:
        die(f"--plan-every {args.plan_every}: must be > 0")
    return [float(x) for x in np.arange(step, args.inflate * 100 + 1e-9, step)]


def _stats(xs: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(xs), 2), "min": min(xs), "max": max(xs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--trace-dir", help="folder of the trace CSVs (default: found upward)")
    ap.add_argument("--trace", default="default", help="pod list (default: default)")
    ap.add_argument("--policies", default="fgd,corral", help="comma-separated")
    ap.add_argument("--seeds", default="42-51", help="e.g. 42-51 or 42,43")
    ap.add_argument("--inflate", type=float, default=1.3)
    ap.add_argument("--plan-every", default="10%", help="plan every N%% of capacity arrived")
    ap.add_argument("--plan-at", help="plan at these %% of capacity arrived instead")
    ap.add_argument("--max-moves", type=int, default=50, help="pods moved per round at most")
    ap.add_argument("--min-gain", type=float, default=0.01, help="GPUs a move must gain")
    ap.add_argument("--repack", action="store_true", help="add the re-layout figures")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="processes")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    ap.add_argument("--json-out", help="also write the JSON object to this file")
    args = ap.parse_args(argv)

    trace_dir = trace_folder(args.trace_dir, Path(__file__).parent)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    bad = [p for p in policies if p not in POLICIES]
    if bad or not policies:
        die(f"--policies: unknown {', '.join(bad) or '(none)'}; choose from {', '.join(POLICIES)}")
    if args.workers < 1:
        die("--workers must be >= 1")
    if args.max_moves < 0:
        die("--max-moves must be >= 0")
    seeds = parse_seeds(args.seeds)
    pcts = _pcts(args)
    jobs = [
        {
            "trace_dir": str(trace_dir),
            "trace": args.trace,
            "policy": p,
            "seed": s,
            "moves": m,
            "inflate": args.inflate,
            "max_moves": args.max_moves,
            "min_gain": args.min_gain,
            "pcts": pcts,
            "repack": args.repack,
        }
        for p in policies
        for s in seeds
        for m in (True, False)  # the long runs first
    ]
    tty = sys.stderr.isatty() and not args.json
    start = time.perf_counter()
    runs: list[dict[str, Any]] = run_all(_one, [(j,) for j in jobs], args.workers, progress=tty)
    wall = time.perf_counter() - start
    runs.sort(key=lambda r: (r["policy"], r["seed"], r["moves"]))

    def cell(p: str, m: bool, key: str) -> list[float]:
        return [r[key] for r in runs if r["policy"] == p and r["moves"] == m]

    table = {
        p: {
            label: {
                "unallocated_gpu_pct": _stats(cell(p, m, "unallocated_gpu_pct")),
                "pods_moved_pct": _stats(cell(p, m, "pods_moved_pct")),
                "seconds_per_run": round(statistics.mean(cell(p, m, "seconds")), 1),
            }
            for label, m in (("no_moves", False), ("with_moves", True))
        }
        for p in policies
    }
    doc = {
        "metric": "unallocated GPU % at the end (130% arrived), median over seeds [min, max]",
        "trace": args.trace,
        "seeds": seeds,
        "plan_at_pct": [round(x, 2) for x in pcts],
        "max_moves": args.max_moves,
        "min_gain_gpus": args.min_gain,
        "table": table,
        "runs": runs,
        "wall_seconds": round(wall, 1),
        "workers": args.workers,
    }
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(doc))
    if args.json:
        print(json.dumps(doc))
        return 0
    print(render(doc, policies, seeds))
    return 0


def render(doc: dict[str, Any], policies: list[str], seeds: list[int]) -> str:
    lines = [
        f"Trace {doc['trace']}, {len(seeds)} seeds ({seeds[0]}..{seeds[-1]}), 130% arrived; "
        f"planner at {len(doc['plan_at_pct'])} points, at most {doc['max_moves']} pods a round, "
        f"min gain {doc['min_gain_gpus']:g} GPU a move",
        f"{'policy':<10}{'moves':<12}{'unallocated % median [min-max]':>32}"
        f"{'pods moved % median [max]':>28}{'s/run':>8}",
    ]
    for p in policies:
        for label in ("no_moves", "with_moves"):
            c = doc["table"][p][label]
            u, m = c["unallocated_gpu_pct"], c["pods_moved_pct"]
            lines.append(
                f"{p:<10}{label.replace('_', ' '):<12}"
                f"{u['median']:>14.2f} [{u['min']:.2f}-{u['max']:.2f}]{'':>6}"
                f"{m['median']:>16.2f} [{m['max']:.2f}]{'':>3}{c['seconds_per_run']:>8.1f}"
            )
    lines.append("")
    extra = any("repacked_unallocated_gpu_pct" in r for r in doc["runs"])
    head = f"{'policy':<10}{'seed':>6}{'no moves %':>12}{'with moves %':>14}{'moved %':>9}"
    head += f"{'max/round':>10}{'s no/with':>12}"
    if extra:
        head += f"{'re-laid out %':>15}{'lone 810m %':>15}"
    lines.append(head)
    for p in policies:
        for s in seeds:
            no = next(
                r for r in doc["runs"] if r["policy"] == p and r["seed"] == s and not r["moves"]
            )
            w = next(r for r in doc["runs"] if r["policy"] == p and r["seed"] == s and r["moves"])
            row = (
                f"{p:<10}{s:>6}{no['unallocated_gpu_pct']:>12.2f}{w['unallocated_gpu_pct']:>14.2f}"
                f"{w['pods_moved_pct']:>9.2f}{w['max_round']:>10}"
                f"{no['seconds']:>6.1f}/{w['seconds']:<5.1f}"
            )
            if extra:
                row += (
                    f"{no['repacked_unallocated_gpu_pct']:>15.2f}"
                    f"{no['idle_on_lone_810m_gpus_pct']:>15.2f}"
                )
            lines.append(row)
    lines.append(
        f"{len(doc['runs'])} runs in {doc['wall_seconds']:.0f} s wall on {doc['workers']} workers"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
