"""``corral-descheduler study``: what a descheduler buys gangs, over time.

    corral-descheduler study [--mix trace|gang-tail|squared|FILE] [--loads 90,120]
                             [--seeds 5] [--cluster-nodes 120 | --nodes FILE]
                             [--length 4] [--warmup 3] [--checkpoint 30m|none]
                             [--lengths exp|lognormal] [--queues 4] [--high-share 0]
                             [--config FILE ...] [--hold-room] [--pod-by-pod]
                             [--job-hours 2] [--workers 2] [--quick] [--json] [--png FILE]

Jobs drawn from a mix (by default ``trace``: the Alibaba v2023 default pod list's GPU
pods by their own frequencies, and a tail of multi-node gangs; the presets and their
sources are bundled, ``--mix FILE`` reads another) arrive, wait, run and leave on a
cluster shaped like the trace's node list. Side by side on the same arrivals: all or
nothing (a gang scheduler alone); all or nothing with the kubernetes-sigs descheduler's
HighNodeUtilization (pod by pod, no gangs); all or nothing with corral's descheduler, the
real planner with its default config -- and once more per ``--config`` file, a config
file as a cluster uses it -- every ``runner.interval`` of simulated time.
``--hold-room`` adds each corral mode again with the room it makes kept for its gang (with
``capacity_room.nominate`` in its config, kept as the kube-scheduler keeps a nominated
pod's room: a job of higher priority may take it);
``--pod-by-pod`` adds the default scheduler placing pod by pod.

Jobs that fit no node are reported once and left out; gangs larger than a quarter of
the cluster are cut to that size; the load is offered against the GPUs the mix can use.
A moved job loses the work since its last checkpoint (``--checkpoint``, from when it
last started; ``none``: it starts over). The first ``--warmup`` job lengths are left
out of every figure; the descheduler starts after them, so every mode starts from the
same cluster.

Per load and mode the table gives the median over the seeds and its range, and each
seed's own: busy and useful GPU %, the load actually offered, mean and p95 wait for all
jobs, gangs and single-node jobs (jobs never started count as waiting till the end),
GPU-hours lost to moves, pods moved, rooms made / reached / taken, whether the queue is
stable (p95 not growing with the run's length), and why waiting gangs got no room.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from gangplace.config_errors import ConfigError
from gangplace.engine import PodShape, Snapshot
from gangplace.engine.fragmentation import TargetWorkload
from gangplace.engine.node_pod_records import NodeRecord
from gangplace.engine.policies import POLICIES, PolicyContext, make_policy
from gangplace.engine.timeparse import DurationError, parse_duration
from gangplace.plotting import PlotUnavailable, pyplot
from gangplace.sim.gang_study import (
    LENGTHS,
    DeschedulerHook,
    DetailedResult,
    JobTemplate,
    run_detailed,
)
from gangplace.sim.high_node_utilization import HighNodeUtilization
from gangplace.sim.job_mix import (
    PRESETS,
    JobMix,
    MixError,
    MixJob,
    cap_gangs,
    fill_ceiling,
    fitting,
    load_mix,
    trace_nodes,
    usable_gpus,
)
from gangplace.sim.replay_command import (
    CliError,
    guarded,
    parse_job,
    progress_bar,
    trace_dir_arg,
)
from gangplace.sim.trace_csv import TraceError, load_nodes, load_pods, pod_list_path

from descheduler.config import DeschedulerConfig, load_config
from descheduler.study import CorralHook
from descheduler.study_table import render, summarize, wrap

__all__ = ["Mode", "Setup", "add_study_command", "cmd_study", "modes", "run_every_mode"]

EXIT_OK = 0
EXIT_NO_FIGURE = 1
POD_BY_POD, GANG, HNU, CORRAL = (
    "pod-by-pod",
    "all-or-nothing",
    "aon+HighNodeUtilization",
    "aon+corral",
)
MAX_GANG_SHARE = 0.25  # of the cluster's GPUs
QUICK = {"cluster_nodes": 40, "seeds": 3, "length": 3.0, "warmup": 2.0}


@dataclass(frozen=True, slots=True)
class Mode:
    """One column of the study: a placement mode and the descheduler beside it."""

    label: str
    placement: str  # pod-by-pod or all-or-nothing
    make_hook: Callable[[], DeschedulerHook | None]
    hold_room: bool = False
    # capacity_room.nominate: the room is held as the kube-scheduler holds a nominated
    # pod's, against jobs of its priority or lower (a higher one may take it)
    hold_higher: bool = False


def modes(
    configs: Sequence[tuple[str, DeschedulerConfig]],
    job_hours: float,
    hold_room: bool,
    pod_by_pod: bool = False,
) -> list[Mode]:
    """Every mode of one study; HighNodeUtilization runs at the first config's interval."""
    interval = configs[0][1].runner.interval / (job_hours * 3600.0)
    out = [Mode(POD_BY_POD, "pod-by-pod", lambda: None)] if pod_by_pod else []
    out += [
        Mode(GANG, "all-or-nothing", lambda: None),
        Mode(HNU, "all-or-nothing", lambda: HighNodeUtilization(interval)),
    ]
    for name, cfg in configs:
        label = CORRAL if name == "default" else f"{CORRAL}({name})"

        def hook(cfg: DeschedulerConfig = cfg) -> DeschedulerHook:
            return CorralHook(cfg, job_hours)

        out.append(Mode(label, "all-or-nothing", hook))
        if hold_room:
            higher = cfg.capacity_room.nominate
            out.append(
                Mode(f"{label}+hold", "all-or-nothing", hook, hold_room=True, hold_higher=higher)
            )
    return out


