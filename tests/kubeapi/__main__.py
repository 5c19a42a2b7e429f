"""Run the in-memory API server by itself, for kubectl and other tools:

    python -m tests.kubeapi --kube-version 1.31 --volcano 1.10 --kubeconfig /tmp/kc

writes a kubeconfig for it (its CA certificate and an administrator's token) and serves
HTTPS, as a cluster does, until SIGTERM or SIGINT. It prints one line once it listens:
``serving Kubernetes 1.31, Volcano 1.10 at https://127.0.0.1:PORT (kubeconfig
/tmp/kc)``. Clients send tokens only over HTTPS, so plain HTTP would not do.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import secrets
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import yaml

from tests.kubeapi.server import ApiServer
from tests.kubeapi.tls import server_tls
from tests.kubeapi.versions import KUBE_VERSIONS, VOLCANO_VERSIONS, Release, Versions

__all__ = ["main"]


class UsageError(Exception):
    """A bad option: one line, exit code 2."""


def _release(option: str, text: str, allowed: tuple[Release, ...]) -> Release:
    span = f"{allowed[0]} to {allowed[-1]}"
    try:
        release = Release.parse(text)
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected MAJOR.MINOR, one of {span}") from None
    if release not in allowed:
        raise UsageError(f"{option} {text!r}: not a supported release; supported: {span}")
    return release


def parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m tests.kubeapi",
        description="Serve corral's in-memory Kubernetes API server until SIGTERM or SIGINT.",
    )
    p.add_argument(
        "--kube-version",
        default="1.28",
        help="the Kubernetes release it plays, 1.28 to 1.37 (default 1.28)",
    )
    p.add_argument(
        "--volcano",
        default="1.7",
        help="the Volcano release beside it, 1.7 to 1.15, or 'none' (default 1.7)",
    )
    p.add_argument(
        "--native-gangs",
        action="store_true",
        help="switch the native gang API on (1.35 and later: Workload, PodGroup, "
        "CompositePodGroup of scheduling.k8s.io and the pod's group reference)",
    )
    p.add_argument(
        "--native-apis",
        default="",
        help="with --native-gangs on 1.37: the scheduling.k8s.io versions turned on, "
        "v1alpha3, v1beta1 or both comma-separated (default: both)",
    )
    p.add_argument(
        "--kai",
        action="store_true",
        help="install KAI-Scheduler's CRDs (PodGroup scheduling.run.ai/v2alpha2, Queue v2)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default 0: any free)")
    p.add_argument(
        "--kubeconfig", required=True, type=Path, help="where to write a kubeconfig for it"
    )
    p.add_argument(
        "--token", default="", help="the administrator's bearer token (default: a random one)"
    )
    return p.parse_args(argv)


def versions_of(args: argparse.Namespace) -> Versions:
    kube = _release("--kube-version", args.kube_version, KUBE_VERSIONS)
    volcano = (
        None
        if args.volcano.lower() == "none"
        else _release("--volcano", args.volcano, VOLCANO_VERSIONS)
    )
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: must be 0 (any free port) to 65535")
    if args.native_gangs and kube < Release(1, 35):
        raise UsageError(
            f"--native-gangs: Kubernetes {kube} has no native gang API; it starts with 1.35"
        )
    apis = frozenset(v.strip() for v in args.native_apis.split(",") if v.strip()) or None
    if apis is not None and not args.native_gangs:
        raise UsageError(f"--native-apis {args.native_apis}: needs --native-gangs")
    try:
        return Versions(kube, volcano, None, args.native_gangs, args.kai, apis)
    except ValueError as e:
        raise UsageError(f"--native-apis {args.native_apis}: {e}") from None


def write_kubeconfig(path: Path, url: str, token: str, ca: bytes) -> None:
    cluster = {"server": url, "certificate-authority-data": base64.b64encode(ca).decode()}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "corral-kubeapi", "cluster": cluster}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [
            {
                "name": "corral-kubeapi",
                "context": {"cluster": "corral-kubeapi", "user": "admin", "namespace": "default"},
            }
        ],
        "current-context": "corral-kubeapi",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


async def serve(args: argparse.Namespace, versions: Versions) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    token = args.token or secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="corral-kubeapi-") as tmp:
        ctx, ca_path = server_tls(Path(tmp))
        api = ApiServer(versions=versions, host=args.host, ssl_context=ctx)
        api.accept(token)
        api.store.publish_root_ca(ca_path.read_text())
        await api.start(port=args.port)
        try:
            write_kubeconfig(args.kubeconfig, api.url, token, ca_path.read_bytes())
            print(f"serving {versions} at {api.url} (kubeconfig {args.kubeconfig})", flush=True)
            await stop.wait()
        finally:
            await api.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        versions = versions_of(args)
    except UsageError as e:
        print(f"python -m tests.kubeapi: {e}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(args, versions))
    except OSError as e:
        print(
            f"python -m tests.kubeapi: cannot listen on {args.host}:{args.port}: {e}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
