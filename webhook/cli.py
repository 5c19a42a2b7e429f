"""``corral-webhook``: serve the admission webhook, or show it at work (``demo``)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from gangplace.engine import SnapshotError

from .cluster import ClusterState, NoCluster, SnapshotSource, StaticSource
from .config import ConfigError, WebhookConfig, load_config
from .logs import setup_logging
from .metrics import Metrics
from .server import init_app, run_until_signal, start
from .tls import (
    CertReloader,
    MemoryCertStore,
    SelfSignedManager,
    server_context,
)

__all__ = ["main"]

log = logging.getLogger("webhook.cli")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_SERVICE = "corral-webhook"


class UsageError(Exception):
    """A command line or file that cannot be used; the message says what to change."""


def _cluster_source(args: argparse.Namespace) -> SnapshotSource:
    """The cluster view: none, a dump read once, or (phase 2) informers."""
    if args.no_cluster:
        return NoCluster()
    if args.cluster_file:
        from gangplace.snapshot_io import load_snapshot

        try:
            snap = load_snapshot(args.cluster_file)
        except SnapshotError as e:
            raise UsageError(str(e)) from None
        return StaticSource(ClusterState.of(snap))
    raise UsageError(
        "this build has no Kubernetes client yet: run with --no-cluster (no feasibility "
        "warnings, no PodGroups) or --cluster-file FILE (a `kubectl get nodes,pods -A "
        "-o json` dump for feasibility warnings)"
    )


async def _serve(args: argparse.Namespace, config: WebhookConfig) -> int:
    source = _cluster_source(args)
    metrics = Metrics()
    ctx = server_context()
    background: list[Callable[[], Awaitable[None]]] = []

    def counted(ok: bool) -> None:
        metrics.tls_reloads.labels("ok" if ok else "error").inc()

    namespace = args.namespace or config.own_namespace
    if args.self_signed:
        manager = SelfSignedManager(
            ctx, MemoryCertStore(), args.service_name, namespace, on_reload=counted
        )
        await manager.ensure()
        background.append(manager.run)
    else:
        reloader = CertReloader(
            ctx,
            args.tls_cert_file,
            args.tls_key_file,
            interval=args.tls_reload_interval,
            on_reload=counted,
        )
        try:
            reloader.load()
        except (OSError, ValueError) as e:
            raise UsageError(f"--tls-cert-file/--tls-key-file: {e}") from None
        background.append(reloader.run)

    app = init_app(config, source=source, metrics=metrics, background=background)
    runner, port = await start(
        app, args.host, args.port, ctx, shutdown_timeout=args.shutdown_timeout
    )
    # Everything loaded so far (the engine, pydantic, TLS) lives as long as the process:
    # keep it out of the collector's reach, so full collections stay short.
    gc.freeze()
    log.info(
        "serving",
        extra={
            "fields": {
                "address": f"https://{args.host}:{port}",
                "backend": config.backend.value,
                "cluster": type(source).__name__,
            }
        },
    )
    await run_until_signal(runner, args.shutdown_delay)
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        raise UsageError("--tls-cert-file and --tls-key-file go together")
    if not args.self_signed and not args.tls_cert_file:
        raise UsageError("give --tls-cert-file and --tls-key-file, or --self-signed")
    if args.self_signed and args.tls_cert_file:
        raise UsageError("--self-signed and --tls-cert-file exclude each other")
    try:
        config = load_config(args.config)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    return _run(_serve(args, config))


def _run(coro: Any) -> int:
    try:
        import uvloop

        return uvloop.run(coro)  # type: ignore[no-any-return]
    except ImportError:
        return asyncio.run(coro)  # type: ignore[no-any-return]


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    setup_logging("warning")
    return _run(run_demo(args.fixtures, out=sys.stdout))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="corral-webhook",
        description="corral's mutating admission webhook: gangs at admission.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="serve POST /mutate over HTTPS")
    s.add_argument("--config", metavar="FILE", help="YAML config (default: Volcano defaults)")
    s.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    s.add_argument("--port", type=int, default=8443, help="port (default 8443)")
    s.add_argument("--tls-cert-file", metavar="FILE", help="serving certificate (PEM)")
    s.add_argument("--tls-key-file", metavar="FILE", help="its private key (PEM)")
    s.add_argument(
        "--tls-reload-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often to look for a rotated certificate (default 10)",
    )
    s.add_argument(
        "--self-signed",
        action="store_true",
        help="make a CA and serving certificate for the Service's DNS names",
    )
    s.add_argument(
        "--service-name",
        default=DEFAULT_SERVICE,
        help=f"the webhook's Service, for --self-signed (default {DEFAULT_SERVICE})",
    )
    s.add_argument(
        "--namespace", help="the webhook's namespace (default: ownNamespace of the config)"
    )
    where = s.add_mutually_exclusive_group()
    where.add_argument(
        "--no-cluster",
        action="store_true",
        help="run without an API server: no feasibility warnings, no PodGroups",
    )
    where.add_argument(
        "--cluster-file",
        metavar="FILE",
        help="a `kubectl get nodes,pods -A -o json` dump to check feasibility against",
    )
    s.add_argument(
        "--shutdown-timeout",
        type=float,
        default=25.0,
        metavar="SECONDS",
        help="how long in-flight reviews may take after SIGTERM (default 25)",
    )
    s.add_argument(
        "--shutdown-delay",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="after SIGTERM, keep answering (not ready) this long before closing, while "
        "the Service stops sending reviews here (default 5)",
    )
    s.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    s.set_defaults(func=cmd_serve)

    d = sub.add_parser(
        "demo",
        help="start the webhook locally and show what it does to the fixture workloads",
    )
    d.add_argument(
        "--fixtures",
        metavar="DIR",
        type=Path,
        help="AdmissionReview JSON files (default: ../shared/fixtures/admission, "
        "else the copies bundled with corral)",
    )
    d.set_defaults(func=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except UsageError as e:
        print(f"corral-webhook: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