@dataclass(frozen=True, slots=True)
class Setup:
    """What every run of one study shares."""

    nodes: tuple[NodeRecord, ...]
    mix: JobMix
    capacity_gpus: int
    policy: str = "binpack"
    length: float = 6.0
    warmup: float = 2.0
    checkpoint: float | None = None  # job lengths
    lengths: str = "exp"
    queues: int = 4
    high_share: float = 0.0


# The forked workers read the study's runs from here (set before they start).
_RUNS: list[tuple[Setup, float, int, Mode]] = []


def _one(i: int) -> tuple[DetailedResult, float]:
    """Run ``i`` and the CPU seconds it took."""
    setup, load, seed, m = _RUNS[i]
    ctx = PolicyContext(TargetWorkload((), ()))
    cpu = time.process_time()
    r = run_detailed(
        Snapshot(list(setup.nodes)),
        setup.mix.templates,
        load,
        m.placement,
        weights=setup.mix.weights,
        hook=m.make_hook(),
        hold_room=m.hold_room,
        hold_higher=m.hold_higher,
        checkpoint=setup.checkpoint,
        high_share=setup.high_share,
        queues=setup.queues,
        lengths=setup.lengths,
        capacity_gpus=setup.capacity_gpus,
        length=setup.length + setup.warmup,
        warmup=setup.warmup,
        label=m.label,
        scorer=make_policy(setup.policy, ctx),
        seed=seed,
    )
    return r, time.process_time() - cpu


def run_every_mode(
    setup: Setup,
    loads: Sequence[float],
    seeds: Sequence[int],
    study_modes: Sequence[Mode],
    *,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[DetailedResult], float]:
    """Every mode on every (load, seed), each on a fresh cluster; one seed gives every
    mode the same arrivals. ``workers`` > 1 runs them in that many forked processes; the
    results come in the same order either way. Also the CPU seconds the runs took."""
    runs = [(setup, load, seed, m) for load in loads for seed in seeds for m in study_modes]
    _RUNS[:] = runs
    out: dict[int, tuple[DetailedResult, float]] = {}
    try:
        if workers <= 1:
            for i in range(len(runs)):
                out[i] = _one(i)
                if progress is not None:
                    progress(len(out), len(runs))
        else:
            # Longest first, so the short ones fill the last gaps: the planner's modes
            # (highest load first), then the baselines, which plan nothing.
            baselines = (POD_BY_POD, GANG, HNU)
            order = sorted(
                range(len(runs)), key=lambda i: (runs[i][3].label in baselines, -runs[i][1], i)
            )
            with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
                futures = {pool.submit(_one, i): i for i in order}
                for f in as_completed(futures):
                    out[futures[f]] = f.result()
                    if progress is not None:
                        progress(len(out), len(runs))
    finally:
        _RUNS.clear()
    return [out[i][0] for i in range(len(runs))], sum(c for _, c in out.values())


