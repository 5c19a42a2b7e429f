"""``corral-descheduler study``: what a descheduler buys gangs, over time.

    corral-descheduler study [--loads 70,82,90,95] [--seeds 5] [--jobs 150]
                             [--cluster-nodes 20] [--config FILE ...] [--hold-room]
                             [--job-hours 2] [--json] [--png FILE]

The gang study of ``gangplace gangstudy`` (jobs of k workers shaped like the trace's
k-GPU pods arrive, wait, run and leave), run side by side on the same arrivals in these
modes: pod by pod; all or nothing (a gang scheduler alone); all or nothing with the
kubernetes-sigs descheduler's HighNodeUtilization (pod by pod, no gangs); all or nothing
with corral's descheduler, the real planner with its default config -- and once more per
``--config`` file -- every ``runner.interval`` of simulated time. ``--hold-room`` adds
each corral mode again with the room it makes kept for its gang until it binds.

Per load and mode the table gives the median over the seeds and its range: jobs
started, busy GPU % (time-averaged; *useful* leaves out the work moves threw away),
GPUs held by partial gangs, mean and p95 wait (in mean job lengths), pods moved, and
GPU-hours of work lost to moves (and as % of the GPU-hours running jobs used); then the
rooms corral made and whether their gang got them, and why waiting gangs got none.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangplace.config_errors import ConfigError
from gangplace.engine import Snapshot
from gangplace.engine.fragmentation import TargetWorkload
from gangplace.engine.policies import POLICIES, PolicyContext, make_policy
from gangplace.sim.gang_study import (
    DeschedulerHook,
    DetailedResult,
    JobTemplate,
    jobs_from_pods,
    run_detailed,
)
from gangplace.sim.high_node_utilization import HighNodeUtilization
from gangplace.sim.replay_command import (
    CliError,
    add_common_arguments,
    guarded,
    nodes_path_arg,
    parse_job,
    progress_bar,
    trace_dir_arg,
)
from gangplace.sim.trace_csv import (
    TraceError,
    load_nodes,
    load_pods,
    pod_list_path,
)

from descheduler.config import DeschedulerConfig, load_config
from descheduler.study import CorralHook

__all__ = ["Mode", "add_study_command", "cmd_study", "render", "summarize"]

EXIT_OK = 0
POD_BY_POD, GANG, HNU, CORRAL = (
    "pod-by-pod",
    "all-or-nothing",
    "aon+HighNodeUtilization",
    "aon+corral",
)
# Figures summarised per load and mode (median, min, max over the seeds).
FIGURES = (
    "started",
    "busy_gpu_pct",
    "useful_gpu_pct",
    "partial_gpu_pct",
    "mean_wait",
    "p95_wait",
    "pods_moved",
    "lost_gpu_hours",
    "lost_pct",
    "rooms_made",
    "rooms_reached",
    "rooms_taken",
    "rooms_unused",
)


@dataclass(frozen=True, slots=True)
class Mode:
    """One column of the study: a placement mode and the descheduler beside it."""

    label: str
    placement: str  # pod-by-pod or all-or-nothing
    make_hook: Callable[[], DeschedulerHook | None]
    hold_room: bool = False


def modes(
    configs: Sequence[tuple[str, DeschedulerConfig]], job_hours: float, hold_room: bool
) -> list[Mode]:
    """Every mode of one study; HighNodeUtilization runs at the first config's interval."""
    interval = configs[0][1].runner.interval / (job_hours * 3600.0)
    out = [
        Mode(POD_BY_POD, "pod-by-pod", lambda: None),
        Mode(GANG, "all-or-nothing", lambda: None),
        Mode(HNU, "all-or-nothing", lambda: HighNodeUtilization(interval)),
    ]
    for name, cfg in configs:
        label = CORRAL if name == "default" else f"{CORRAL}({name})"

        def hook(cfg: DeschedulerConfig = cfg) -> DeschedulerHook:
            return CorralHook(cfg, job_hours)

        out.append(Mode(label, "all-or-nothing", hook))
        if hold_room:
            out.append(Mode(f"{label}+hold", "all-or-nothing", hook, hold_room=True))
    return out


