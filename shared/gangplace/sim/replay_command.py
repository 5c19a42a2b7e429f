"""``gangplace simulate`` (trace replay as in the FGD paper) and ``gangplace gangstudy``
(pod-by-pod versus all-or-nothing placement of multi-pod jobs)."""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

from gangplace.cli_exit import UsageError
from gangplace.engine import Snapshot
from gangplace.engine.fragmentation import TargetWorkload
from gangplace.engine.model import PodShape
from gangplace.engine.policies import POLICIES, PolicyContext, make_policy
from gangplace.plotting import pyplot
from gangplace.sim.arrivals import TracePod
from gangplace.sim.gang_study import MODES, JobTemplate, LoadResult, jobs_from_pods, run_study
from gangplace.sim.replay import ReplayResult
from gangplace.sim.trace_csv import (
    GPU_NODE_FILE,
    TraceError,
    find_trace_dir,
    load_nodes,
    load_pods,
    pod_list_path,
)
from gangplace.sim.trace_run import TraceSetupError, run_trace
from gangplace.snapshot_io import load_snapshot

__all__ = [
    "CliError",
    "TraceInput",
    "add_common_arguments",
    "add_replay_arguments",
    "add_replay_commands",
    "guarded",
    "load_trace_input",
    "nodes_path_arg",
    "print_replay",
    "progress_bar",
    "trace_dir_arg",
]

EXIT_OK, EXIT_BAD_INPUT = 0, 2
T = TypeVar("T")


class CliError(ValueError):
    """Bad command-line input; the message names the flag."""


def progress_bar(label: str, stream: TextIO | None = None) -> Callable[[int, int], None] | None:
    """A one-line progress bar on ``stream`` (default stderr) -- only on a terminal."""
    stream = stream or sys.stderr
    if not stream.isatty():
        return None

    def show(done: int, total: int) -> None:
        width = 30
        filled = width * done // max(total, 1)
        end = "\n" if done >= total else ""
        stream.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}{end}")
        stream.flush()

    return show


def trace_dir_arg(arg: str | None) -> Path | None:
    """``--trace-dir``, else the trace found through $CORRAL_DATA (None if none)."""
    if arg is None:
        return find_trace_dir()
    p = Path(arg)
    if not p.is_dir():
        raise CliError(f"--trace-dir {arg}: not a directory")
    return p


def nodes_path_arg(arg: str | None, trace_dir: Path | None) -> Path:
    """``--nodes``, else the trace's GPU node list; a clear error without either."""
    if arg is not None:
        return Path(arg)
    if trace_dir is None:
        raise CliError(
            "--nodes: no node list given and no trace folder found "
            "(set --trace-dir or $CORRAL_DATA; `make data` gets it)"
        )
    return trace_dir / GPU_NODE_FILE


