"""``corral-descheduler``: plan offline on a cluster dump, or run against a cluster.

    corral-descheduler plan [--snapshot FILE|sample:trace|sample:small] [--config FILE]
                            [--output text|json] [--now T]
    corral-descheduler run (--once | --interval [10m]) [--dry-run] [--config FILE]
                           [--kubeconfig F] [--lease-name N] [--lease-namespace NS]
                           [--metrics-host H] [--metrics-port P] [--output text|json]
    corral-descheduler config        every config key, its default and what it means
    corral-descheduler simulate      trace replay with moves (see replay_with_moves.py)
    corral-descheduler study         gangs over time with and without a descheduler

Exit codes: 0 done, 1 some evictions failed (or the cluster could not be read), 2 bad
config or input, 3 the Lease was lost part way through a run (the gang begun finished).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from gangplace.cli_exit import UsageError, run_command, warn
from gangplace.config_errors import ConfigError
from gangplace.engine import SnapshotError
from gangplace.engine.timeparse import TimeFormatError, parse_duration
from gangplace.ports import check_port

from descheduler.config import DeschedulerConfig, load_config, render_defaults
from descheduler.dump_state import SAMPLE, SAMPLES, SNAPSHOT_TIME, read_dump
from descheduler.planning.planner import plan
from descheduler.planning.state import StateError
from descheduler.render import render_plan
from descheduler.replay_with_moves_command import add_simulate_command
from descheduler.study_command import add_study_command

__all__ = ["SAMPLE", "SAMPLES", "SNAPSHOT_TIME", "main"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def cmd_plan(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    dump = read_dump(args.snapshot, args.now, config.engine, config.kinds)
    warn("corral-descheduler", dump.notes)
    result = plan(dump.state, config)
    if args.output == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(render_plan(result, dump.source))
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    print(render_defaults(), end="")
    return EXIT_OK


def _kube_runner(args: argparse.Namespace, config: DeschedulerConfig) -> int:
    """Against the cluster: informers, the Evictor and (in a loop) a Lease; see
    :mod:`descheduler.running.process`. Imported here so that ``plan`` never loads the client."""
    import asyncio

    from gangplace.kube import KubeConfigError
    from gangplace.logs import setup_logging

    from descheduler.running.process import (
        DEFAULT_LEASE,
        RunOptions,
        default_namespace,
        run_descheduler,
    )

    setup_logging(args.log_level)
    once = bool(args.once)
    lease = args.lease_name if args.lease_name is not None else (None if once else DEFAULT_LEASE)
    opts = RunOptions(
        once=once,
        interval=args.interval_seconds or config.runner.interval,
        dry_run=args.dry_run,
        kubeconfig=args.kubeconfig,
        lease_name=lease or None,
        lease_namespace=args.lease_namespace or default_namespace(),
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port,
        sync_timeout=args.sync_timeout,
        output=args.output,
    )
    if opts.lease_duration < 1:
        raise ConfigError(f"--lease-duration: at least 1 second, got {opts.lease_duration:g}")
    if not 0 < opts.retry_period < opts.renew_deadline < opts.lease_duration:
        raise ConfigError(
            "need 0 < --retry-period < --renew-deadline < --lease-duration, got "
            f"{opts.retry_period:g}, {opts.renew_deadline:g}, {opts.lease_duration:g}"
        )
    try:
        return asyncio.run(run_descheduler(opts, config))
    except KubeConfigError as e:
        raise ConfigError(str(e)) from None


def cmd_run(args: argparse.Namespace) -> int:
    check_port("--metrics-port", args.metrics_port)
    config = load_config(args.config)
    args.interval_seconds = None
    if not args.once and args.interval is None:
        raise ConfigError("run: give --once (a CronJob) or --interval [DURATION] (a Deployment)")
    if args.interval:
        try:
            seconds = parse_duration(args.interval)
        except TimeFormatError as e:
            raise ConfigError(f"--interval: {e}") from None
        if seconds <= 0:
            raise ConfigError("--interval: must be more than zero")
        args.interval_seconds = seconds
        # One interval for the loop and for the limits a run cut short passes on.
        runner = config.runner.model_copy(update={"interval": seconds})
        config = config.model_copy(update={"runner": runner})
    return _kube_runner(args, config)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="corral-descheduler",
        description="Move whole gangs to make room for waiting gangs, and defragment GPU nodes.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    pl = sub.add_parser("plan", help="plan offline on a cluster dump; evicts nothing")
    pl.add_argument(
        "--snapshot",
        help="output of `kubectl get nodes,pods,pdb,podgroups.scheduling.volcano.sh,"
        "queues.scheduling.volcano.sh,priorityclasses,jobs -A -o json` (with the other "
        "workloads whose pods run: jobsets, pytorchjobs, rayjobs...), or a bundled sample: "
        "sample:trace (the default: a fragmented cluster of Alibaba trace nodes) or "
        "sample:small (a hand-built one)",
    )
    pl.add_argument("--config", help="descheduler config, YAML (default: built-in defaults)")
    pl.add_argument("--output", choices=("text", "json"), default="text")
    pl.add_argument(
        "--now",
        help="plan as of this RFC 3339 time (default: the dump's corral.dev/snapshot-time "
        "annotation, else the clock)",
    )
    pl.set_defaults(func=cmd_plan)

    r = sub.add_parser("run", help="plan and evict against the cluster")
    when = r.add_mutually_exclusive_group()
    when.add_argument(
        "--once",
        action="store_true",
        help="one run, then exit (a CronJob); no leader election unless --lease-name",
    )
    when.add_argument(
        "--interval",
        nargs="?",
        const="",
        metavar="DURATION",
        help="run every DURATION, e.g. 10m (a Deployment; default: runner.interval of the "
        "config), under leader election, serving /healthz and /metrics",
    )
    r.add_argument(
        "--dry-run", action="store_true", help="plan and report, evict nothing (or runner.dry_run)"
    )
    r.add_argument("--config", help="descheduler config, YAML")
    r.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: $KUBECONFIG, in-cluster, then ~/.kube/config)",
    )
    r.add_argument(
        "--lease-name",
        help="the Lease of leader election (default with --interval: corral-descheduler, "
        "'' for none; with --once: none, no election)",
    )
    r.add_argument(
        "--lease-namespace",
        help="namespace of the Lease and of the move ledger ConfigMap (default: "
        "$POD_NAMESPACE, else the service account's namespace, else corral-system)",
    )
    r.add_argument("--lease-duration", type=float, default=15.0, metavar="SECONDS")
    r.add_argument("--renew-deadline", type=float, default=10.0, metavar="SECONDS")
    r.add_argument("--retry-period", type=float, default=2.0, metavar="SECONDS")
    r.add_argument(
        "--metrics-host", default="0.0.0.0", help="address of /healthz and /metrics (--interval)"
    )
    r.add_argument(
        "--metrics-port", type=int, default=8080, help="port of /healthz and /metrics (8080)"
    )
    r.add_argument(
        "--sync-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long to wait for the informers' first list (--once exits 1 after it)",
    )
    r.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="--once: the report on stdout (logs are JSON lines on stderr)",
    )
    r.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("config", help="print every config key with its default and meaning")
    c.set_defaults(func=cmd_config)
    add_simulate_command(sub)
    add_study_command(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(
        "corral-descheduler",
        lambda: int(args.func(args)),
        (ConfigError, UsageError, StateError, SnapshotError, TimeFormatError),
    )


if __name__ == "__main__":
    sys.exit(main())
