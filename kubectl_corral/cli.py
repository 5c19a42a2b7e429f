"""``kubectl corral``: gangs, fragmentation and one pod explained, read-only.

    kubectl corral gangs [-n NS | -A] [-o json] [--snapshot FILE]
    kubectl corral frag [--plan] [--png FILE] [-o json] [--snapshot FILE]
    kubectl corral explain POD [-n NS] [-o json] [--snapshot FILE]
    kubectl corral demo [--local | --add-gpus] [--timeout SECONDS]

It finds the cluster as kubectl does (``--kubeconfig``, ``$KUBECONFIG``, in-cluster,
``~/.kube/config``; ``--context``), and the namespace as kubectl does (``-n``, else the
context's, else ``default``). Exit codes: 0 done, 1 the cluster could not be read or
the pod was not found (or the demo could not run, or a step of it went wrong), 2 bad
usage (a flag, config or ``--snapshot`` dump that cannot be used). With ``--snapshot``
it reads a dump, as ``corral-descheduler plan --snapshot`` does, and no cluster.
``demo`` is the one command that writes (in namespaces of its own).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from gangplace.cli_exit import UsageError, one_line, run_command, warn
from gangplace.engine.membership import membership
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
from gangplace.plotting import pyplot

from descheduler.api import (
    DUMP_ERRORS,
    ClusterState,
    ConfigError,
    DeschedulerConfig,
    DumpState,
    build_views,
    demand_of,
    dump_objects,
    fragmentation_now,
    load_config,
    move_verdict,
    plan,
    read_dump,
    render_plan,
    waiting_order,
)
from kubectl_corral.explain import explain_pod, render_explanation
from kubectl_corral.frag_picture import draw_frag
from kubectl_corral.gang_table import BLOCKED, gang_rows, render_gangs
from kubectl_corral.namespace import context_namespace
from kubectl_corral.reader import PluginError, Reader, state_of
from kubectl_corral.room import room_for, scattered_gpus

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
    common.add_argument(
        "--snapshot",
        metavar="FILE",
        help="read a cluster dump instead of the cluster: the input of `corral-descheduler "
        "plan --snapshot` (a file, or sample:trace / sample:small); add namespaces to the "
        "dump for explain's namespace check",
    )
    common.add_argument(
        "--now",
        help="with --snapshot: as of this RFC 3339 time (default: the dump's "
        "corral.dev/snapshot-time annotation, else the clock)",
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
    f.add_argument(
        "--png",
        metavar="FILE",
        help="also draw every GPU node's GPUs (used, idle, fragmented, by GPU model) to a PNG "
        "file; with --plan, before and after the plan (needs the plot extra: "
        "pip install 'corral[plot]')",
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
        "(they live in corral's tests: from a checkout, `make demo`)",
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
    """What one command needs: where the cluster comes from (the API server, or a dump
    with ``--snapshot``), the namespace and the descheduler config."""

    def __init__(
        self,
        args: argparse.Namespace,
        client: KubeClient | None,
        server: str,
        environ: Mapping[str, str],
    ) -> None:
        self.args = args
        self.reader = Reader(client) if client is not None else None
        self.server = server
        self.namespace: str = getattr(args, "namespace", None) or context_namespace(
            args.kubeconfig, args.context, environ
        )
        try:
            self.config = load_config(args.config) if args.config else DeschedulerConfig()
        except ConfigError as e:
            raise UsageError(str(e)) from None
        self.dump: DumpState | None = None
        if args.snapshot:
            try:
                self.dump = read_dump(
                    args.snapshot, args.now, self.config.engine, self.config.kinds
                )
            except DUMP_ERRORS as e:
                raise UsageError(str(e)) from None
            self.server = self.dump.source
        elif args.now:
            raise UsageError("--now: only with --snapshot (a live cluster is read as it is now)")

    async def state(self, namespace: str | None, planner: bool) -> tuple[ClusterState, list[str]]:
        """The planner's state and notes on what was left out: the dump's (the same
        reader and state as ``corral-descheduler plan --snapshot``), else the cluster's."""
        if self.dump is not None:
            return self.dump.state, list(self.dump.notes)
        assert self.reader is not None
        reading = await self.reader.cluster(namespace=namespace, planner=planner)
        return state_of(reading, self.config.engine, datetime.now(UTC)), reading.notes

    async def pod(self, name: str, namespace: str) -> dict[str, Any] | None:
        if self.dump is None:
            assert self.reader is not None
            return await self.reader.one(PODS, name, namespace)
        return next((x for x in dump_objects(self.dump, "Pod") if _named(x, name, namespace)), None)

    async def namespace_labels(self, name: str) -> tuple[dict[str, str] | None, str]:
        if self.dump is None:
            assert self.reader is not None
            return await self.reader.namespace_labels(name)
        found = next((x for x in dump_objects(self.dump, "Namespace") if _named(x, name)), None)
        if found is None:
            return (
                None,
                f"namespace {name} is not in the dump; add namespaces to the dump to check it",
            )
        labels = (found.get("metadata") or {}).get("labels") or {}
        return (dict(labels) if isinstance(labels, dict) else {}), ""


def _named(obj: Mapping[str, Any], name: str, namespace: str | None = None) -> bool:
    meta = obj.get("metadata") or {}
    return meta.get("name") == name and (namespace is None or meta.get("namespace") == namespace)


def _json(out: TextIO, doc: Any) -> None:
    out.write(json.dumps(doc, indent=2) + "\n")


def _notes(err: TextIO, notes: Sequence[str]) -> None:
    """What was read but left out, as every corral command says it (docs/cli.md)."""
    warn("kubectl corral", list(notes), err)


