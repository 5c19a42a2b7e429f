"""``corral-webhook``: serve the admission webhook, or show it at work (``demo``)."""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gangplace.cli_exit import UsageError, run_command
from gangplace.config_errors import ConfigError
from gangplace.engine import SnapshotError
from gangplace.logs import setup_logging
from gangplace.ports import check_port

from webhook.admission.backends.registry import dialect_for
from webhook.admission.cluster_fit import ClusterCapacity, NoCluster, SnapshotSource, StaticSource
from webhook.admission.entry import admit
from webhook.admission.native_gangs import Served
from webhook.config import WebhookConfig, load_config
from webhook.metrics import WebhookMetrics
from webhook.podgroups.reconciler import PodGroupReconciler
from webhook.server import init_app, run_until_signal, start
from webhook.tls.contexts import server_context
from webhook.tls.rotation import CertReloader, SelfSignedManager
from webhook.tls.store import CertStore, MemoryCertStore

if TYPE_CHECKING:
    from gangplace.kube import KubeClient

__all__ = ["main"]

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_SERVICE = "corral-webhook"
DEFAULT_WEBHOOK_CONFIG = "corral-webhook"
DEFAULT_TLS_SECRET = "corral-webhook-tls"


class StartupError(Exception):
    """The webhook cannot start (exit 1); the message says why."""


def _wants_cluster(args: argparse.Namespace) -> bool:
    return not args.no_cluster and not args.cluster_file


async def _connect(args: argparse.Namespace) -> KubeClient:
    """A client for the API server found as kubectl finds it (see docs/kubernetes.md)."""
    from gangplace.kube import KubeConfigError, new_client

    try:
        return await new_client(args.kubeconfig, context=args.context)
    except KubeConfigError as e:
        raise UsageError(
            f"{e} (or run with --no-cluster: no feasibility warnings, no PodGroups)"
        ) from None


def _cluster_source(
    args: argparse.Namespace, config: WebhookConfig, kube: KubeClient | None
) -> SnapshotSource:
    """The cluster view: none, a dump read once, or informers on the API server."""
    if args.no_cluster:
        return NoCluster()
    if args.cluster_file:
        from gangplace.snapshot_io import load_snapshot

        try:
            snap = load_snapshot(args.cluster_file)
        except SnapshotError as e:
            raise UsageError(str(e)) from None
        return StaticSource(ClusterCapacity.of(snap))
    assert kube is not None
    from webhook.live import InformerSource

    # Each build leaves 100,000s of long-lived records: keep them out of the collector's
    # full passes, which would otherwise pause admission for milliseconds.
    return InformerSource(kube, config.engine, on_build=lambda _stats: gc.freeze())


def _reconciler(
    config: WebhookConfig, kube: KubeClient | None, metrics: WebhookMetrics, served: Served | None
) -> PodGroupReconciler | None:
    """PodGroups are made when there is an API server and the backend has them."""
    if kube is None or not dialect_for(config.backend).makes_objects:
        return None
    from webhook.podgroups.calls import live_reconciler

    return live_reconciler(
        kube,
        config,
        on_outcome=lambda _intent, outcome: metrics.podgroup(outcome),
        served=served,
    )


async def _serve(args: argparse.Namespace, config: WebhookConfig) -> int:
    kube = await _connect(args) if _wants_cluster(args) else None
    try:
        return await _serve_with(args, config, kube)
    finally:
        if kube is not None:
            await kube.close()


