"""``corral-descheduler``: plan offline on a cluster dump, or run against a cluster.

    corral-descheduler plan [--snapshot FILE] [--config FILE] [--output text|json] [--now T]
    corral-descheduler run (--once | --interval 10m) [--dry-run] [--config FILE] [--kubeconfig F]
    corral-descheduler config        every config key, its default and what it means
    corral-descheduler simulate      trace replay with moves (see simulate_cmd.py)

Exit codes: 0 done, 1 some evictions failed, 2 bad config or input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from gangplace.engine import SnapshotError
from gangplace.snapshot_io import load_list

from .config import ConfigError, DeschedulerConfig, load_config, render_defaults
from .planner import plan
from .render import render_plan
from .simulate_cmd import add_simulate_command
from .state import StateError, state_from_list
from .timeparse import TimeFormatError, parse_duration, parse_time

__all__ = ["SAMPLE", "SNAPSHOT_TIME", "KubeLayerMissing", "main"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
SAMPLE = "sample-fragmented.json"
# A dump may say when it was taken; plans on it are then reproducible without --now.
SNAPSHOT_TIME = "corral.dev/snapshot-time"


class KubeLayerMissing(RuntimeError):
    """``run`` needs the Kubernetes layer (informers, evictor, Lease), not in this build."""


def _load(path: str | None) -> tuple[dict[str, Any], str]:
    if path is None:
        text = resources.files("descheduler.data").joinpath(SAMPLE).read_text()
        return json.loads(text), f"the bundled sample cluster ({SAMPLE})"
    return load_list(path), path


def _now(arg: str | None, doc: dict[str, Any]) -> datetime:
    if arg:
        return parse_time(arg)
    stamp = ((doc.get("metadata") or {}).get("annotations") or {}).get(SNAPSHOT_TIME)
    return parse_time(stamp) if stamp else datetime.now(UTC)


def cmd_plan(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    doc, source = _load(args.snapshot)
    try:
        state = state_from_list(doc, _now(args.now, doc), config.engine)
    except StateError as e:
        raise StateError(f"{source}: {e}") from None
    result = plan(state, config)
    if args.output == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(render_plan(result, source))
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    print(render_defaults(), end="")
    return EXIT_OK


def _kube_runner(args: argparse.Namespace, config: DeschedulerConfig) -> int:
    """Where the Kubernetes layer plugs in: build a RunnerIO from informers, the
    Evictor and a Lease, then ``run_once`` or ``run_loop``."""
    raise KubeLayerMissing(
        "run requires the Kubernetes layer (gangplace.kube: informers, evictor, Lease), "
        "which this build does not include yet; plan offline with "
        "`corral-descheduler plan --snapshot FILE`"
    )


def cmd_run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if args.interval is not None:
        try:
            seconds = parse_duration(args.interval)
        except TimeFormatError as e:
            raise ConfigError(f"--interval: {e}") from None
        if seconds <= 0:
            raise ConfigError("--interval: must be more than zero")
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
        "queues.scheduling.volcano.sh,priorityclasses -A -o json` "
        "(default: the bundled sample cluster)",
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
    when.add_argument("--once", action="store_true", help="one run, then exit (a CronJob)")
    when.add_argument("--interval", help="run every DURATION, e.g. 10m (a Deployment)")
    r.add_argument("--dry-run", action="store_true", help="plan and report, evict nothing")
    r.add_argument("--config", help="descheduler config, YAML")
    r.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube)")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("config", help="print every config key with its default and meaning")
    c.set_defaults(func=cmd_config)
    add_simulate_command(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except (ConfigError, StateError, SnapshotError, TimeFormatError, KubeLayerMissing) as e:
        print(f"corral-descheduler: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return code


if __name__ == "__main__":
    sys.exit(main())
