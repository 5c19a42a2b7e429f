"""``corral-descheduler simulate``: the engine's trace replay (``gangplace simulate``,
same flags and ``--json`` keys) with the planner run at chosen points and its moves
made, to measure what moving pods buys.

    corral-descheduler simulate [--policy corral] [--plan-every 10% | --plan-at 90,95,110]
                                [--max-moves 50] [--min-gain 0.01] [--config FILE]
                                [--compare] [--json] [gangplace simulate's other flags]

The planner runs after the arrival at which the arrived GPU demand first reaches each
point (a percentage of GPU capacity, as the paper's curve counts it). A pod that fits
nowhere at its arrival stays unallocated, as in the paper: moves only help later
arrivals. ``--json`` adds ``pods_moved`` and ``pods_total`` (arrivals), the rounds, and
with ``--compare`` the same replay without moves beside it. ``--every`` is the table's
row interval, as in ``gangplace simulate``.

Settings: the descheduler's config (``--config``, else the defaults), with the limits
made for a trace -- ``--max-moves`` pods per round, no per-node, per-namespace,
per-queue or GPU caps (a trace is one namespace and one queue) unless the file sets
them -- and ``defragment.min_gain_gpus`` from ``--min-gain`` and no
``min_total_gain_gpus`` (each move is judged alone) unless the file sets them. A trace
replay measures defragmentation: ``defragment.enabled`` is on, and the work-at-risk caps
(``moves.max_gpu_hours_at_risk``, ``defragment.max_gpu_hours_at_risk``) are lifted,
unless the file sets them (the trace's pods say nothing of their checkpoints; the cost
of a move still counts their work).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from gangplace.config_errors import ConfigError
from gangplace.sim.replay import ReplayResult
from gangplace.sim.replay_command import (
    CliError,
    add_common_arguments,
    add_replay_arguments,
    guarded,
    load_trace_input,
    print_replay,
    progress_bar,
)
from gangplace.sim.trace_run import prepare_trace

from descheduler.config import DeschedulerConfig, load_config
from descheduler.replay_with_moves import PlannerHook, replay_with_moves

__all__ = [
    "add_simulate_command",
    "cmd_simulate_with_moves",
    "moves_summary",
    "plan_percentages",
    "simulate_config",
    "trace_config",
]

EXIT_OK = 0
DEFAULT_MIN_GAIN = 0.01


def _pct(text: str, flag: str) -> float:
    raw = text.strip().removesuffix("%").strip()
    try:
        v = float(raw)
    except ValueError:
        raise CliError(f"{flag} {text!r}: expected a percentage of capacity, e.g. 10%") from None
    if not 0 < v <= 1000:
        raise CliError(f"{flag} {text!r}: must be in (0, 1000] percent")
    return v


def plan_percentages(args: argparse.Namespace) -> list[float]:
    """Where to plan, in % of capacity arrived: ``--plan-at`` as given, else every
    ``--plan-every`` up to the replay's end (``--inflate``)."""
    if args.plan_at is not None:
        parts = [x for x in args.plan_at.split(",") if x.strip()]
        if not parts:
            raise CliError(f"--plan-at {args.plan_at!r}: expected comma-separated percentages")
        return sorted({_pct(x, "--plan-at") for x in parts})
    step = _pct(args.plan_every, "--plan-every")
    end = args.inflate * 100.0
    return [float(x) for x in np.arange(step, end + 1e-9, step)]


def simulate_config(args: argparse.Namespace) -> DeschedulerConfig:
    """The descheduler's config for a trace from the flags (see the module docstring)."""
    if args.max_moves < 0:
        raise CliError(f"--max-moves {args.max_moves}: must be >= 0")
    if args.min_gain < 0:
        raise CliError(f"--min-gain {args.min_gain}: must be >= 0")
    try:
        base = load_config(args.config)
    except ConfigError as e:
        raise CliError(f"--config: {e}") from None
    return trace_config(base, args.max_moves, args.min_gain)


def trace_config(
    base: DeschedulerConfig, max_moves: int, min_gain: float = DEFAULT_MIN_GAIN
) -> DeschedulerConfig:
    """``base`` made for a trace: at most ``max_moves`` pods per round; no per-node,
    per-namespace, per-queue or GPU caps, ``min_gain`` GPUs per move and no minimum
    per round, defragmenting on and no work-at-risk caps -- each unless ``base`` sets
    it."""
    given_limits = base.limits.model_fields_set
    limits: dict[str, Any] = {"max_evictions_per_run": max_moves}
    for key in (
        "max_evictions_per_node",
        "max_evictions_per_namespace",
        "max_evictions_per_queue",
        "max_gpus_disrupted_per_run",
    ):
        if key not in given_limits:
            limits[key] = None
    defrag: dict[str, Any] = {}
    if "min_gain_gpus" not in base.defragment.model_fields_set:
        defrag["min_gain_gpus"] = min_gain
    if "min_total_gain_gpus" not in base.defragment.model_fields_set:
        defrag["min_total_gain_gpus"] = 0.0
    if "enabled" not in base.defragment.model_fields_set:
        defrag["enabled"] = True
    if "max_gpu_hours_at_risk" not in base.defragment.model_fields_set:
        defrag["max_gpu_hours_at_risk"] = None
    moves: dict[str, Any] = {}
    if "max_gpu_hours_at_risk" not in base.moves.model_fields_set:
        moves["max_gpu_hours_at_risk"] = None
    return base.model_copy(
        update={
            "limits": base.limits.model_copy(update=limits),
            "defragment": base.defragment.model_copy(update=defrag),
            "moves": base.moves.model_copy(update=moves),
        }
    )