def _load(flag: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except (TraceError, ValueError) as e:
        raise CliError(f"{flag}: {e}") from None


def _print_curve(res: ReplayResult, every: int) -> None:
    head = (
        f"{'arrived %':>10}{'allocated %':>13}{'unallocated %':>15}"
        f"{'fragmented %':>14}{'frag rate %':>13}"
    )
    print(head)
    last = res.curve[-1]
    for p in res.curve:
        if p.arrived_pct % every == 0 or p is last:
            print(
                f"{p.arrived_pct:>10}{p.allocated_gpu_pct:>13.2f}{p.unallocated_gpu_pct:>15.2f}"
                f"{p.fragmented_gpu_pct:>14.2f}{p.frag_rate_pct:>13.2f}"
            )


@dataclass(slots=True)
class TraceInput:
    """What ``simulate``'s flags name: the pod list (path and pods) and the cluster."""

    pods_path: Path
    pods: list[TracePod]
    cluster: Snapshot


def load_trace_input(args: argparse.Namespace) -> TraceInput:
    """Check the replay flags (see :func:`add_replay_arguments`) and load what they name;
    CliError naming the flag on bad input."""
    if args.inflate <= 0 or args.inflate > 10:
        raise CliError(f"--inflate {args.inflate}: must be in (0, 10]")
    if args.rows_every < 1:
        raise CliError(f"--every {args.rows_every}: must be >= 1")
    if args.policy not in POLICIES:
        raise CliError(f"--policy {args.policy}: unknown; choose from {', '.join(POLICIES)}")
    trace_dir = trace_dir_arg(args.trace_dir)
    pods_path = pod_list_path(args.pods, trace_dir)
    pods = _load("--pods", lambda: load_pods(pods_path))
    if args.snapshot:
        cluster = _load("--snapshot", lambda: load_snapshot(args.snapshot))
    else:
        nodes_path = nodes_path_arg(args.nodes, trace_dir)
        cluster = _load("--nodes", lambda: Snapshot(load_nodes(nodes_path)))
    return TraceInput(pods_path, pods, cluster)


def print_replay(
    res: ReplayResult,
    args: argparse.Namespace,
    pods_path: Path,
    extra: dict[str, Any] | None = None,
    notes: Sequence[str] = (),
) -> None:
    """The replay's output: one JSON object (``--json``; ``extra`` adds keys) or the
    curve as a table and a summary line (``notes`` follow it)."""
    if args.json:
        out: dict[str, Any] = {"trace": str(pods_path), "seed": args.seed, "inflate": args.inflate}
        out.update(res.to_dict())
        out.update(extra or {})
        print(json.dumps(out))
        return
    print(f"policy {res.policy}, seed {args.seed}, pods {pods_path.name}: {res.pods} arrivals")
    _print_curve(res, args.rows_every)
    f = res.final
    print(
        f"at {f.arrived_pct}% arrived: allocated {f.allocated_gpu_pct:.2f}%, unallocated "
        f"{f.unallocated_gpu_pct:.2f}%, fragmented {f.fragmented_gpu_pct:.2f}%, frag rate "
        f"{f.frag_rate_pct:.2f}%; {res.pods_unallocated} pods unallocated; {res.seconds:.1f} s"
    )
    for line in notes:
        print(line)


def _policies(text: str) -> list[str]:
    """``--policy``: one policy, or several separated by commas (each replayed in turn)."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in POLICIES]
    if not names or bad:
        raise CliError(
            f"--policy {text}: unknown{' ' + ', '.join(bad) if bad else ''}; choose from "
            f"{', '.join(POLICIES)} (several: comma-separated)"
        )
    return list(dict.fromkeys(names))


def cmd_simulate(args: argparse.Namespace) -> int:
    """Replay the trace with each policy named, on the same arrivals; with ``--png``
    draw the paper's figure of them all."""
    policies = _policies(args.policy)
    if args.png:
        from gangplace.sim.replay_figure import draw_replays

        try:
            pyplot()  # before the replays: without matplotlib, say so at once
        except UsageError as e:
            raise CliError(str(e)) from None
    results = []
    for policy in policies:
        # Each replay starts from the cluster as the flags name it.
        data = load_trace_input(argparse.Namespace(**{**vars(args), "policy": policy}))
        bar = None if args.json else progress_bar(f"{policy} seed {args.seed}")
        res = run_trace(data.cluster, data.pods, policy, args.seed, args.inflate, bar)
        print_replay(res, args, data.pods_path)
        results.append(res)
    if args.png:
        title = (
            f"{data.pods_path.name}, seed {args.seed}: unallocated GPU as the workload "
            "arrives (FGD paper method)"
        )
        try:
            draw_replays(args.png, results, title)
        except UsageError as e:
            raise CliError(str(e)) from None
        if not args.json:
            print(f"picture: {args.png}")
    return EXIT_OK


def _loads(text: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CliError(f"--loads {text!r}: expected comma-separated percentages") from None
    if not vals or any(not 0 < v <= 200 for v in vals):
        raise CliError(f"--loads {text!r}: each load must be in (0, 200] percent")
    return [v / 100.0 for v in vals]


def render_study(results: list[LoadResult]) -> str:
    """Both modes side by side, one row per load."""
    by = {(r.load_pct, r.mode): r for r in results}
    loads = sorted({r.load_pct for r in results})
    cols = ("started", "stuck", "partial GPU %", "busy GPU %", "mean wait")
    head1 = f"{'':>6} | " + " | ".join(f"{m:^62}" for m in MODES)
    head2 = f"{'load':>6} | " + " | ".join(
        f"{cols[0]:>10}{cols[1]:>8}{cols[2]:>15}{cols[3]:>13}{cols[4]:>16}" for _ in MODES
    )
    lines = [head1, head2, "-" * len(head2)]
    for x in loads:
        cells = []
        for m in MODES:
            r = by[(x, m)]
            cells.append(
                f"{r.started:>5}/{r.jobs:<4}{r.stuck_partial:>8}{r.partial_gpu_pct:>15.2f}"
                f"{r.busy_gpu_pct:>13.2f}{r.mean_wait:>16.3f}"
            )
        lines.append(f"{x:>5}% | " + " | ".join(cells))
    return "\n".join(lines)


_JOB_KEYS = ("gpus", "gpu-milli", "cpu", "memory")


def parse_job(spec: str) -> JobTemplate:
    """``WORKERS:gpus=G,cpu=C,memory=M[,gpu-milli=N]``: a job of WORKERS pods, each
    with G GPUs (or N thousandths of one), C CPU and M memory."""
    what = f"--job {spec!r}"
    size_text, sep, rest = spec.partition(":")
    try:
        size = int(size_text)
    except ValueError:
        raise CliError(f"{what}: expected WORKERS:gpus=G,cpu=C,memory=M") from None
    if not sep or size < 1:
        raise CliError(f"{what}: expected WORKERS (at least 1):gpus=G,cpu=C,memory=M")
    values: dict[str, str] = {}
    for part in rest.split(","):
        key, eq, value = part.strip().partition("=")
        if not eq or key not in _JOB_KEYS:
            raise CliError(
                f"{what}: {part.strip()!r}: expected one of {', '.join(_JOB_KEYS)}=VALUE"
            )
        values[key] = value.strip()
    for key in ("gpus", "gpu-milli"):
        if key in values and not values[key].isdigit():
            raise CliError(f"{what}: {key} {values[key]!r}: expected a whole number")
    try:
        shape = PodShape.typed(
            values.get("cpu", "1"),
            values.get("memory", "4Gi"),
            int(values["gpus"]) if "gpus" in values else 1,
            int(values["gpu-milli"]) if "gpu-milli" in values else None,
        )
    except ValueError as e:
        raise CliError(f"{what}: {e}") from None
    if not shape.is_gpu:
        raise CliError(f"{what}: gpus 0: a gang study job needs GPUs")
    return JobTemplate(shape, size)


def cmd_gangstudy(args: argparse.Namespace) -> int:
    loads = _loads(args.loads)
    if args.jobs < 1:
        raise CliError(f"--jobs {args.jobs}: must be >= 1")
    if args.size is not None and args.size < 1:
        raise CliError(f"--size {args.size}: must be >= 1")
    if args.policy not in POLICIES or args.policy in ("fgd", "corral", "random"):
        raise CliError(
            f"--policy {args.policy}: choose one of binpack, spread, dotprod, gpupacking, "
            "bestfit, gpuclustering"
        )
    trace_dir = trace_dir_arg(args.trace_dir)
    if args.job:
        templates = [parse_job(j) for j in args.job]
        source = f"{len(templates)} given job shape(s)"
    else:
        pods_path = pod_list_path(args.pods, trace_dir)
        pods = _load("--pods", lambda: load_pods(pods_path))
        templates = jobs_from_pods([p.shape for p in pods], args.size, args.split)
        if not templates:
            raise CliError(f"--pods {pods_path}: no multi-GPU pods to make jobs from")
        source = f"{pods_path.name} ({len(templates)} multi-GPU shapes)"
    nodes_path = nodes_path_arg(args.nodes, trace_dir)
    nodes = _load("--nodes", lambda: load_nodes(nodes_path))
    if args.cluster_nodes < 1:
        raise CliError(f"--cluster-nodes {args.cluster_nodes}: must be >= 1")
    sample = (
        random.Random(args.seed).sample(nodes, args.cluster_nodes)
        if args.cluster_nodes < len(nodes)
        else nodes
    )
    ctx = PolicyContext(TargetWorkload((), ()))
    results = run_study(
        lambda: Snapshot(sample),
        templates,
        loads,
        scorer_factory=lambda: make_policy(args.policy, ctx),
        jobs=args.jobs,
        seed=args.seed,
        progress=None if args.json else progress_bar("gang study"),
    )
    if args.json:
        print(json.dumps({"results": [r.to_dict() for r in results]}))
        return EXIT_OK
    gpus = sum(n.gpu_count for n in sample)
    print(
        f"{len(sample)} nodes ({gpus} GPUs), {args.jobs} jobs per run from {source}, "
        f"policy {args.policy}; wait in mean job lengths"
    )
    print(render_study(results))
    return EXIT_OK


def guarded(
    fn: Callable[[argparse.Namespace], int], prog: str = "gangplace"
) -> Callable[[argparse.Namespace], int]:
    """``fn`` with a :class:`CliError`, a trace that cannot be read or a cluster the run
    cannot start from printed as ``PROG COMMAND: message`` on stderr and exit code 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except (CliError, TraceError, TraceSetupError) as e:
            print(f"{prog} {args.command}: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT

    return run


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    """The flags every trace command takes: where the trace is, the seed, ``--json``."""
    p.add_argument(
        "--trace-dir",
        help="folder of the Alibaba v2023 CSVs (default: $CORRAL_TRACE_DIR, else "
        "data/alibaba-gpu-v2023 in $CORRAL_DATA or in shared/ found upward from here; "
        "`make data` gets it)",
    )
    p.add_argument("--nodes", help="node list CSV (default: the trace's GPU node list)")
    p.add_argument("--seed", type=int, default=42, help="random seed (default: 42)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")


def add_replay_arguments(p: argparse.ArgumentParser, several: bool = False) -> None:
    """``simulate``'s own flags (beside :func:`add_common_arguments`), the same in
    ``corral-descheduler simulate``; ``several``: ``--policy`` may name several."""
    p.add_argument(
        "--pods", default="default", help="pod list CSV, or a name in the trace folder (default)"
    )
    p.add_argument(
        "--snapshot", help="a kubectl List JSON to use as the cluster instead of --nodes"
    )
    many = "; or several, comma-separated, replayed in turn on the same arrivals"
    p.add_argument(
        "--policy",
        default="corral",
        help=f"one of {', '.join(POLICIES)} (default: corral){many if several else ''}",
    )
    p.add_argument(
        "--inflate", type=float, default=1.3, help="replay until GPU demand is this x capacity"
    )
    p.add_argument(
        "--every",
        dest="rows_every",
        type=int,
        default=10,
        metavar="N",
        help="print a row every N %% arrived (the JSON curve has every 1 %%)",
    )


def add_replay_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``simulate`` and ``gangstudy`` on the gangplace parser."""
    common = argparse.ArgumentParser(add_help=False)
    add_common_arguments(common)

    s = sub.add_parser(
        "simulate", parents=[common], help="replay a pod trace with a policy (FGD paper method)"
    )
    add_replay_arguments(s, several=True)
    s.add_argument(
        "--png",
        metavar="FILE",
        help="also draw unallocated GPU against arrived workload, one curve per policy (the "
        "FGD paper's figure), to a PNG file; name several policies with --policy a,b,c "
        "(needs the plot extra: pip install 'corral[plot]')",
    )
    s.set_defaults(func=guarded(cmd_simulate))

    g = sub.add_parser(
        "gangstudy",
        parents=[common],
        help="multi-pod jobs: pod-by-pod vs all-or-nothing placement, by load",
    )
    g.add_argument(
        "--pods", default="multigpu20", help="pod list whose multi-GPU pods make the jobs"
    )
    g.add_argument("--size", type=int, help="workers per job (default: the pod's GPU count)")
    g.add_argument("--split", action="store_true", help="one-GPU workers (the pod split per GPU)")
    g.add_argument(
        "--job",
        action="append",
        metavar="WORKERS:gpus=G,cpu=C,memory=M",
        help="a job shape to use instead of the trace's (repeat for a mix, drawn evenly); "
        "keys gpus (default 1), gpu-milli (a share of one GPU), cpu (1), memory (4Gi)",
    )
    g.add_argument("--loads", default="50,60,70,80,85,90,95", help="offered loads, %% of GPUs")
    g.add_argument("--jobs", type=int, default=800, help="jobs per run (default: 800)")
    g.add_argument(
        "--cluster-nodes", type=int, default=120, help="nodes sampled from the node list"
    )
    g.add_argument("--policy", default="binpack", help="node scorer for both modes")
    g.set_defaults(func=guarded(cmd_gangstudy))
