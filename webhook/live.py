"""The cluster view of a webhook that runs against an API server: informers feed a live
engine snapshot, kept current off the request path.

:class:`InformerSource` is the :class:`~webhook.admission.cluster_fit.SnapshotSource` of
``corral-webhook serve`` with a cluster. It runs two informers of the kube layer:

* **nodes**, as the engine's :class:`~gangplace.engine.NodeRecord`;
* **pods that hold capacity** (bound, not finished: ``spec.nodeName!=`` and the
  non-terminal phases), each kept as a :class:`HeldPod` -- only its node, its shape
  (shared between equal pods) and the GPU devices it names. Admission never needs a
  pod's labels or owners from the cache, so the webhook keeps far less than a full
  :class:`~gangplace.engine.PodRecord` per pod.

The snapshot holds no pod records either. Once both informers have listed, it is built
in a worker thread (nodes, then every held pod counted with
:meth:`~gangplace.engine.Snapshot.place_bound`); from then on every pod event moves its
pod in place -- :meth:`~gangplace.engine.Snapshot.unplace` of what the old record held,
``place_bound`` of the new -- synchronously on the event loop, a few microseconds each.
Admission also runs on the loop and undoes its dry runs before it returns, so no one
ever sees the snapshot half-changed, and no other thread touches it.

A change to the nodes (a node added, removed, cordoned, relabelled, its allocatable or
readiness changed: heartbeats that change nothing are ignored) needs new arrays: after
``rebuild_delay`` seconds, so that a burst is built once, a new snapshot and its empty
copy (``ClusterState.capacity``, whose "can this gang ever start" answers are cached
until then) are built in a worker thread while the old ones keep serving; pod events
that arrive meanwhile are replayed on the new snapshot before it takes over.

:meth:`ready` is False until the first snapshot is in place.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from gangplace.engine import EngineConfig, NodeRecord, PodShape, ShapeError, Snapshot
from gangplace.engine.model import GPU_SHARE_INDEX, shape_from_pod
from gangplace.engine.node_pod_records import node_from_json
from gangplace.kube import Informer, KubeClient
from gangplace.kube.resources import NODES, NON_TERMINAL_PODS, PODS
from gangplace.kube.task import BackgroundTask

from webhook.admission.cluster_fit import ClusterCapacity

__all__ = ["HELD_PODS", "HeldPod", "InformerSource", "SourceStats", "held_pod"]

log = logging.getLogger(__name__)

# Pods that hold capacity: bound to a node and not finished.
HELD_PODS = f"spec.nodeName!=,{NON_TERMINAL_PODS}"
_TERMINAL = frozenset({"Succeeded", "Failed"})
# Distinct shapes of admitted gangs each cache a per-node mask in a snapshot; bound them.
_STATIC_CACHE_LIMIT = 2048


class HeldPod(NamedTuple):
    """What a bound pod holds: where, how much, and which GPU devices it names.
    ``node`` is empty for a pod that holds nothing (finished)."""

    node: str
    shape: PodShape
    gpu_index: tuple[int, ...] = ()


def held_pod(
    obj: Mapping[str, Any],
    config: EngineConfig,
    shapes: dict[PodShape, PodShape],
    names: dict[str, str],
) -> HeldPod:
    """A pod object as a :class:`HeldPod`; equal shapes and node names are shared
    through ``shapes`` and ``names``. Raises ValueError for an unreadable pod."""
    try:
        shape = shape_from_pod(obj, config.gpu_resources)
    except ShapeError as e:
        meta = obj.get("metadata") or {}
        raise ValueError(f"pod {meta.get('namespace')}/{meta.get('name')}: {e}") from None
    shape = shapes.setdefault(shape, shape)
    spec = obj.get("spec") or {}
    phase = (obj.get("status") or {}).get("phase")
    node = spec.get("nodeName") if phase not in _TERMINAL else ""
    if not isinstance(node, str):
        node = ""
    node = names.setdefault(node, node)
    index: tuple[int, ...] = ()
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(GPU_SHARE_INDEX)
    if raw:
        try:
            index = tuple(int(x) for x in str(raw).split(","))
        except ValueError:
            index = ()  # unreadable: devices are chosen as for a pod that names none
    return HeldPod(node, shape, index)


@dataclass(slots=True)
class SourceStats:
    builds: int = 0
    build_seconds: float = 0.0  # of the last build
    events: int = 0  # pod events applied to a live snapshot
    replayed: int = 0  # pod events replayed on a new snapshot after its build
    built_at: float = 0.0  # time.monotonic() of the last build


class _Live:
    """A snapshot and the devices its GPU pods took (which ``unplace`` needs back)."""

    __slots__ = ("gpus", "snap")

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.gpus: dict[str, tuple[int, ...]] = {}

    def add(self, key: str, pod: HeldPod | None) -> None:
        if pod is None or not pod.node:
            return
        node = self.snap.node_index.get(pod.node)
        if node is None:
            return  # on a node this snapshot does not have (yet): the rebuild counts it
        gpus = self.snap.place_bound(pod.shape, node, pod.gpu_index)
        if gpus:
            self.gpus[key] = gpus

    def drop(self, key: str, pod: HeldPod | None) -> None:
        if pod is None or not pod.node:
            return
        node = self.snap.node_index.get(pod.node)
        if node is None:
            return
        self.snap.unplace(pod.shape, node, self.gpus.pop(key, ()))


def _build(
    nodes: list[NodeRecord], pods: Iterable[tuple[str, HeldPod]], config: EngineConfig
) -> tuple[ClusterCapacity, _Live]:
    """A new live snapshot and its empty copy (in a worker thread: reads only its
    arguments, which nobody changes -- informers replace records, never edit them)."""
    snap = Snapshot(nodes, (), config)
    state = ClusterCapacity.of(snap)
    live = _Live(snap)
    for key, pod in pods:
        live.add(key, pod)
    return state, live


class InformerSource(BackgroundTask):
    """See the module docstring. ``start()`` it, ``await stop()`` at the end; or give
    :meth:`run` to the server as a background task."""

    task_name = "cluster view"

    def __init__(
        self,
        kube: KubeClient,
        config: EngineConfig | None = None,
        *,
        rebuild_delay: float = 1.0,
        retry_delay: float = 5.0,
        page_size: int = 500,
        watch_timeout: int = 300,
        on_build: Callable[[SourceStats], None] | None = None,
    ) -> None:
        self.config = config or EngineConfig()
        self.rebuild_delay = rebuild_delay
        self.retry_delay = retry_delay
        self.stats = SourceStats()
        self._on_build = on_build
        self.shapes: dict[PodShape, PodShape] = {}
        self._names: dict[str, str] = {}
        cfg = self.config

        def convert_node(obj: dict[str, Any]) -> NodeRecord:
            rec = node_from_json(obj, cfg)
            rec.name = sys.intern(rec.name)
            return rec

        def convert_pod(obj: dict[str, Any]) -> HeldPod:
            return held_pod(obj, cfg, self.shapes, self._names)

        kw: dict[str, Any] = {"page_size": page_size, "watch_timeout": watch_timeout}
        self.nodes: Informer[NodeRecord] = Informer(kube, NODES, convert_node, **kw)
        self.pods: Informer[HeldPod] = Informer(
            kube, PODS, convert_pod, field_selector=HELD_PODS, name="held pods", **kw
        )
        self.nodes.add_listener(self._on_node)
        self.pods.add_listener(self._on_pod)
        self._state: ClusterCapacity | None = None
        self._live: _Live | None = None
        self._replay: set[str] | None = None  # pods changed while a build runs
        self._nodes_changed = asyncio.Event()

    # --- SnapshotSource ---------------------------------------------------------------

    def state(self) -> ClusterCapacity | None:
        st = self._state
        if st is not None:
            for snap in (st.snapshot, st.capacity):
                cache = snap.static_cache()
                if len(cache) > _STATIC_CACHE_LIMIT:
                    cache.clear()
        return st

    def ready(self) -> bool:
        return self._state is not None

    # --- running ----------------------------------------------------------------------

    async def run(self) -> None:
        """Run the informers and keep the snapshot current until cancelled."""
        self.nodes.start()
        self.pods.start()
        try:
            await asyncio.gather(self.nodes.synced.wait(), self.pods.synced.wait())
            while True:
                try:
                    await self._rebuild()
                except Exception:  # keep the previous view, and try again
                    log.exception("cluster view build failed; retrying")
                    await asyncio.sleep(self.retry_delay)
                    continue
                await self._nodes_changed.wait()
                # Let a burst of node changes (an autoscaler adding ten) settle first.
                await asyncio.sleep(self.rebuild_delay)
        finally:
            await asyncio.gather(self.nodes.stop(), self.pods.stop())

    async def wait_ready(self, timeout: float | None = None) -> None:
        async with asyncio.timeout(timeout):
            while self._state is None:
                await asyncio.sleep(0.01)

    async def _rebuild(self) -> None:
        self._nodes_changed.clear()
        nodes = list(self.nodes.values())
        # Records are replaced on change, never edited: this copy is a consistent
        # picture for the worker thread, and says what the new snapshot counted.
        pods = dict(self.pods.store)
        self._replay = set()
        t0 = time.perf_counter()
        try:
            state, live = await asyncio.to_thread(_build, nodes, pods.items(), self.config)
        except BaseException:
            self._replay = None
            raise
        replay, self._replay = self._replay, None
        for key in replay:
            before, now = pods.get(key), self.pods.get(key)
            if before is not now:
                live.drop(key, before)
                live.add(key, now)
        self._state, self._live = state, live
        st = self.stats
        st.builds += 1
        st.build_seconds = time.perf_counter() - t0
        st.replayed += len(replay)
        st.built_at = time.monotonic()
        log.info(
            "cluster view built",
            extra={
                "fields": {
                    "nodes": state.snapshot.n_nodes,
                    "pods": len(pods),
                    "seconds": round(st.build_seconds, 3),
                    "replayed": len(replay),
                }
            },
        )
        if self._on_build is not None:
            self._on_build(st)

    # --- informer listeners (on the event loop) ----------------------------------------

    def _on_node(self, kind: str, key: str, old: NodeRecord | None, new: NodeRecord | None) -> None:
        if old is None or new is None or old != new:
            self._nodes_changed.set()

    def _on_pod(self, kind: str, key: str, old: HeldPod | None, new: HeldPod | None) -> None:
        if self._replay is not None:
            self._replay.add(key)
        live, state = self._live, self._state
        if live is None or state is None or old == new:
            return
        live.drop(key, old)
        live.add(key, new)
        state.version += 1
        self.stats.events += 1