def run(
    make_snapshot: Callable[[], Snapshot],
    templates: Sequence[JobTemplate],
    loads: Sequence[float],
    seeds: Sequence[int],
    study_modes: Sequence[Mode],
    *,
    policy: str = "binpack",
    jobs: int = 150,
    high_share: float = 0.0,
    checkpoint: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[DetailedResult]:
    """Every mode on every (load, seed), each on a fresh cluster; one seed gives every
    mode the same arrivals."""
    ctx = PolicyContext(TargetWorkload((), ()))
    out: list[DetailedResult] = []
    total = len(loads) * len(seeds) * len(study_modes)
    for load in loads:
        for seed in seeds:
            for m in study_modes:
                out.append(
                    run_detailed(
                        make_snapshot(),
                        templates,
                        load,
                        m.placement,
                        hook=m.make_hook(),
                        hold_room=m.hold_room,
                        checkpoint=checkpoint,
                        high_share=high_share,
                        label=m.label,
                        scorer=make_policy(policy, ctx),
                        jobs=jobs,
                        seed=seed,
                    )
                )
                if progress is not None:
                    progress(len(out), total)
    return out


def _figure(r: DetailedResult, name: str, job_hours: float) -> float:
    if name == "lost_gpu_hours":
        return r.lost_gpu * job_hours
    return float(getattr(r, name))


def summarize(results: Sequence[DetailedResult], job_hours: float) -> list[dict[str, Any]]:
    """Per (load, mode): each figure's median, min and max over the seeds, and the
    refusals summed."""
    groups: dict[tuple[int, str], list[DetailedResult]] = {}
    for r in results:
        groups.setdefault((r.load_pct, r.label), []).append(r)
    out = []
    for (load, label), rs in groups.items():
        row: dict[str, Any] = {"load_pct": load, "mode": label, "seeds": [r.seed for r in rs]}
        for f in FIGURES:
            xs = [_figure(r, f, job_hours) for r in rs]
            row[f] = {
                "median": round(statistics.median(xs), 3),
                "min": round(min(xs), 3),
                "max": round(max(xs), 3),
            }
        refusals: Counter[str] = Counter()
        for r in rs:
            refusals.update(r.refusals)
        row["refusals"] = dict(refusals.most_common())
        out.append(row)
    return out


def _cell(fig: dict[str, float], fmt: str) -> str:
    return f"{fig['median']:{fmt}} [{fig['min']:{fmt}}-{fig['max']:{fmt}}]"


def render(summary: Sequence[dict[str, Any]], top: int = 4) -> str:
    """The study's table: one block per load, one row per mode."""
    cols = (
        ("started", "started", ".0f"),
        ("busy GPU %", "busy_gpu_pct", ".1f"),
        ("useful %", "useful_gpu_pct", ".1f"),
        ("partial %", "partial_gpu_pct", ".1f"),
        ("mean wait", "mean_wait", ".2f"),
        ("p95 wait", "p95_wait", ".2f"),
        ("pods moved", "pods_moved", ".0f"),
        ("lost GPU-h", "lost_gpu_hours", ".0f"),
        ("lost %", "lost_pct", ".2f"),
    )
    width = max(len(r["mode"]) for r in summary)
    lines = [
        "medians over the seeds [min-max]; waits in mean job lengths; lost %: of the "
        "GPU-hours running jobs used"
    ]
    head = f"{'mode':<{width}}  " + "  ".join(f"{c[0]:>19}" for c in cols)
    for load in sorted({r["load_pct"] for r in summary}):
        lines += ["", f"load {load}%", head, "-" * len(head)]
        for r in (x for x in summary if x["load_pct"] == load):
            lines.append(
                f"{r['mode']:<{width}}  "
                + "  ".join(f"{_cell(r[key], fmt):>19}" for _, key, fmt in cols)
            )
    rooms = [r for r in summary if r["rooms_made"]["max"] > 0]
    if rooms:
        lines += [
            "",
            "rooms made for a waiting gang (medians): made / its gang bound / taken "
            "by another job first / unused until the next round",
        ]
        for r in rooms:
            lines.append(
                f"  load {r['load_pct']}% {r['mode']}: {r['rooms_made']['median']:.0f} / "
                f"{r['rooms_reached']['median']:.0f} / {r['rooms_taken']['median']:.0f} / "
                f"{r['rooms_unused']['median']:.0f}"
            )
    refused = [r for r in summary if r["refusals"]]
    if refused:
        lines += ["", "why waiting gangs got no room (planner rounds x gangs, summed over seeds)"]
        for r in refused:
            total = sum(r["refusals"].values())
            lines.append(f"  load {r['load_pct']}% {r['mode']}: {total}")
            for why, n in list(r["refusals"].items())[:top]:
                lines.append(f"    {n:>7}  {why}")
    return "\n".join(lines)


def write_png(summary: Sequence[dict[str, Any]], path: Path) -> None:
    """Busy GPU % and p95 wait against load, one line per mode (medians)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CliError(
            "--png needs matplotlib: pip install -c constraints.txt -e '.[plot]'"
        ) from None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels = list(dict.fromkeys(r["mode"] for r in summary))
    for label in labels:
        rows = sorted((r for r in summary if r["mode"] == label), key=lambda r: r["load_pct"])
        x = [r["load_pct"] for r in rows]
        ax1.plot(x, [r["busy_gpu_pct"]["median"] for r in rows], marker="o", label=label)
        ax2.plot(x, [r["p95_wait"]["median"] for r in rows], marker="o", label=label)
    ax1.set(xlabel="offered load (% of GPUs)", ylabel="busy GPU % (median)")
    ax2.set(xlabel="offered load (% of GPUs)", ylabel="p95 wait (mean job lengths, median)")
    ax1.grid(alpha=0.3)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise CliError(f"--png {path}: {e.strerror or e}") from None
    finally:
        plt.close(fig)


def _loads(text: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CliError(f"--loads {text!r}: expected comma-separated percentages") from None
    if not vals or any(not 0 < v <= 200 for v in vals):
        raise CliError(f"--loads {text!r}: each load must be in (0, 200] percent")
    return [v / 100.0 for v in vals]


def _configs(paths: Sequence[str]) -> list[tuple[str, DeschedulerConfig]]:
    out = [("default", DeschedulerConfig())]
    for p in paths:
        try:
            out.append((Path(p).stem, load_config(p)))
        except ConfigError as e:
            raise CliError(str(e)) from None
    return out


def _templates(args: argparse.Namespace, trace_dir: Path | None) -> tuple[list[JobTemplate], str]:
    if args.job:
        templates = [parse_job(j) for j in args.job]
        return templates, f"{len(templates)} given job shape(s)"
    pods_path = pod_list_path(args.pods, trace_dir)
    try:
        pods = load_pods(pods_path)
    except (OSError, TraceError) as e:
        raise CliError(f"--pods {pods_path}: {e}") from None
    templates = jobs_from_pods([p.shape for p in pods])
    if not templates:
        raise CliError(f"--pods {pods_path}: no multi-GPU pods to make jobs from")
    return templates, f"{pods_path.name} ({len(templates)} multi-GPU shapes)"


def cmd_study(args: argparse.Namespace) -> int:
    loads = _loads(args.loads)
    for flag, v in (
        ("--jobs", args.jobs),
        ("--seeds", args.seeds),
        ("--cluster-nodes", args.cluster_nodes),
    ):
        if v < 1:
            raise CliError(f"{flag} {v}: must be >= 1")
    if not args.job_hours > 0:
        raise CliError(f"--job-hours {args.job_hours}: must be > 0")
    if not 0 <= args.high_share <= 1:
        raise CliError(f"--high-share {args.high_share}: must be in [0, 1]")
    if args.checkpoint is not None and not args.checkpoint > 0:
        raise CliError(f"--checkpoint {args.checkpoint}: must be > 0 hours")
    if args.policy not in POLICIES or args.policy in ("fgd", "corral", "random"):
        raise CliError(
            f"--policy {args.policy}: choose one of binpack, spread, dotprod, gpupacking, "
            "bestfit, gpuclustering"
        )
    configs = _configs(args.config or [])
    trace_dir = None if args.job and args.nodes else trace_dir_arg(args.trace_dir)
    templates, source = _templates(args, trace_dir)
    nodes_path = nodes_path_arg(args.nodes, trace_dir)
    try:
        nodes = load_nodes(nodes_path)
    except (OSError, TraceError) as e:
        raise CliError(f"--nodes {nodes_path}: {e}") from None
    sample = (
        random.Random(args.seed).sample(nodes, args.cluster_nodes)
        if args.cluster_nodes < len(nodes)
        else nodes
    )
    seeds = list(range(args.seed, args.seed + args.seeds))
    study_modes = modes(configs, args.job_hours, args.hold_room)
    results = run(
        lambda: Snapshot(sample),
        templates,
        loads,
        seeds,
        study_modes,
        policy=args.policy,
        jobs=args.jobs,
        high_share=args.high_share,
        checkpoint=args.checkpoint / args.job_hours if args.checkpoint else None,
        progress=None if args.json else progress_bar("study"),
    )
    summary = summarize(results, args.job_hours)
    if args.png:
        write_png(summary, Path(args.png))
    gpus = sum(n.gpu_count for n in sample)
    setup = {
        "nodes": len(sample),
        "gpus": gpus,
        "jobs": args.jobs,
        "job_source": source,
        "seeds": seeds,
        "policy": args.policy,
        "job_hours": args.job_hours,
        "high_share": args.high_share,
        "checkpoint_hours": args.checkpoint,
        "configs": [name for name, _ in configs],
        "interval_seconds": configs[0][1].runner.interval,
    }
    if args.json:
        print(
            json.dumps({"setup": setup, "summary": summary, "runs": [r.to_dict() for r in results]})
        )
        return EXIT_OK
    print(
        f"{len(sample)} nodes ({gpus} GPUs), {args.jobs} jobs per run from {source}, "
        f"seeds {seeds[0]}-{seeds[-1]}, policy {args.policy}; a mean job lasts "
        f"{args.job_hours:g} h; descheduler every {configs[0][1].runner.interval / 60:g} min"
    )
    print(render(summary))
    if args.png:
        print(f"plot: {args.png}")
    return EXIT_OK


def add_study_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``study`` on the corral-descheduler parser."""
    s = sub.add_parser(
        "study",
        help="gangs over time: no descheduler, HighNodeUtilization and corral, by load",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_arguments(s)
    s.add_argument(
        "--pods", default="multigpu20", help="pod list whose multi-GPU pods make the jobs"
    )
    s.add_argument(
        "--job",
        action="append",
        metavar="WORKERS:gpus=G,cpu=C,memory=M",
        help="a job shape instead of the trace's (repeat for a mix), as gangplace gangstudy",
    )
    s.add_argument("--loads", default="70,82,90,95", help="offered loads, %% of GPUs")
    s.add_argument("--seeds", type=int, default=5, help="seeds per load, from --seed (5)")
    s.add_argument("--jobs", type=int, default=150, help="jobs per run (150)")
    s.add_argument("--cluster-nodes", type=int, default=20, help="nodes sampled (20)")
    s.add_argument("--policy", default="binpack", help="node scorer of the scheduler")
    s.add_argument(
        "--config",
        action="append",
        metavar="FILE",
        help="also run corral's descheduler with this config (repeat for more); the "
        "defaults always run",
    )
    s.add_argument(
        "--hold-room",
        action="store_true",
        help="also run each corral mode keeping the room it makes for its gang",
    )
    s.add_argument("--job-hours", type=float, default=2.0, help="hours a mean job runs (2)")
    s.add_argument(
        "--high-share",
        type=float,
        default=0.0,
        help="share of jobs with a higher priority, served first (0)",
    )
    s.add_argument(
        "--checkpoint",
        type=float,
        metavar="HOURS",
        help="jobs keep their work every this many hours (default: a moved job starts over)",
    )
    s.add_argument("--png", metavar="FILE", help="write busy GPU and p95 wait against load")
    s.set_defaults(func=guarded(cmd_study, "corral-descheduler"))