def write_png(summary: Sequence[dict[str, Any]], path: Path) -> None:
    """Busy GPU % and p95 wait (all jobs, gangs) against load, one line per mode."""
    try:
        plt = pyplot()
    except PlotUnavailable:
        raise CliError(
            f"--png {path}: not written: matplotlib is not installed "
            "(pip install -c constraints.txt -e '.[plot]'); the table above is the run's"
        ) from None
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    labels = list(dict.fromkeys(r["mode"] for r in summary))
    panels = (
        ("busy_gpu_pct", "busy GPU % (median)"),
        ("p95_wait", "p95 wait, all jobs (job lengths)"),
        ("p95_wait_gang", "p95 wait, gangs (job lengths)"),
    )
    for label in labels:
        rows = sorted((r for r in summary if r["mode"] == label), key=lambda r: r["load_pct"])
        for ax, (key, _) in zip(axes, panels, strict=True):
            pts = [(r["load_pct"], r[key]["median"]) for r in rows if r[key] is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    for ax, (_, ylabel) in zip(axes, panels, strict=True):
        ax.set(xlabel="offered load (% of the GPUs the mix can use)", ylabel=ylabel)
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise CliError(f"--png {path}: not written: {e.strerror or e}") from None
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


def _checkpoint(text: str) -> float | None:
    """``--checkpoint``: hours, a duration (``30m``), or ``none``."""
    if text.strip().lower() == "none":
        return None
    try:
        hours = float(text)
    except ValueError:
        try:
            hours = parse_duration(text, numbers=False) / 3600.0
        except DurationError as e:
            raise CliError(
                f"--checkpoint {text!r}: {e.problem}; allowed: a duration such as 30m or 1h, "
                "hours as a number, or none"
            ) from None
    if not hours > 0 or not math.isfinite(hours):
        raise CliError(f"--checkpoint {text!r}: must be above 0 (or none)")
    return hours


def _configs(paths: Sequence[str]) -> list[tuple[str, DeschedulerConfig]]:
    out = [("default", DeschedulerConfig())]
    for p in paths:
        try:
            out.append((Path(p).stem, load_config(p)))
        except ConfigError as e:
            raise CliError(str(e)) from None
    return out


def _mix(args: argparse.Namespace) -> JobMix:
    if args.job:
        jobs = tuple(MixJob(parse_job(j), 1.0) for j in args.job)
        return JobMix("given", f"{len(jobs)} job shape(s) given with --job", jobs)
    if args.pods:
        path = pod_list_path(args.pods, trace_dir_arg(args.trace_dir))
        try:
            pods = load_pods(path)
        except (OSError, TraceError) as e:
            raise CliError(f"--pods {path}: {e}") from None
        counts: dict[PodShape, int] = {}
        for p in pods:
            s = p.shape
            if s.gpu_count >= 2 and s.gpu_milli >= 1000:
                counts[s] = counts.get(s, 0) + 1
        if not counts:
            raise CliError(f"--pods {path}: no multi-GPU pods to make jobs from")
        jobs = tuple(MixJob(JobTemplate(s, s.gpu_count), float(k)) for s, k in counts.items())
        return JobMix(path.stem, f"{path.name}: each k-GPU pod made k workers of k GPUs", jobs)
    try:
        return load_mix(args.mix)
    except MixError as e:
        raise CliError(str(e)) from None


def _nodes(args: argparse.Namespace) -> tuple[list[NodeRecord], str]:
    if args.nodes is None:
        return trace_nodes(args.cluster_nodes), "nodes shaped like the trace's GPU node list"
    try:
        nodes = load_nodes(args.nodes)
    except (OSError, TraceError) as e:
        raise CliError(f"--nodes {args.nodes}: {e}") from None
    if args.cluster_nodes < len(nodes):
        nodes = random.Random(args.seed).sample(nodes, args.cluster_nodes)
    return nodes, f"nodes of {Path(args.nodes).name}"


def _check(args: argparse.Namespace) -> None:
    for flag, v in (
        ("--seeds", args.seeds),
        ("--cluster-nodes", args.cluster_nodes),
        ("--queues", args.queues),
        ("--workers", args.workers),
    ):
        if v < 1:
            raise CliError(f"{flag} {v}: must be >= 1")
    for flag, x in (("--job-hours", args.job_hours), ("--length", args.length)):
        if not x > 0 or not math.isfinite(x):
            raise CliError(f"{flag} {x}: must be > 0")
    if not 0 <= args.warmup < 1e6:
        raise CliError(f"--warmup {args.warmup}: must be >= 0")
    if not 0 <= args.high_share <= 1:
        raise CliError(f"--high-share {args.high_share}: must be in [0, 1]")
    if args.policy not in POLICIES or args.policy in ("fgd", "corral", "random"):
        raise CliError(
            f"--policy {args.policy}: choose one of binpack, spread, dotprod, gpupacking, "
            "bestfit, gpuclustering"
        )


def cmd_study(args: argparse.Namespace) -> int:
    if args.quick:
        for key, value in QUICK.items():
            if getattr(args, key) is None:
                setattr(args, key, value)
    for key, value in (("cluster_nodes", 120), ("seeds", 5), ("length", 4.0), ("warmup", 3.0)):
        if getattr(args, key) is None:
            setattr(args, key, value)
    loads = _loads(args.loads)
    _check(args)
    checkpoint = _checkpoint(args.checkpoint)
    configs = _configs(args.config or [])
    nodes, where = _nodes(args)
    total_gpus = sum(n.gpu_count for n in nodes)
    if total_gpus == 0:
        raise CliError("the cluster has no GPUs")
    mix = _mix(args)
    usable, unfit = fitting(mix, nodes)
    usable, cut = cap_gangs(usable, max(1, int(MAX_GANG_SHARE * total_gpus)))
    if not usable.jobs:
        raise CliError(f"--mix {mix.name}: no job of the mix fits a node of the cluster")
    capacity = usable_gpus(usable, nodes)
    ceiling = fill_ceiling(usable, nodes)
    setup = Setup(
        tuple(nodes),
        usable,
        capacity,
        args.policy,
        args.length,
        args.warmup,
        checkpoint / args.job_hours if checkpoint else None,
        args.lengths,
        args.queues,
        args.high_share,
    )
    seeds = list(range(args.seed, args.seed + args.seeds))
    study_modes = modes(configs, args.job_hours, args.hold_room, args.pod_by_pod)
    started = time.monotonic()
    results, cpu = run_every_mode(
        setup,
        loads,
        seeds,
        study_modes,
        workers=args.workers,
        progress=None if args.json else progress_bar("study"),
    )
    wall = time.monotonic() - started
    summary = summarize(results, args.job_hours)
    by_count, by_gpu = usable.gang_share()
    total_weight = sum(mix.weights)
    info = {
        "nodes": len(nodes),
        "node_source": where,
        "gpus": total_gpus,
        "usable_gpus": capacity,
        "mix": mix.name,
        "mix_source": mix.source,
        "mean_job_gpus": round(usable.mean_gpus(), 3),
        "gang_share_by_count": round(by_count, 4),
        "gang_share_by_gpu": round(by_gpu, 4),
        "ceiling_busy_pct": round(ceiling, 1),
        "left_out": [
            {"job": j.describe(), "share": round(j.weight / total_weight, 5)} for j in unfit
        ],
        "cut": [{"job": j.describe(), "workers": n} for j, n in cut],
        "seeds": seeds,
        "length_job_lengths": args.length,
        "warmup_job_lengths": args.warmup,
        "run_lengths": args.lengths,
        "queues": args.queues,
        "policy": args.policy,
        "job_hours": args.job_hours,
        "high_share": args.high_share,
        "checkpoint_hours": checkpoint,
        "configs": [name for name, _ in configs],
        "interval_seconds": configs[0][1].runner.interval,
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "workers": args.workers,
    }
    if args.json:
        print(
            json.dumps({"setup": info, "summary": summary, "runs": [r.to_dict() for r in results]})
        )
    else:
        _print_text(info, summary, mix, unfit, cut)
    if args.png:
        try:
            write_png(summary, Path(args.png))
        except CliError as e:
            print(f"corral-descheduler study: {e}", file=sys.stderr)
            return EXIT_NO_FIGURE
        if not args.json:
            print(f"figure: {args.png}")
    return EXIT_OK


def _print_text(
    info: dict[str, Any],
    summary: Sequence[dict[str, Any]],
    mix: JobMix,
    unfit: Sequence[MixJob],
    cut: Sequence[tuple[MixJob, int]],
) -> None:
    ck = info["checkpoint_hours"]
    print(
        f"{info['nodes']} {info['node_source']} ({info['gpus']} GPUs, {info['usable_gpus']} "
        f"usable by the mix); seeds {info['seeds'][0]}-{info['seeds'][-1]}"
    )
    text = (
        f"mix {mix.name}: {info['mean_job_gpus']:.2f} GPUs a job; gangs "
        f"{100 * info['gang_share_by_count']:.2f}% of jobs, "
        f"{100 * info['gang_share_by_gpu']:.1f}% of the GPU demand; ceiling "
        f"{info['ceiling_busy_pct']:.1f}% busy (an empty cluster filled in arrival order "
        "until a job fits nowhere)"
    )
    for line in wrap(text, 100):
        print(line)
    for line in wrap(f"source: {mix.source}", 100):
        print(line)
    if unfit:
        share = 100 * sum(j["share"] for j in info["left_out"])
        text = f"left out, fit no node ({share:.2f}% of jobs): " + "; ".join(
            j.describe() for j in unfit
        )
        for line in wrap(text, 100):
            print(line)
    if cut:
        text = "cut to a quarter of the cluster's GPUs: " + "; ".join(
            f"{j.describe()} -> {n} workers" for j, n in cut
        )
        for line in wrap(text, 100):
            print(line)
    text = (
        f"a mean job runs {info['job_hours']:g} h ({info['run_lengths']}); "
        f"{info['length_job_lengths']:g} job lengths measured after "
        f"{info['warmup_job_lengths']:g} of warm-up; "
        + (f"checkpoints every {ck * 60:g} min" if ck else "no checkpoints")
        + f"; {info['queues']} teams; descheduler every {info['interval_seconds'] / 60:g} min"
    )
    for line in wrap(text, 100):
        print(line)
    print(render(summary, info["usable_gpus"]))
    print(
        f"\nwall time {info['wall_seconds']:.0f} s, {info['cpu_seconds']:.0f} CPU seconds "
        f"({info['workers']} worker processes)"
    )


def add_study_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``study`` on the corral-descheduler parser."""
    s = sub.add_parser(
        "study",
        help="gangs over time: no descheduler, HighNodeUtilization and corral, by load",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "--mix",
        default="trace",
        help=f"job mix: a preset ({', '.join(PRESETS)}) or a mix file (JSON) (trace)",
    )
    s.add_argument("--pods", help="jobs from a pod list's multi-GPU pods instead (k x k GPUs)")
    s.add_argument(
        "--job",
        action="append",
        metavar="WORKERS:gpus=G,cpu=C,memory=M",
        help="a job shape instead of a mix (repeat for more; all equally often)",
    )
    s.add_argument("--trace-dir", help="folder of the trace's CSVs, for --pods by name")
    s.add_argument("--nodes", help="node list CSV (default: nodes shaped like the trace's)")
    s.add_argument("--cluster-nodes", type=int, help="nodes (120; --nodes: a sample of them)")
    s.add_argument("--seed", type=int, default=42, help="first seed (42)")
    s.add_argument("--seeds", type=int, help="seeds per load, from --seed (5)")
    s.add_argument("--loads", default="90,120", help="offered loads, %% of usable GPUs (90,120)")
    s.add_argument("--length", type=float, help="job lengths measured per run (4)")
    s.add_argument(
        "--warmup", type=float, help="job lengths left out at the start, no descheduler yet (3)"
    )
    s.add_argument(
        "--checkpoint",
        default="30m",
        metavar="DURATION",
        help="jobs checkpoint this often (30m; hours as a number; none: a moved job starts over)",
    )
    s.add_argument("--lengths", choices=LENGTHS, default="exp", help="run lengths (exp)")
    s.add_argument("--queues", type=int, default=4, help="teams: namespaces and queues (4)")
    s.add_argument("--job-hours", type=float, default=2.0, help="hours a mean job runs (2)")
    s.add_argument(
        "--high-share",
        type=float,
        default=0.0,
        help="share of jobs with a higher priority, served first (0)",
    )
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
    s.add_argument("--pod-by-pod", action="store_true", help="also run pod-by-pod placement")
    s.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes running the runs (2)",
    )
    s.add_argument(
        "--quick",
        action="store_true",
        help="40 nodes, 3 seeds, 3 job lengths after 2 of warm-up (unless given)",
    )
    s.add_argument("--json", action="store_true", help="one JSON object instead of text")
    s.add_argument("--png", metavar="FILE", help="also draw busy GPU and p95 waits against load")
    s.set_defaults(func=guarded(cmd_study, "corral-descheduler"))
