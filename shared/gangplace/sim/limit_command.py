"""``gangplace limit``: the best any move-based descheduler could do on a trace replay,
with the offline bound and the relayout heuristic on the same run."""

from __future__ import annotations

import argparse

from gangplace.sim.limit_run import run_limit
from gangplace.sim.replay_command import (
    CliError,
    add_common_arguments,
    add_replay_arguments,
    guarded,
    load_trace_input,
    print_replay,
    progress_bar,
)
from gangplace.sim.solver_output import solver_prints_to_stderr
from gangplace.sim.trace_run import prepare_trace

__all__ = ["add_limit_command"]


def cmd_limit(args: argparse.Namespace) -> int:
    if args.time_limit <= 0:
        raise CliError(f"--time-limit {args.time_limit}: must be > 0 seconds")
    try:
        hoods = tuple(int(k) for k in args.neighbourhoods.split(",") if k.strip())
    except ValueError:
        raise CliError(
            f"--neighbourhoods {args.neighbourhoods!r}: expected sizes like 16,64"
        ) from None
    if any(k < 1 for k in hoods):
        raise CliError(f"--neighbourhoods {args.neighbourhoods!r}: sizes must be >= 1")
    if args.max_moves < 1 or args.depth < 0 or args.retry_after < 1:
        raise CliError("--max-moves and --retry-after must be >= 1 and --depth >= 0")
    if args.offline_time_limit < 0:
        raise CliError(f"--offline-time-limit {args.offline_time_limit}: must be >= 0")
    data = load_trace_input(args)
    run = prepare_trace(data.cluster, data.pods, args.policy, args.seed, args.inflate)
    bar = None if args.json else progress_bar(f"limit {args.policy} seed {args.seed}")
    with solver_prints_to_stderr():
        lim = run_limit(
            run,
            time_limit=args.time_limit,
            neighbourhoods=hoods,
            search=not args.no_search,
            max_pods=args.max_moves,
            depth=args.depth,
            offline_time_limit=args.offline_time_limit or None,
            relaxed=args.relaxed,
            retry_after=args.retry_after,
            exact_moves=args.exact_moves,
            progress=bar,
        )
    doc = lim.to_dict()
    c = lim.checks
    notes = [
        f"oracle: {c.checks} arrivals did not fit as placed; {c.placed} placed by "
        f"rearranging ({c.placed_by_search} by the move search, {c.placed_by_model} by the "
        f"model), moving {c.pods_moved} pods; {c.proved} proved not to fit "
        f"({c.proved_model} by the model, {c.proved_cached} by an earlier proof); "
        f"{c.timeouts} timed out (left unplaced, {doc['timed_out_gpu_pct']:.2f}% of "
        f"capacity); {lim.seconds:.0f} s",
        f"relayout heuristic on the final cluster: {lim.relayout_pct:.2f}% unallocated",
    ]
    if "relaxed_greedy" in doc:
        g = doc["relaxed_greedy"]
        notes.append(
            f"greedy with the LP as the fit test (a reference, not a bound): "
            f"{g['unallocated_gpu_pct']:.2f}% unallocated; {g['lp_calls']} LPs, {g['proved']} "
            f"proofs, {g['timeouts']} timed out (left out); {g['seconds']:.0f} s"
        )
    if "offline" in doc:
        o = doc["offline"]
        notes.append(
            f"offline (any subset of the arrivals): at least {o['lp_unallocated_gpu_pct']:.2f}% "
            f"unallocated by the LP, {o['milp_bound_unallocated_gpu_pct']:.2f}% by the MILP "
            f"bound ({o['status']}, best found {o['milp_best_unallocated_gpu_pct']:.2f}%)"
        )
    print_replay(lim.result, args, data.pods_path, extra=doc, notes=notes)
    return 0


def add_limit_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``limit`` on the gangplace parser."""
    common = argparse.ArgumentParser(add_help=False)
    add_common_arguments(common)
    p = sub.add_parser(
        "limit",
        parents=[common],
        help="replay a trace placing every arrival that any rearrangement fits (the oracle)",
    )
    add_replay_arguments(p)
    p.add_argument(
        "--time-limit",
        type=float,
        default=10.0,
        help="seconds for each exact check of an arrival that fits nowhere (default: 10); "
        "a check that runs out is counted as timed out and the arrival left unplaced",
    )
    p.add_argument(
        "--neighbourhoods",
        default="",
        help="sizes of node sets (e.g. 16,64) the assignment model searches for a packing "
        "before the whole cluster (default: none)",
    )
    p.add_argument(
        "--no-search",
        action="store_true",
        help="skip the engine's move search before the exact model",
    )
    p.add_argument(
        "--exact-moves",
        action="store_true",
        help="after the move search, the fewest moves on neighbourhoods of 2 to 16 nodes, "
        "solved exactly (at most --max-moves pods), before the configuration model",
    )
    p.add_argument(
        "--max-moves",
        type=int,
        default=8,
        help="pods the move search (and --exact-moves) may move (default: 8)",
    )
    p.add_argument(
        "--depth", type=int, default=1, help="how deep a moved pod may move others (default: 1)"
    )
    p.add_argument(
        "--offline-time-limit",
        type=float,
        default=60.0,
        help="seconds for the offline bound's MILP (default: 60; 0 skips the bound)",
    )
    p.add_argument(
        "--retry-after",
        type=int,
        default=25,
        help="after a check that timed out, count an arrival needing at least as much as "
        "timed out again without a new check until this many pods are placed (default: 25)",
    )
    p.add_argument(
        "--relaxed",
        action="store_true",
        help="also replay the greedy rule with the LP as its fit test (minutes on the full trace)",
    )
    p.set_defaults(func=guarded(cmd_limit))