async def cmd_gangs(s: Session, out: TextIO, err: TextIO) -> int:
    ns = None if s.args.all_namespaces else s.namespace
    state, notes = await s.state(ns, planner=False)
    rows = gang_rows(
        state,
        namespace=ns,
        scheduling=s.config.scheduling,
        default_queue=s.config.queue_default,
        order=waiting_order(state, s.config),
    )
    if s.args.output == "json":
        _json(out, {"namespace": ns, "gangs": [r.to_dict() for r in rows], "notes": notes})
    else:
        _notes(err, notes)
        if not rows:
            where = "any namespace" if ns is None else f"namespace {ns}"
            out.write(f"No gangs found in {where}.\n")
        else:
            out.write(render_gangs(rows, all_namespaces=ns is None) + "\n")
    return EXIT_OK


async def cmd_frag(s: Session, out: TextIO, err: TextIO) -> int:
    if s.args.png:
        pyplot()  # before any work: without matplotlib, say so at once
    state, notes = await s.state(None, planner=True)
    report = fragmentation_now(state, s.config)
    result = plan(state, s.config) if s.args.plan else None
    if s.args.png:
        after = result.report_after if result is not None else None
        draw_frag(s.args.png, f"GPUs of {s.server}", report, after)
    if s.args.output == "json":
        doc: dict[str, Any] = {"fragmentation": report.to_dict(), "notes": notes}
        if result is not None:
            doc["plan"] = result.to_dict()
        _json(out, doc)
        return EXIT_OK
    _notes(err, notes)
    if result is None:
        out.write(render_report(report, f"GPU fragmentation of {s.server}") + "\n")
    else:
        out.write(render_plan(result, s.server) + "\n")
    if s.args.png:
        out.write(f"\nPicture: {s.args.png}\n")
    return EXIT_OK


async def cmd_explain(s: Session, out: TextIO, err: TextIO) -> int:
    pod = await s.pod(s.args.pod, s.namespace)
    if pod is None:
        where = " in the dump" if s.dump is not None else ""
        raise PluginError(f'pod "{s.args.pod}" not found in namespace {s.namespace}{where}')
    try:
        record = pod_from_json(pod, s.config.engine)
    except SnapshotError as e:
        raise PluginError(str(e)) from None
    # The whole cluster, as frag --plan reads it: the planner asked what it would move
    # for this gang sees every waiting gang, and so makes the same plan.
    state, notes = await s.state(None, planner=True)
    rows = gang_rows(
        state,
        namespace=s.namespace,
        scheduling=s.config.scheduling,
        default_queue=s.config.queue_default,
        order=waiting_order(state, s.config),
        ask=(record.namespace, record.name),
    )
    labels, why = await s.namespace_labels(s.namespace)
    ex = explain_pod(pod, record, labels, why, rows)
    if ex.gang_state is not None and ex.gang_state.status == BLOCKED:
        key = f"{ex.gang_state.namespace}/{ex.gang_state.name}"
        view = build_views(state, s.config.queue_default).get(key)
        demand = demand_of(view) if view is not None else None
        if demand is not None:
            ex.scattered = scattered_gpus(state.snapshot, demand.gang)
        ex.room = room_for(plan(state, s.config), key)
    if record.node_name:
        m = membership(record)
        unit = f"{record.namespace}/{m.gang}" if m else f"{record.namespace}/pod:{record.name}"
        ex.moves = move_verdict(state, s.config, unit)
    if s.args.output == "json":
        _json(out, {**ex.to_dict(), "notes": notes})
    else:
        _notes(err, notes)
        out.write(render_explanation(ex) + "\n")
    return EXIT_OK


async def _command(
    args: argparse.Namespace, session: Callable[[], Session], out: TextIO, err: TextIO
) -> int:
    """Run the chosen command on the session ``session()`` makes (a snapshot is read
    there); a usage error or a failure it names is one line."""
    try:
        code: int = await args.func(session(), out, err)
        return code
    except UsageError as e:
        err.write(f"kubectl corral: {one_line(e)}\n")
        return EXIT_USAGE
    except PluginError as e:
        err.write(f"kubectl corral: {one_line(e)}\n")
        return EXIT_FAILED


async def run(
    argv: Sequence[str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """The plugin, in the caller's event loop (``main`` runs it in a new one); it writes
    to ``out`` and ``err``, else to sys.stdout and sys.stderr as they are when it runs."""
    import os

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    env = os.environ if environ is None else environ
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if args.command == "demo":
        return await cmd_demo(args, out, err, env)
    if args.snapshot:
        return await _command(args, lambda: Session(args, None, "", env), out, err)
    try:
        cfg = await load_configuration(
            args.kubeconfig, context=args.context, environ=env, prefer_kubeconfig=True
        )
    except KubeConfigError as e:
        err.write(f"kubectl corral: {e}\n")
        return EXIT_FAILED
    client = client_for(cfg, request_timeout=args.request_timeout)
    try:
        return await _command(args, lambda: Session(args, client, str(cfg.host), env), out, err)
    finally:
        await client.close()


async def cmd_demo(
    args: argparse.Namespace, out: TextIO, err: TextIO, env: Mapping[str, str]
) -> int:
    from kubectl_corral.demo import Demo, DemoError

    if args.local:
        from kubectl_corral.local import LocalUnavailable, local_cluster

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
    return run_command("kubectl corral", lambda: asyncio.run(run(argv)), (UsageError,))


if __name__ == "__main__":
    sys.exit(main())