def cmd_simulate_with_moves(args: argparse.Namespace) -> int:
    cfg = simulate_config(args)
    pcts = plan_percentages(args)
    data = load_trace_input(args)
    baseline: ReplayResult | None = None
    if args.compare:
        bar = None if args.json else progress_bar(f"{args.policy} seed {args.seed}, no moves")
        baseline = prepare_trace(
            data.cluster, data.pods, args.policy, args.seed, args.inflate
        ).replay(progress=bar)
        data = load_trace_input(args)  # a fresh cluster for the run with moves
    bar = None if args.json else progress_bar(f"{args.policy} seed {args.seed}, with moves")
    res, hook = replay_with_moves(
        data.cluster, data.pods, args.policy, args.seed, args.inflate, cfg, pcts, bar
    )
    extra = moves_summary(res, hook, args.max_moves, baseline)
    print_replay(res, args, data.pods_path, extra, notes=_notes(extra))
    return EXIT_OK


def moves_summary(
    res: ReplayResult, hook: PlannerHook, max_moves: int, baseline: ReplayResult | None
) -> dict[str, Any]:
    """The keys ``--json`` adds to ``gangplace simulate``'s."""
    moved = hook.pods_moved
    out: dict[str, Any] = {
        "pods_moved": moved,
        "pods_total": res.pods,
        "pods_moved_pct": round(100.0 * moved / res.pods, 2) if res.pods else 0.0,
        "pods_moved_by_method": hook.by_method(),
        "distinct_pods_moved": len(hook.moved_pods),
        "units_moved": sum(r.units_moved for r in hook.rounds),
        "max_moves": max_moves,
        "plan_seconds": round(hook.plan_seconds, 3),
        "rounds": [r.to_dict() for r in hook.rounds],
    }
    if baseline is not None:
        out["without_moves"] = {
            k: v for k, v in baseline.to_dict(with_curve=False).items() if k != "policy"
        }
        out["unallocated_gain_pct"] = round(
            baseline.final.unallocated_gpu_pct - res.final.unallocated_gpu_pct, 2
        )
    return out


def _notes(extra: dict[str, Any]) -> list[str]:
    lines = [
        f"moves: {extra['pods_moved']} pods moved ({extra['pods_moved_pct']:.2f}% of "
        f"{extra['pods_total']} arrivals; {extra['distinct_pods_moved']} distinct) in "
        f"{len(extra['rounds'])} planning rounds of at most {extra['max_moves']}; "
        f"planning took {extra['plan_seconds']:.1f} s",
        "moves by method: "
        + ", ".join(f"{n} pods {k}ed" for k, n in sorted(extra["pods_moved_by_method"].items())),
    ]
    if "without_moves" in extra:
        w = extra["without_moves"]
        lines.append(
            f"without moves: unallocated {w['unallocated_gpu_pct']:.2f}%; moves gained "
            f"{extra['unallocated_gain_pct']:.2f} points of GPU capacity"
        )
    lines.append(
        f"{'arrived %':>10}{'idle GPU %':>12}{'pods moved':>12}{'gain GPUs':>11}{'F(M) fall':>11}"
    )
    for r in extra["rounds"]:
        lines.append(
            f"{r['arrived_pct']:>10.1f}{r['idle_gpu_pct']:>12.2f}{r['pods_moved']:>12}"
            f"{r['gain_gpus']:>11.2f}{r['frag_fall_gpus']:>11.2f}"
        )
    lines.append(
        "gain: the fall of F(M) + CPU-stranded GPU the planner expected from the moves; "
        "F(M) fall: FGD's fragmentation alone"
    )
    return lines


def add_simulate_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``simulate`` on the corral-descheduler parser."""
    s = sub.add_parser(
        "simulate",
        help="replay the Alibaba GPU trace with the planner moving pods between arrivals",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_arguments(s)
    add_replay_arguments(s)
    when = s.add_mutually_exclusive_group()
    when.add_argument(
        "--plan-every",
        default="10%",
        help="plan every N%% of GPU capacity arrived (default: 10%%)",
    )
    when.add_argument(
        "--plan-at", help="plan at these %% of capacity arrived, e.g. 90,95,100,110,120"
    )
    s.add_argument("--max-moves", type=int, default=50, help="pods moved per round at most")
    s.add_argument(
        "--min-gain",
        type=float,
        default=DEFAULT_MIN_GAIN,
        help="GPUs a move must gain: F(M) plus CPU-stranded GPU, on the nodes it touches "
        f"(defragment.min_gain_gpus; default {DEFAULT_MIN_GAIN:g})",
    )
    s.add_argument("--config", help="descheduler config, YAML (default: built-in defaults)")
    s.add_argument(
        "--compare", action="store_true", help="also replay without moves and report both"
    )
    s.set_defaults(func=guarded(cmd_simulate_with_moves, "corral-descheduler"))
