"""The cluster as the engine sees it: informers for nodes, pods and the objects around
them, and cheap engine snapshots built from their compact records.

Building a :class:`~gangplace.engine.Snapshot` walks every pod, so it never belongs on a
request path. :class:`SnapshotFeed` rebuilds one in a worker thread whenever the cache
changed and keeps the latest ready for the webhook to read.
"""

from __future__ import annotations

import asyncio
import logging
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

from gangplace.engine import EngineConfig, NodeRecord, PodRecord, PodShape, Snapshot
from gangplace.engine.node_pod_records import node_from_json, pod_from_json
from gangplace.engine.objects import (
    NamespaceRecord,
    PdbRecord,
    PodGroupRecord,
    PriorityClassRecord,
    QueueRecord,
    namespace_from_json,
    pdb_from_json,
    podgroup_from_json,
    priority_class_from_json,
    queue_from_json,
)
from gangplace.kube.client import KubeClient
from gangplace.kube.informer import Informer, Json
from gangplace.kube.resources import (
    COSCHED_PODGROUPS,
    NAMESPACES,
    NODES,
    NON_TERMINAL_PODS,
    PDBS,
    PODS,
    PRIORITY_CLASSES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
)
from gangplace.kube.task import BackgroundTask

__all__ = ["ClusterCache", "SnapshotFeed", "build_snapshot", "pod_converter"]

log = logging.getLogger(__name__)

# The fields a PodRecord is constructed from, in order; copying through the constructor
# is the fastest way to give each snapshot records of its own.
_POD_INIT = operator.attrgetter(*(f.name for f in fields(PodRecord) if f.init))


def build_snapshot(
    nodes: Sequence[NodeRecord], pods: Sequence[PodRecord], config: EngineConfig
) -> Snapshot:
    """A snapshot over copies of the pod records: a snapshot writes its bindings into the
    records it holds, so two snapshots must never share one (node records are only read)."""
    return Snapshot(nodes, [PodRecord(*_POD_INIT(p)) for p in pods], config)


def pod_converter(
    config: EngineConfig, shapes: dict[PodShape, PodShape]
) -> Callable[[Json], PodRecord]:
    """Pod JSON to a compact record; equal shapes are shared through ``shapes``."""

    def convert(obj: Json) -> PodRecord:
        return pod_from_json(obj, config, shapes)

    return convert


