"""The in-memory API server (tests/kubeapi) with one mutating webhook registered, for
``bench.webhook``: pod creations go through its admission chain, which calls the
webhook over verified TLS with ``?timeout=10s`` and keep-alive, as kube-apiserver does.

    python -m bench._chain PORT WEBHOOK_URL CA_PEM_FILE

Serves plain HTTP on 127.0.0.1:PORT until SIGTERM; namespace ``ml`` exists.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import signal
import sys
from pathlib import Path

from tests.kubeapi import ApiServer
from tests.kubeapi import objects as o


def configuration(url: str, ca_pem: bytes) -> dict[str, object]:
    """One webhook on pod CREATEs, failing closed, as the manifests register corral."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "bench"},
        "webhooks": [
            {
                "name": "bench.corral.dev",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "reinvocationPolicy": "Never",
                "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode()},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                    }
                ],
            }
        ],
    }


async def main(port: int, url: str, ca_file: str) -> None:
    api = ApiServer()
    api.store.load([o.namespace("ml"), configuration(url, Path(ca_file).read_bytes())])
    from aiohttp import web

    runner = web.AppRunner(api.app, access_log=None, shutdown_timeout=0.25)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    while not stop.is_set():
        # Keep what the fake remembers bounded over a long run.
        api.admission.reviews.clear()
        api.log.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
