"""The cluster ``kubectl corral demo --local`` runs on: the in-memory API server with
three Ready nodes of 8 GPUs (as in the recordings), Volcano's ``default`` Queue, corral's
webhook registered as the manifests register it (called over TLS by the server's
admission chain), and the controller models running as a cluster runs its controllers:
the Job controller, the garbage collector, the kubelet, a Volcano-like gang scheduler
(``schedulerName: volcano``) and a pod-by-pod one (``default-scheduler``)."""

from __future__ import annotations

import logging
from types import TracebackType

from gangplace.kube import KubeClient

from tests.controllers import ControllerSet, control_plane
from tests.kubeapi import ApiServer
from tests.kubeapi.recording import node
from tests.scenarios.corral_webhook import CorralWebhook
from tests.scenarios.story import NODES

__all__ = ["LocalCluster"]

PERIOD = 0.02  # seconds between two passes of each model


class LocalCluster:
    """``async with LocalCluster() as c:`` -- ``c.client`` (a KubeClient of it) and
    ``c.description`` (what the demo prints)."""

    description = (
        "the in-memory cluster (corral's test API server with models of the Job "
        "controller, garbage collector, kubelet, Volcano and kube-scheduler; no real "
        "pods run)"
    )

    def __init__(self) -> None:
        self.api = ApiServer(bookmark_interval=0.5)
        self.webhook = CorralWebhook(self.api)
        self.models = ControllerSet()
        self.client: KubeClient

    async def __aenter__(self) -> LocalCluster:
        await self.api.start()
        self.api.store.load(
            [
                *(node(n) for n in NODES),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "corral-system"}},
            ]
        )
        await self.webhook.__aenter__()
        self.models.add(*control_plane(self.api.url, self.api.store, scheduler="both"))
        # A model's failed pass (say, an Event for a namespace the demo just deleted) is
        # kept in ``models.errors``, not printed over the story.
        logging.getLogger("tests.controllers.runner").setLevel(logging.CRITICAL)
        self.models.start(period=PERIOD)
        self.client = self.api.client("kubectl-corral-demo")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.models.stop()
        await self.webhook.__aexit__(exc_type, exc, tb)
        await self.api.stop()
