"""How close moves get to the limit of defragmentation, on the FGD paper's trace replay.

For each trace and seed (arrivals in the paper's order until 130% of GPU capacity, a
pod that fits nowhere stays unallocated, none leaves), one run of each:

* each base policy (``--policies``, default fgd and corral) with no moves, and with
  *moves on failure* at each budget (``--budgets``, pods moved as % of the arrivals):
  an arrival that fits nowhere gets the fewest moves found that let it fit (at most
  ``--per-arrival``), while the budget lasts (a budget above one that never cut a search
  short gives the same run, so it is not run again). ``--methods`` says how the moves are found:
  ``both`` (the default: the engine's search, then the exact model when it finds
  nothing), ``exact`` (the fewest moves on neighbourhoods of 2 to 16 nodes, solved
  exactly) or ``search`` (the engine's search alone: evictions on the nodes nearest to
  fitting, one level of re-placement); several, comma-separated, are run side by side;
* the oracle (``gangplace limit``, on the corral base): every arrival that any
  rearrangement of the placed pods fits is placed, each check ending placed, proved
  infeasible or timed out (``--time-limit`` seconds; counted, the arrival left unplaced);
* the offline reference: the LP bound on the GPU any subset of the arrivals could use,
  and the relayout heuristic (best-fit decreasing of the shares) on the corral run's
  final cluster.

Printed per trace: unallocated GPU % at the end, median over the seeds [min-max], and
the pods moved as % of the arrivals; the gap from corral with moves to the oracle; and
the wall time. ``--png`` writes unallocated GPU against pods moved (one panel per
trace), ``--json`` prints one object instead.

    .venv/bin/python -m bench.defrag_replay                      # 3 traces x seeds 42-44
    .venv/bin/python -m bench.defrag_replay --traces default --seeds 42 --json
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

from gangplace.engine.policies import POLICIES
from gangplace.mover.hood_moves import DEFAULT_NODE_LIMIT
from gangplace.sim.limit import MOVE_METHODS, MovesHook
from gangplace.sim.limit_run import run_limit
from gangplace.sim.relayout_heuristic import relayout_idle_pct
from gangplace.sim.solver_output import solver_prints_to_stderr
from gangplace.sim.trace_csv import GPU_NODE_FILE, load_pods, pod_list_path
from gangplace.sim.trace_run import prepare_trace

from bench._common import die, parse_seeds, run_all, trace_folder

_PODS: dict[str, Any] = {}


def _pods(job: dict[str, Any]) -> Any:
    key = job["trace"]
    if key not in _PODS:
        _PODS[key] = load_pods(pod_list_path(key, Path(job["trace_dir"])))
    return _PODS[key]


def _prepare(job: dict[str, Any], policy: str) -> Any:
    nodes = Path(job["trace_dir"]) / GPU_NODE_FILE
    return prepare_trace(nodes, _pods(job), policy, job["seed"], job["inflate"])


def _base(job: dict[str, Any]) -> list[dict[str, Any]]:
    """No moves, then the budgets from the smallest; stops at the first budget that never
    cut a search short (the larger ones would replay the same)."""
    out: list[dict[str, Any]] = []
    run = _prepare(job, job["policy"])
    res = run.replay()
    row = {"unallocated_gpu_pct": res.final.unallocated_gpu_pct, "pods": res.pods}
    out.append(
        {
            **row,
            "budget_pct": 0.0,
            "pods_moved_pct": 0.0,
            "seconds": res.seconds,
            "relayout_unallocated_gpu_pct": relayout_idle_pct(run.snap),
        }
    )
    for b in job["budgets"]:
        run = _prepare(job, job["policy"])
        budget = int(b / 100.0 * len(run.arrivals.pods))
        hook = MovesHook(
            budget,
            per_arrival=job["per_arrival"],
            retry_after=job["retry_after"],
            method=job["method"],
            node_limit=job["moves_node_limit"],
        )
        res = run.replay(hook=hook)
        out.append(
            {
                "budget_pct": b,
                "unallocated_gpu_pct": res.final.unallocated_gpu_pct,
                "pods": res.pods,
                "pods_moved": hook.pods_moved,
                "pods_moved_pct": 100.0 * hook.pods_moved / res.pods,
                "rescued": hook.rescued,
                "rescued_by": dict(hook.rescued_by),
                "exact_solves": hook.hood.solves,
                "exact_timeouts": hook.hood.timeouts,
                "moves_seconds": round(hook.seconds, 1),
                "seconds": res.seconds,
            }
        )
        if not hook.budget_bound:
            for rest in job["budgets"][job["budgets"].index(b) + 1 :]:
                out.append({**out[-1], "budget_pct": rest, "same_as_pct": b, "seconds": 0.0})
            break
    return out


def _one(job: dict[str, Any]) -> dict[str, Any]:
    head = {"trace": job["trace"], "seed": job["seed"], "kind": job["kind"]}
    if job["kind"] == "oracle":
        run = _prepare(job, "corral")
        lim = run_limit(
            run,
            time_limit=job["time_limit"],
            neighbourhoods=tuple(job["neighbourhoods"]),
            offline_time_limit=60.0,
            relaxed=job["relaxed"],
            retry_after=job["retry_after"],
        )
        return {**head, "policy": "corral", **lim.to_dict()}
    return {**head, "policy": job["policy"], "method": job["method"], "ladder": _base(job)}


def _stats(xs: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(xs), 2), "min": min(xs), "max": max(xs)}


def series(policy: str, method: str, methods: list[str]) -> str:
    """A ladder's name in the table: the policy, with the method when several ran (the
    first method's ladder is also under the policy's name alone)."""
    return policy if len(methods) == 1 else f"{policy}/{method}"


def summarise(
    runs: list[dict[str, Any]],
    traces: list[str],
    policies: list[str],
    budgets: list[float],
    methods: list[str],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in traces:
        cell: dict[str, Any] = {}
        for p in policies:
            for m in methods:
                ladders = [
                    r["ladder"]
                    for r in runs
                    if r["trace"] == t
                    and r.get("policy") == p
                    and r.get("method") == m
                    and r["kind"] == "base"
                ]
                rows = []
                for i, b in enumerate([0.0, *budgets]):
                    pts = [lad[i] for lad in ladders]
                    rows.append(
                        {
                            "budget_pct": b,
                            "unallocated_gpu_pct": _stats([x["unallocated_gpu_pct"] for x in pts]),
                            "pods_moved_pct": _stats([round(x["pods_moved_pct"], 3) for x in pts]),
                            "seconds": _stats([round(x["seconds"], 1) for x in pts]),
                        }
                    )
                cell[series(p, m, methods)] = rows
                if m == methods[0]:
                    cell[p] = rows
                    relay = [lad[0]["relayout_unallocated_gpu_pct"] for lad in ladders]
                    cell[f"{p}_relayout_unallocated_gpu_pct"] = _stats(relay)
        orc = [r for r in runs if r["trace"] == t and r["kind"] == "oracle"]
        if orc:
            cell["oracle"] = {
                "unallocated_gpu_pct": _stats([r["oracle_unallocated_gpu_pct"] for r in orc]),
                "checks": [r["checks"]["checks"] for r in orc],
                "placed": [r["checks"]["placed"] for r in orc],
                "proved_infeasible": [r["checks"]["proved_infeasible"] for r in orc],
                "timeouts": [r["checks"]["timeouts"] for r in orc],
                "timed_out_gpu_pct": [r["timed_out_gpu_pct"] for r in orc],
                "pods_moved": [r["checks"]["pods_moved"] for r in orc],
                "seconds": [r["seconds"] for r in orc],
                "offline_lp_unallocated_gpu_pct": _stats(
                    [r["offline"]["lp_unallocated_gpu_pct"] for r in orc]
                ),
            }
            if all("relaxed_greedy" in r for r in orc):
                cell["oracle"]["relaxed_greedy_unallocated_gpu_pct"] = _stats(
                    [r["relaxed_greedy"]["unallocated_gpu_pct"] for r in orc]
                )
            if "corral" in cell:
                o = cell["oracle"]["unallocated_gpu_pct"]["median"]
                cell["gap_to_oracle_points"] = {
                    str(row["budget_pct"]): round(row["unallocated_gpu_pct"]["median"] - o, 2)
                    for row in cell["corral"]
                }
        out[t] = cell
    return out


def render(doc: dict[str, Any]) -> str:
    lines = []
    for t, cell in doc["table"].items():
        lines.append(
            f"Trace {t}, seeds {','.join(map(str, doc['seeds']))}, 130% arrived: unallocated GPU "
            "% median [min-max]; pods moved % of arrivals (median)"
        )
        methods = doc["methods"]
        for p in doc["policies"]:
            for meth in methods:
                name = series(p, meth, methods)
                for row in cell[name]:
                    if row["budget_pct"] == 0 and meth != methods[0]:
                        continue  # no moves: the same run whatever the method
                    u, m = row["unallocated_gpu_pct"], row["pods_moved_pct"]
                    label = (
                        "no moves" if row["budget_pct"] == 0 else f"moves <= {row['budget_pct']}%"
                    )
                    if row["budget_pct"] and len(methods) > 1:
                        label += f" {meth}"
                    lines.append(
                        f"  {p:<8}{label:<24}{u['median']:>7.2f} [{u['min']:.2f}-{u['max']:.2f}]"
                        f"   moved {m['median']:.2f}%   {row['seconds']['median']:.0f} s"
                    )
        if "oracle" in cell:
            o = cell["oracle"]
            u = o["unallocated_gpu_pct"]
            lines.append(
                f"  {'oracle':<24}{u['median']:>7.2f} [{u['min']:.2f}-{u['max']:.2f}]   "
                f"checks {o['checks']}: placed {o['placed']}, proved infeasible "
                f"{o['proved_infeasible']}, timed out {o['timeouts']} (left unplaced: "
                f"{o['timed_out_gpu_pct']} % of GPUs); s {[round(x) for x in o['seconds']]}"
            )
            if "relaxed_greedy_unallocated_gpu_pct" in o:
                g = o["relaxed_greedy_unallocated_gpu_pct"]
                lines.append(
                    f"  {'greedy, LP fit test':<24}{g['median']:>7.2f} "
                    f"[{g['min']:.2f}-{g['max']:.2f}]   (a reference: the LP admits more than "
                    "packs)"
                )
            off = o["offline_lp_unallocated_gpu_pct"]
            lines.append(
                f"  {'offline LP bound':<24}{off['median']:>7.2f} "
                f"[{off['min']:.2f}-{off['max']:.2f}]   (any subset of the arrivals; below every "
                "policy)"
            )
        for p in doc["policies"]:
            r = cell[f"{p}_relayout_unallocated_gpu_pct"]
            lines.append(
                f"  {'relayout of ' + p:<24}{r['median']:>7.2f} [{r['min']:.2f}-{r['max']:.2f}]"
                "   (heuristic on the no-moves final cluster; CPU ignored)"
            )
        if "gap_to_oracle_points" in cell:
            gaps = ", ".join(f"{b}%: {g:+.2f}" for b, g in cell["gap_to_oracle_points"].items())
            lines.append(f"  corral minus oracle, points, by budget: {gaps}")
        lines.append("")
    lines.append(
        f"{doc['n_runs']} jobs in {doc['wall_seconds']:.0f} s wall on {doc['workers']} workers"
    )
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: Path) -> None:
    """Unallocated GPU against pods moved, a panel per trace."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        die("--png needs matplotlib: pip install -c constraints.txt -e '.[plot]'")
    traces = list(doc["table"])
    fig, axes = plt.subplots(1, len(traces), figsize=(5.5 * len(traces), 4.2), squeeze=False)
    for ax, t in zip(axes[0], traces, strict=True):
        cell = doc["table"][t]
        for p in doc["policies"]:
            for meth in doc["methods"]:
                name = series(p, meth, doc["methods"])
                xs = [r["pods_moved_pct"]["median"] for r in cell[name]]
                ys = [r["unallocated_gpu_pct"]["median"] for r in cell[name]]
                ax.plot(xs, ys, marker="o", label=f"{p} + moves on failure ({meth})")
        if "oracle" in cell:
            ax.axhline(
                cell["oracle"]["unallocated_gpu_pct"]["median"],
                color="k",
                ls="--",
                label="oracle (any rearrangement)",
            )
            if "relaxed_greedy_unallocated_gpu_pct" in cell["oracle"]:
                ax.axhline(
                    cell["oracle"]["relaxed_greedy_unallocated_gpu_pct"]["median"],
                    color="tab:red",
                    ls="-.",
                    label="greedy with the LP as fit test",
                )
            ax.axhline(
                cell["oracle"]["offline_lp_unallocated_gpu_pct"]["median"],
                color="grey",
                ls=":",
                label="offline LP bound",
            )
        ax.set_title(f"{t}: median of {len(doc['seeds'])} seeds, 130% arrived")
        ax.set_xlabel("pods moved, % of arrivals")
        ax.set_ylabel("unallocated GPU, % of capacity")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--trace-dir", help="folder of the trace CSVs (default: found upward)")
    ap.add_argument("--traces", default="default,cpu250,gpushare60", help="pod lists")
    ap.add_argument("--policies", default="fgd,corral", help="base policies, comma-separated")
    ap.add_argument("--seeds", default="42-44", help="e.g. 42-44 or 42,43")
    ap.add_argument("--budgets", default="0.5,1,2,5", help="pods moved, %% of arrivals")
    ap.add_argument("--inflate", type=float, default=1.3)
    ap.add_argument(
        "--time-limit", type=float, default=10.0, help="seconds per oracle check (default 10)"
    )
    ap.add_argument(
        "--neighbourhoods",
        default="",
        help="node-set sizes the oracle's assignment model tries before the cluster (e.g. "
        "16,64; default none)",
    )
    ap.add_argument(
        "--relaxed", action="store_true", help="also the greedy with the LP as fit test (slow)"
    )
    ap.add_argument(
        "--retry-after",
        type=int,
        default=25,
        help="after a failed search, pods placed before a shape needing as much is searched "
        "again (oracle and moves alike; default 25)",
    )
    ap.add_argument(
        "--methods",
        default="both",
        help="how moves on failure are found: both (the search, then the exact model), "
        "exact or search; several, comma-separated, run side by side (default both)",
    )
    ap.add_argument(
        "--per-arrival",
        type=int,
        default=8,
        help="pods moved at most for one failed arrival (default 8)",
    )
    ap.add_argument(
        "--moves-node-limit",
        type=int,
        default=DEFAULT_NODE_LIMIT,
        help="branch-and-bound nodes the exact model gets per neighbourhood "
        f"(default {DEFAULT_NODE_LIMIT}; a limit of work, so runs repeat exactly)",
    )
    ap.add_argument("--no-oracle", action="store_true", help="skip the oracle and offline bound")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="processes")
    ap.add_argument("--png", help="write the curve to this PNG file")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    ap.add_argument("--json-out", help="also write the JSON object to this file")
    args = ap.parse_args(argv)

    trace_dir = trace_folder(args.trace_dir, Path(__file__).parent)
    traces = [t.strip() for t in args.traces.split(",") if t.strip()]
    for t in traces:
        if not pod_list_path(t, trace_dir).is_file():
            die(f"--traces: no pod list {t!r} in {trace_dir}")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    bad = [p for p in policies if p not in POLICIES]
    if bad or not policies:
        die(f"--policies: unknown {', '.join(bad) or '(none)'}; choose from {', '.join(POLICIES)}")
    try:
        budgets = sorted({float(x) for x in args.budgets.split(",") if x.strip()})
    except ValueError:
        die(f"--budgets {args.budgets!r}: expected percentages")
    if any(b <= 0 or b > 100 for b in budgets):
        die("--budgets: each must be in (0, 100]")
    if args.workers < 1:
        die("--workers must be >= 1")
    if args.time_limit <= 0:
        die("--time-limit must be > 0")
    if args.retry_after < 1:
        die("--retry-after must be >= 1")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in MOVE_METHODS]
    if bad or not methods:
        die(
            f"--methods: unknown {', '.join(bad) or '(none)'}; choose from "
            f"{', '.join(MOVE_METHODS)}"
        )
    if args.per_arrival < 1:
        die("--per-arrival must be >= 1")
    if args.moves_node_limit < 1:
        die(f"--moves-node-limit {args.moves_node_limit}: must be >= 1")
    seeds = parse_seeds(args.seeds)
    try:
        hoods = [int(k) for k in args.neighbourhoods.split(",") if k.strip()]
    except ValueError:
        die(f"--neighbourhoods {args.neighbourhoods!r}: expected sizes like 16,64")
    common = {
        "trace_dir": str(trace_dir),
        "inflate": args.inflate,
        "budgets": budgets,
        "time_limit": args.time_limit,
        "retry_after": args.retry_after,
        "relaxed": args.relaxed,
        "neighbourhoods": hoods,
        "per_arrival": args.per_arrival,
        "moves_node_limit": args.moves_node_limit,
    }
    jobs = []
    for t in traces:
        for s in seeds:
            if not args.no_oracle:
                jobs.append({**common, "trace": t, "seed": s, "kind": "oracle"})
            jobs += [
                {**common, "trace": t, "seed": s, "kind": "base", "policy": p, "method": m}
                for p in policies
                for m in methods
            ]
    tty = sys.stderr.isatty() and not args.json
    start = time.perf_counter()
    with solver_prints_to_stderr():
        runs: list[dict[str, Any]] = run_all(_one, [(j,) for j in jobs], args.workers, progress=tty)
    wall = time.perf_counter() - start
    runs.sort(
        key=lambda r: (r["trace"], r["kind"], r.get("policy", ""), r.get("method", ""), r["seed"])
    )
    doc = {
        "metric": "unallocated GPU % at the end (130% arrived), median over seeds [min, max]",
        "timed_out_oracle_checks": "counted, and the arrival left unplaced",
        "traces": traces,
        "seeds": seeds,
        "policies": policies,
        "methods": methods,
        "per_arrival": args.per_arrival,
        "moves_node_limit": args.moves_node_limit,
        "budgets_pct": budgets,
        "table": summarise(runs, traces, policies, budgets, methods),
        "runs": runs,
        "n_runs": len(runs),
        "wall_seconds": round(wall, 1),
        "workers": args.workers,
    }
    if args.png:
        plot(doc, Path(args.png))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(doc))
    if args.json:
        print(json.dumps(doc))
        return 0
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
