"""``kubectl corral``: gangs, fragmentation and one pod explained, read-only.

    kubectl corral gangs [-n NS | -A] [-o json]
    kubectl corral frag [--plan] [-o json]
    kubectl corral explain POD [-n NS] [-o json]
    kubectl corral demo [--local | --add-gpus] [--timeout SECONDS]

It finds the cluster as kubectl does (``--kubeconfig``, ``$KUBECONFIG``, in-cluster,
``~/.kube/config``; ``--context``), and the namespace as kubectl does (``-n``, else the
context's, else ``default``). Exit codes: 0 done, 1 the cluster could not be read or
the pod was not found (or the demo could not run, or a step of it went wrong), 2 bad
usage. ``demo`` is the one command that writes (in namespaces of its own).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from gangplace.engine.gangs import membership
from gangplace.engine.node_pod_records import SnapshotError, pod_from_json
from gangplace.engine.report import render_report
from gangplace.kube import (
    REQUEST_ERRORS,
    ApiError,
    KubeClient,
    KubeConfigError,
    client_for,
    load_configuration,
)
from gangplace.kube.resources import PODS

from descheduler.api import (
    ConfigError,
    DeschedulerConfig,
    fragmentation_now,
    load_config,
    move_verdict,
    plan,
    render_plan,
)

from .explain import explain_pod, render_explanation
from .gangs import gang_rows, render_gangs
from .kubeconfig import context_namespace
from .reader import PluginError, Reader, state_of

__all__ = ["build_parser", "main", "run"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kubeconfig", help="kubeconfig file (default: as kubectl finds it)")
    common.add_argument("--context", help="kubeconfig context (default: the current one)")
    common.add_argument("-o", "--output", choices=("text", "json"), default="text")
    common.add_argument(
        "--config",
        metavar="FILE",
        help="the descheduler's config (engine and scheduling settings; default: built-in)",
    )
    common.add_argument(
        "--request-timeout", type=float, default=30.0, metavar="SECONDS", help="per request"
    )
    p = argparse.ArgumentParser(
        prog="kubectl corral",
        description="corral's gangs, read-only: who waits and why, fragmentation, one pod.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("gangs", parents=[common], help="list gangs and why waiting ones wait")
    where = g.add_mutually_exclusive_group()
    where.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    where.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    g.set_defaults(func=cmd_gangs)

    f = sub.add_parser(
        "frag", parents=[common], help="fragmentation report of the cluster (the descheduler's)"
    )
    f.add_argument(
        "--plan", action="store_true", help="also show what the descheduler would move now"
    )
    f.set_defaults(func=cmd_frag)

    e = sub.add_parser(
        "explain", parents=[common], help="a pod's gang, what the webhook wrote, what it waits for"
    )
    e.add_argument("pod", metavar="POD")
    e.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    e.set_defaults(func=cmd_explain)

    d = sub.add_parser(
        "demo",
        help="run corral's story on the cluster (needs corral and Volcano) or, with --local, "
        "on an in-memory one",
        description="Partial gangs, gangs that wait whole, a gang bound whole, and the "
        "descheduler making room, with narration and tables. It works in two namespaces of "
        "its own and deletes everything it made.",
    )
    d.add_argument("--kubeconfig", help="kubeconfig file (default: as kubectl finds it)")
    d.add_argument("--context", help="kubeconfig context (default: the current one)")
    d.add_argument(
        "--request-timeout", type=float, default=30.0, metavar="SECONDS", help="per request"
    )
    where = d.add_mutually_exclusive_group()
    where.add_argument(
        "--local",
        action="store_true",
        help="on an in-memory API server with models of the controllers and schedulers "
        "(from a checkout of corral: they live in its tests)",
    )
    where.add_argument(
        "--add-gpus",
        action="store_true",
        help="on a cluster without GPUs (kind): advertise 8 pretend nvidia.com/gpu on three "
        "nodes for the demo's length",
    )
    d.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long each step may take (default 120)",
    )
    d.set_defaults(func=None)
    return p


class Session:
    """What one command needs: the client, the namespace, the descheduler config."""

    def __init__(
        self, args: argparse.Namespace, client: KubeClient, server: str, environ: Mapping[str, str]
    ) -> None:
        self.args = args
        self.reader = Reader(client)
        self.server = server
        self.namespace: str = getattr(args, "namespace", None) or context_namespace(
            args.kubeconfig, args.context, environ
        )
        try:
            self.config = load_config(args.config) if args.config else DeschedulerConfig()
        except ConfigError as e:
            raise PluginError(str(e)) from None


def _json(out: TextIO, doc: Any) -> None:
    out.write(json.dumps(doc, indent=2) + "\n")


def _notes(err: TextIO, notes: Sequence[str]) -> None:
    for n in notes:
        err.write(f"note: {n}\n")


async def cmd_gangs(s: Session, out: TextIO, err: TextIO) -> int:
    ns = None if s.args.all_namespaces else s.namespace
    reading = await s.reader.cluster(namespace=ns)
    state = state_of(reading, s.config.engine, datetime.now(UTC))
    rows = gang_rows(
        state, namespace=ns, scheduling=s.config.scheduling, default_queue=s.config.queue_default
    )
    if s.args.output == "json":
        _json(out, {"namespace": ns, "gangs": [r.to_dict() for r in rows], "notes": reading.notes})
    else:
        _notes(err, reading.notes)
        if not rows:
            where = "any namespace" if ns is None else f"namespace {ns}"
            out.write(f"No gangs found in {where}.\n")
        else:
            out.write(render_gangs(rows, all_namespaces=ns is None) + "\n")
    return EXIT_OK


async def cmd_frag(s: Session, out: TextIO, err: TextIO) -> int:
    reading = await s.reader.cluster(planner=True)
    state = state_of(reading, s.config.engine, datetime.now(UTC))
    report = fragmentation_now(state, s.config)
    result = plan(state, s.config) if s.args.plan else None
    if s.args.output == "json":
        doc: dict[str, Any] = {"fragmentation": report.to_dict(), "notes": reading.notes}
        if result is not None:
            doc["plan"] = result.to_dict()
        _json(out, doc)
        return EXIT_OK
    _notes(err, reading.notes)
    if result is None:
        out.write(render_report(report, f"GPU fragmentation of {s.server}") + "\n")
    else:
        out.write(render_plan(result, s.server) + "\n")
    return EXIT_OK


async def cmd_explain(s: Session, out: TextIO, err: TextIO) -> int:
    pod = await s.reader.one(PODS, s.args.pod, s.namespace)
    if pod is None:
        raise PluginError(f'pod "{s.args.pod}" not found in namespace {s.namespace}')
    try:
        record = pod_from_json(pod, s.config.engine)
    except SnapshotError as e:
        raise PluginError(str(e)) from None
    reading = await s.reader.cluster(namespace=s.namespace, planner=True)
    state = state_of(reading, s.config.engine, datetime.now(UTC))
    rows = gang_rows(
        state,
        namespace=s.namespace,
        scheduling=s.config.scheduling,
        default_queue=s.config.queue_default,
    )
    labels, why = await s.reader.namespace_labels(s.namespace)
    ex = explain_pod(pod, record, labels, why, rows)
    if record.node_name:
        m = membership(record)
        unit = f"{record.namespace}/{m.gang}" if m else f"{record.namespace}/pod:{record.name}"
        ex.moves = move_verdict(state, s.config, unit)
    if s.args.output == "json":
        _json(out, {**ex.to_dict(), "notes": reading.notes})
    else:
        _notes(err, reading.notes)
        out.write(render_explanation(ex) + "\n")
    return EXIT_OK


async def run(
    argv: Sequence[str] | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    environ: Mapping[str, str] | None = None,
) -> int:
    """The plugin, in the caller's event loop (``main`` runs it in a new one)."""
    import os

    env = os.environ if environ is None else environ
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if args.command == "demo":
        return await cmd_demo(args, out, err, env)
    try:
        cfg = await load_configuration(
            args.kubeconfig, context=args.context, environ=env, prefer_kubeconfig=True
        )
    except KubeConfigError as e:
        err.write(f"kubectl corral: {e}\n")
        return EXIT_FAILED
    client = client_for(cfg, request_timeout=args.request_timeout)
    try:
        session = Session(args, client, str(cfg.host), env)
        code: int = await args.func(session, out, err)
        return code
    except PluginError as e:
        err.write(f"kubectl corral: {e}\n")
        return EXIT_FAILED
    finally:
        await client.close()