async def _serve_with(
    args: argparse.Namespace, config: WebhookConfig, kube: KubeClient | None
) -> int:
    source = _cluster_source(args, config, kube)
    metrics = WebhookMetrics()
    ctx = server_context()
    background: list[Callable[[], Awaitable[None]]] = []
    run = getattr(source, "run", None)
    if run is not None:
        background.append(run)

    def counted(ok: bool) -> None:
        metrics.tls_reloads.labels("ok" if ok else "error").inc()

    namespace = config.own_namespace
    if args.self_signed:
        store: CertStore
        if kube is not None:
            from webhook.tls.store import SecretCertStore

            store = SecretCertStore(
                kube,
                namespace,
                secret=args.tls_secret_name,
                webhook_config=args.webhook_config_name,
                service=args.service_name,
            )
        else:
            store = MemoryCertStore()
        manager = SelfSignedManager(
            ctx,
            store,
            args.service_name,
            namespace,
            check_interval=args.tls_reload_interval,
            on_reload=counted,
        )
        try:
            await manager.ensure()
        except Exception as e:
            if manager.bundle is None:
                raise StartupError(f"--self-signed: no certificate: {e}") from None
            log.warning(
                "serving, but the CA is not published yet; retrying",
                extra={"fields": {"error": str(e)}},
            )
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

    served = None
    if kube is not None:
        from webhook.served import discover

        try:
            served = await discover(kube)
        except Exception as e:  # the API server is reachable but answers badly
            log.warning("discovery failed; no native gangs", extra={"fields": {"error": str(e)}})
    app = init_app(
        config,
        source=source,
        admit_fn=functools.partial(admit, served=served),
        reconciler=_reconciler(config, kube, metrics, served),
        metrics=metrics,
        background=background,
    )
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
    check_port("--port", args.port)
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
    if args.namespace and args.namespace != config.own_namespace:
        # The namespace the webhook runs in is also one it must never touch at admission
        # (its own pods and Secret); the config's ownNamespace stays left alone too.
        # Copied before any cached value is read.
        config = config.model_copy(
            update={
                "own_namespace": args.namespace,
                "excluded_namespaces": (*config.excluded_namespaces, config.own_namespace),
            }
        )
    return _run(_serve(args, config))


def _run(coro: Any) -> int:
    try:
        import uvloop

        return uvloop.run(coro)  # type: ignore[no-any-return]
    except ImportError:
        return asyncio.run(coro)  # type: ignore[no-any-return]


def cmd_demo(args: argparse.Namespace) -> int:
    from webhook.review_demo import FixtureError, run_demo

    setup_logging("warning")
    try:
        return _run(run_demo(args.fixtures, out=sys.stdout))
    except FixtureError as e:
        raise UsageError(str(e)) from None


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
        help="how often to look for a rotated certificate: the files, or with "
        "--self-signed the Secret another replica may have renewed (default 10)",
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
        "--namespace",
        help="the webhook's namespace, left alone at admission (as the config's "
        "ownNamespace stays) and home of its Secret (default: ownNamespace of the config)",
    )
    s.add_argument(
        "--tls-secret-name",
        default=DEFAULT_TLS_SECRET,
        metavar="NAME",
        help="--self-signed with a cluster: the Secret, in the webhook's namespace, that "
        f"keeps the CA and certificate for every replica (default {DEFAULT_TLS_SECRET})",
    )
    s.add_argument(
        "--webhook-config-name",
        default=DEFAULT_WEBHOOK_CONFIG,
        metavar="NAME",
        help="--self-signed with a cluster: the MutatingWebhookConfiguration whose "
        f"caBundle gets the CA (default {DEFAULT_WEBHOOK_CONFIG})",
    )
    s.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig of the cluster (default: $KUBECONFIG, in-cluster, ~/.kube/config)",
    )
    s.add_argument("--context", help="the kubeconfig context to use (default: its current one)")
    where = s.add_mutually_exclusive_group()
    where.add_argument(
        "--no-cluster",
        action="store_true",
        help="run without an API server: no feasibility warnings, no PodGroups",
    )
    where.add_argument(
        "--cluster-file",
        metavar="FILE",
        help="a `kubectl get nodes,pods -A -o json` dump to check feasibility against "
        "(no API server: no PodGroups)",
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
    return run_command(
        "corral-webhook", lambda: int(args.func(args)), (UsageError,), (StartupError,)
    )


if __name__ == "__main__":
    sys.exit(main())
