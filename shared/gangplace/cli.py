"""``gangplace``: the engine's own tools -- a fragmentation report, a gang placement
and a demo on the bundled sample cluster."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from gangplace.cli_exit import EXIT_FAILED, EXIT_OK, run_command, warn
from gangplace.engine import (
    EngineConfig,
    Gang,
    GangOptions,
    PodShape,
    QuantityError,
    ShapeError,
    Snapshot,
    SnapshotError,
    TaskRole,
    place_gang,
)
from gangplace.engine.fragmentation import TargetWorkload, typical_workload
from gangplace.engine.gang import GangError, GangPlacement
from gangplace.engine.report import fragmentation_report, render_nodes, render_report
from gangplace.snapshot_io import load_snapshot

__all__ = ["main"]

# Subcommands contributed by other modules: each adds its parser to the subparsers.
EXTRA_COMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = []


PROBES_FROM = "probes of 1, 4 and 8 GPUs per pod"


def _probe_shapes() -> list[PodShape]:
    return [
        PodShape.of({"cpu": 8000, "memory": 64 * 2**30}, gpus=1),
        PodShape.of({"cpu": 32000, "memory": 256 * 2**30}, gpus=4),
        PodShape.of({"cpu": 64000, "memory": 512 * 2**30}, gpus=8),
    ]


def workload_of(snap: Snapshot) -> TargetWorkload:
    """FGD's target workload: the cluster's typical pods, as the descheduler reads
    them (one rule for every report; none when the dump has no pods)."""
    return typical_workload(snap)


def _shape_from_args(args: argparse.Namespace) -> PodShape:
    return PodShape.typed(args.cpu, args.memory, args.gpus, args.gpu_milli)


def _print_placement(res: GangPlacement) -> None:
    if not res.ok:
        print(f"does not fit: {res.reason}")
        return
    nodes = len(res.nodes())
    print(f"gang {res.gang}: {res.placed} pods placed ({res.required} required) on {nodes} nodes")
    for a in res.assignments:
        gpus = f" GPUs {','.join(map(str, a.gpus))}" if a.gpus else ""
        print(f"  {a.pod:<14} -> {a.node_name}{gpus}")


def _load(path: str | None) -> Snapshot:
    """The dump (or the sample), its warnings printed on stderr."""
    notes: list[str] = []
    snap = load_snapshot(path, EngineConfig(), notes)
    warn("gangplace", notes)
    return snap


def cmd_report(args: argparse.Namespace) -> int:
    snap = _load(args.snapshot)
    rep = fragmentation_report(snap, workload_of(snap), _probe_shapes(), probes_from=PROBES_FROM)
    if args.json:
        print(json.dumps(rep.to_dict(with_nodes=args.per_node), indent=2))
        return EXIT_OK
    print(render_report(rep, f"GPU fragmentation of {args.snapshot or 'the sample cluster'}"))
    if args.per_node:
        print()
        print("Every GPU node, most fragmented first:")
        print(render_nodes(rep))
    return EXIT_OK


def _check_pods(pods: int) -> None:
    """The engine places gangs of any size, 0 included (a role may have none); a gang
    asked for on the command line has at least one pod."""
    if pods < 1:
        raise GangError(f"--pods {pods}: a gang needs at least 1 pod")


def _check_topology_key(snap: Snapshot, key: str | None) -> None:
    """A ``--topology-key`` no node carries is a typo: with it the gang would be kept
    within nothing and spread over any nodes, so it is refused, with the keys there are."""
    if not key or any(key in n.labels for n in snap.nodes):
        return
    seen = sorted({k for n in snap.nodes for k in n.labels if "topology" in k or "zone" in k})
    there = f"; topology labels on the nodes: {', '.join(seen)}" if seen else ""
    raise GangError(f"--topology-key {key}: no node in the dump has this label{there}")


def cmd_place(args: argparse.Namespace) -> int:
    _check_pods(args.pods)
    snap = _load(args.snapshot)
    _check_topology_key(snap, args.topology_key)
    gang = Gang.uniform(args.name, _shape_from_args(args), args.pods, args.min_available)
    res = place_gang(snap, gang, options=GangOptions(topology_key=args.topology_key))
    if args.json:
        print(
            json.dumps(
                {
                    "gang": res.gang,
                    "ok": res.ok,
                    "required": res.required,
                    "reason": res.reason,
                    "assignments": [
                        {"pod": a.pod, "node": a.node_name, "gpus": list(a.gpus)}
                        for a in res.assignments
                    ],
                },
                indent=2,
            )
        )
    else:
        _print_placement(res)
    return EXIT_OK if res.ok else EXIT_FAILED


def cmd_demo(args: argparse.Namespace) -> int:
    snap = _load(None)
    print(
        render_report(
            fragmentation_report(snap, workload_of(snap), _probe_shapes(), probes_from=PROBES_FROM),
            "GPU fragmentation of the bundled sample cluster",
        )
    )
    print()
    worker = PodShape.of({"cpu": 32000, "memory": 256 * 2**30}, gpus=4)
    launcher = PodShape.of({"cpu": 2000, "memory": 4 * 2**30})
    job = Gang("pytorch-llama", (TaskRole("launcher", launcher, 1), TaskRole("worker", worker, 4)))
    print("Placing gang pytorch-llama: 1 launcher + 4 workers x 4 GPUs, all or nothing")
    _print_placement(
        place_gang(snap, job, options=GangOptions(topology_key="topology.corral.dev/rack"))
    )
    print()
    big = Gang.uniform("mpi-train", PodShape.of({"cpu": 64000, "memory": 512 * 2**30}, gpus=8), 2)
    print("Placing gang mpi-train: 2 workers x 8 GPUs, all or nothing")
    _print_placement(place_gang(snap, big))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gangplace", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="report and gang placements on the bundled sample cluster")
    d.set_defaults(func=cmd_demo)

    r = sub.add_parser("report", help="fragmentation report of a cluster dump")
    r.add_argument(
        "--snapshot", help="kubectl get nodes,pods -A -o json output (default: the sample)"
    )
    r.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    r.add_argument(
        "--per-node",
        action="store_true",
        help="also every GPU node: idle, fragmented and stranded GPUs, free CPU "
        "(with --json: a nodes list)",
    )
    r.set_defaults(func=cmd_report)

    pl = sub.add_parser("place", help="place a gang of identical pods, all or nothing")
    pl.add_argument(
        "--snapshot", help="kubectl get nodes,pods -A -o json output (default: the sample)"
    )
    pl.add_argument("--name", default="gang", help="gang name (default: gang)")
    pl.add_argument("--pods", type=int, required=True, help="gang size")
    pl.add_argument(
        "--min-available", type=int, help="members that must start together (default: all)"
    )
    pl.add_argument("--cpu", default="1", help="CPU per pod, a quantity (default: 1)")
    pl.add_argument("--memory", default="1Gi", help="memory per pod, a quantity (default: 1Gi)")
    pl.add_argument("--gpus", type=int, help="GPUs per pod (default: 0, or 1 with --gpu-milli)")
    pl.add_argument(
        "--gpu-milli", type=int, default=None, help="thousandths of one GPU, for a shared GPU"
    )
    pl.add_argument("--topology-key", help="node label to keep the gang within (a rack or zone)")
    pl.add_argument("--json", action="store_true", help="one JSON object instead of text")
    pl.set_defaults(func=cmd_place)

    from gangplace.sim.replay_command import add_replay_commands

    add_replay_commands(sub)
    from gangplace.sim.limit_command import add_limit_command

    add_limit_command(sub)
    for add in EXTRA_COMMANDS:
        add(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(
        "gangplace",
        lambda: int(args.func(args)),
        (SnapshotError, ShapeError, QuantityError, GangError, ValueError, OSError),
    )


if __name__ == "__main__":
    sys.exit(main())