class ClusterCache:
    """Informers for the engine (nodes, pods) and, on request, for what the webhook and
    descheduler read beside them.

    Pods are watched with ``pod_field_selector`` (default: only pods that are not
    finished), so the cache holds what occupies or wants capacity.
    """

    def __init__(
        self,
        client: KubeClient,
        config: EngineConfig | None = None,
        *,
        pod_field_selector: str | None = NON_TERMINAL_PODS,
        namespaces: bool = False,
        pdbs: bool = False,
        priority_classes: bool = False,
        volcano: bool = False,
        coscheduling: bool = False,
        page_size: int = 500,
        watch_timeout: int = 300,
    ) -> None:
        self.config = config or EngineConfig()
        self.shapes: dict[PodShape, PodShape] = {}
        kw: dict[str, Any] = {"page_size": page_size, "watch_timeout": watch_timeout}
        cfg = self.config
        self.nodes: Informer[NodeRecord] = Informer(
            client, NODES, lambda o: node_from_json(o, cfg), **kw
        )
        self.pods: Informer[PodRecord] = Informer(
            client, PODS, pod_converter(cfg, self.shapes), field_selector=pod_field_selector, **kw
        )
        self.namespaces: Informer[NamespaceRecord] | None = (
            Informer(client, NAMESPACES, namespace_from_json, **kw) if namespaces else None
        )
        self.pdbs: Informer[PdbRecord] | None = (
            Informer(client, PDBS, pdb_from_json, **kw) if pdbs else None
        )
        self.priority_classes: Informer[PriorityClassRecord] | None = (
            Informer(client, PRIORITY_CLASSES, priority_class_from_json, **kw)
            if priority_classes
            else None
        )
        self.volcano_podgroups: Informer[PodGroupRecord] | None = None
        self.volcano_queues: Informer[QueueRecord] | None = None
        if volcano:
            self.volcano_podgroups = Informer(
                client,
                VOLCANO_PODGROUPS,
                lambda o: podgroup_from_json(o, VOLCANO_PODGROUPS.group),
                **kw,
            )
            self.volcano_queues = Informer(client, VOLCANO_QUEUES, queue_from_json, **kw)
        self.cosched_podgroups: Informer[PodGroupRecord] | None = (
            Informer(
                client,
                COSCHED_PODGROUPS,
                lambda o: podgroup_from_json(o, COSCHED_PODGROUPS.group),
                **kw,
            )
            if coscheduling
            else None
        )
        self.informers: list[Informer[Any]] = [
            i
            for i in (
                self.nodes,
                self.pods,
                self.namespaces,
                self.pdbs,
                self.priority_classes,
                self.volcano_podgroups,
                self.volcano_queues,
                self.cosched_podgroups,
            )
            if i is not None
        ]

    async def start(self) -> None:
        for inf in self.informers:
            inf.start()

    async def stop(self) -> None:
        await asyncio.gather(*(inf.stop() for inf in self.informers))

    async def __aenter__(self) -> ClusterCache:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self.informers)

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Wait until every informer has listed once; the timeout error names the laggards."""
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(inf.synced.wait() for inf in self.informers))
        except TimeoutError:
            waiting = [
                f"{inf.name} ({inf.stats.last_error or 'no error'})"
                for inf in self.informers
                if not inf.synced.is_set()
            ]
            raise TimeoutError(
                f"informers not synced after {timeout}s: {', '.join(waiting)}"
            ) from None

    @property
    def generation(self) -> tuple[int, int]:
        """Changes whenever any node or pod record changes."""
        return (self.nodes.generation, self.pods.generation)

    def snapshot(self) -> Snapshot:
        """A fresh engine snapshot of the current nodes and pods (walks every pod: call it
        off the request path, or use :class:`SnapshotFeed`)."""
        return build_snapshot(list(self.nodes.values()), list(self.pods.values()), self.config)

    async def snapshot_async(self) -> Snapshot:
        """Like :meth:`snapshot`, built in a worker thread so the event loop keeps serving.
        The record lists are taken in the loop; records are replaced, never changed, by
        the informers, so the thread reads a consistent set."""
        nodes, pods = list(self.nodes.values()), list(self.pods.values())
        return await asyncio.to_thread(build_snapshot, nodes, pods, self.config)


class SnapshotFeed(BackgroundTask):
    """Keeps :attr:`latest` a recent snapshot: rebuilt at most every ``interval`` seconds,
    and only when the cache changed. Readers must not hold the snapshot across an await
    while changing it (use ``with snap.what_if():`` in synchronous code)."""

    task_name = "snapshot feed"

    def __init__(self, cache: ClusterCache, *, interval: float = 1.0) -> None:
        if interval <= 0:
            raise ValueError("snapshot feed: interval must be > 0")
        self.cache = cache
        self.interval = interval
        self.latest: Snapshot | None = None
        self.built_at = 0.0  # time.monotonic() of the last build
        self.build_seconds = 0.0
        self.builds = 0
        self.ready = asyncio.Event()
        self._generation: tuple[int, int] = (-1, -1)

    @property
    def age(self) -> float:
        """Seconds since :attr:`latest` was built (infinite before the first build)."""
        return time.monotonic() - self.built_at if self.latest is not None else float("inf")

    async def refresh(self) -> Snapshot:
        """Rebuild now if the cache changed; the latest snapshot."""
        gen = self.cache.generation
        if self.latest is None or gen != self._generation:
            t0 = time.monotonic()
            snap = await self.cache.snapshot_async()
            self.latest, self._generation = snap, gen
            self.built_at = time.monotonic()
            self.build_seconds = self.built_at - t0
            self.builds += 1
            self.ready.set()
        assert self.latest is not None
        return self.latest

    async def run(self) -> None:
        await self.cache.wait_synced()
        while True:
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("snapshot rebuild failed; keeping the previous one")
            await asyncio.sleep(self.interval)