async def cmd_demo(
    args: argparse.Namespace, out: TextIO, err: TextIO, env: Mapping[str, str]
) -> int:
    from .demo import Demo, DemoError

    if args.local:
        from .local import LocalUnavailable, local_cluster

        try:
            async with local_cluster() as (client, where):
                return await Demo(client, out, where=where, timeout=args.timeout, poll=0.05).run()
        except LocalUnavailable as e:
            err.write(f"kubectl corral demo --local: {e}\n")
            return EXIT_USAGE
        except DemoError as e:
            err.write(f"kubectl corral demo: {e}\n")
            return EXIT_FAILED
    try:
        cfg = await load_configuration(
            args.kubeconfig, context=args.context, environ=env, prefer_kubeconfig=True
        )
    except KubeConfigError as e:
        err.write(f"kubectl corral: {e}\n")
        return EXIT_FAILED
    client = client_for(cfg, request_timeout=args.request_timeout)
    try:
        demo = Demo(
            client,
            out,
            where=f"the cluster at {cfg.host}",
            add_gpus=args.add_gpus,
            timeout=args.timeout,
        )
        return await demo.run()
    except DemoError as e:
        err.write(f"kubectl corral demo: {e}\n")
        return EXIT_FAILED
    except REQUEST_ERRORS as e:
        err.write(f"kubectl corral demo: cannot reach the API server: {e}\n")
        return EXIT_FAILED
    except ApiError as e:
        err.write(f"kubectl corral demo: the API server refused: {e}\n")
        return EXIT_FAILED
    finally:
        await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(run(argv))


if __name__ == "__main__":
    sys.exit(main())
