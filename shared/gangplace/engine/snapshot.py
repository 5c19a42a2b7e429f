"""A cluster snapshot in numpy arrays, with cheap what-if.

Rows are nodes (sorted by name, so every result is deterministic), columns are
resources. ``alloc`` is allocatable after overcommit; ``used`` is the sum of the
effective requests of the pods bound to each node. Whole and shared GPUs are tracked
per device in ``gpu_free`` (thousandths of a GPU free on each device, -1 where a node
has fewer devices than the widest node).

Nodes and pods arrive as the engine's records (``node_pod_records`` reads them from
the API's JSON). Every change goes through :meth:`Snapshot.place` /
:meth:`Snapshot.remove` (or, for a caller that follows a live cluster without pod
records, :meth:`Snapshot.place_bound` / :meth:`Snapshot.unplace`), which keep a journal
while a :meth:`fork` is open, so a planner can try a move and :meth:`revert` it
exactly, or :meth:`commit` it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from gangplace.engine.model import PodShape, Taint
from gangplace.engine.node_checks import node_problems
from gangplace.engine.node_pod_records import (
    NodeRecord,
    PodRecord,
    SnapshotError,
    node_from_json,
    pod_from_json,
)
from gangplace.engine.settings import EngineConfig

__all__ = ["Snapshot"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_TERMINAL = frozenset({"Succeeded", "Failed"})

# One journal entry: (sign, node, shape, gpus, pod slot or -1).
_Entry = tuple[int, int, PodShape, tuple[int, ...], int]


class Snapshot:
    """Nodes and pods of a cluster as numpy arrays; see the module docstring."""

    def __init__(
        self,
        nodes: Iterable[NodeRecord],
        pods: Iterable[PodRecord] = (),
        config: EngineConfig | None = None,
    ) -> None:
        self.config = config or EngineConfig()
        node_list = sorted(nodes, key=lambda n: n.name)
        self.nodes: list[NodeRecord] = node_list
        self.node_names: list[str] = [n.name for n in node_list]
        self.node_index: dict[str, int] = {n: i for i, n in enumerate(self.node_names)}
        if len(self.node_index) != len(node_list):
            twice = sorted({a for a, b in itertools.pairwise(self.node_names) if a == b})
            raise SnapshotError(
                f"two nodes with the same name: {', '.join(twice)}; allowed: one node per name"
            )
        pod_list = list(pods)

        names: dict[str, None] = dict.fromkeys(("cpu", "memory", "pods"))
        for n in node_list:
            names.update(dict.fromkeys(n.allocatable))
        for p in pod_list:
            names.update(dict.fromkeys(k for k, _ in p.shape.requests))
        self.resources: list[str] = list(names)
        self.res_index: dict[str, int] = {r: i for i, r in enumerate(self.resources)}

        n_nodes, n_res = len(node_list), len(self.resources)
        raw = np.zeros((n_nodes, n_res), dtype=np.int64)
        for i, n in enumerate(node_list):
            for r, v in n.allocatable.items():
                raw[i, self.res_index[r]] = v
        self.capacity: IntArray = raw
        self.alloc: IntArray = raw.copy()
        for r, factor in self.config.overcommit.items():
            if r in self.res_index:
                j = self.res_index[r]
                self.alloc[:, j] = np.floor(raw[:, j] * factor).astype(np.int64)
        self.used: IntArray = np.zeros_like(self.alloc)

        self.unschedulable: BoolArray = np.array([n.unschedulable for n in node_list], dtype=bool)
        self.ready: BoolArray = np.array([n.ready for n in node_list], dtype=bool)
        self.gpu_total: IntArray = np.array([n.gpu_count for n in node_list], dtype=np.int64)
        width = int(self.gpu_total.max()) if n_nodes else 0
        self.gpu_free: IntArray = np.full((n_nodes, max(width, 1)), -1, dtype=np.int64)
        for i, n in enumerate(node_list):
            self.gpu_free[i, : n.gpu_count] = 1000
        self.gpu_models: list[str] = sorted({n.gpu_model for n in node_list if n.gpu_count})
        model_code = {m: i for i, m in enumerate(self.gpu_models)}
        self.gpu_model: IntArray = np.array(
            [model_code[n.gpu_model] if n.gpu_count else -1 for n in node_list], dtype=np.int64
        )
        gpu_res = sorted({n.gpu_resource for n in node_list if n.gpu_resource})
        self.gpu_resource_names: list[str] = gpu_res
        self.gpu_resource: IntArray = np.array(
            [gpu_res.index(n.gpu_resource) if n.gpu_resource else -1 for n in node_list],
            dtype=np.int64,
        )
        # Fixed tie-break order between equally scored nodes (lower wins). By default the
        # name order; a simulator may set a seeded permutation.
        self.node_rank: IntArray = np.arange(n_nodes, dtype=np.int64)

        self._taints: list[Taint] = []
        self._taint_matrix: BoolArray | None = None
        self._label_cache: dict[str, tuple[IntArray, dict[str, int]]] = {}
        self._vec_cache: dict[PodShape, tuple[IntArray, bool]] = {}
        self._static_cache: dict[PodShape, BoolArray] = {}
        self._journal: list[_Entry] = []
        # (journal length, pod count) when each open fork began.
        self._savepoints: list[tuple[int, int]] = []
        # Bumped on every change to a node (and on its undo), so a scorer can cache a
        # node's score and recompute it only when the node changed.
        self.node_version: IntArray = np.zeros(n_nodes, dtype=np.int64)
        # Slots of the pods bound to each node (insertion-ordered).
        self._on_node: list[dict[int, None]] = [{} for _ in range(n_nodes)]

        self.pods: list[PodRecord] = []
        self.pending: list[PodRecord] = []
        self._bind_existing(pod_list)
        # Nodes whose bound pods do not add up (more than allocatable, a GPU held twice),
        # by row, with what is wrong: measured, but left out of moves (``fenced``: no
        # pod is placed onto one by the engine, see gangplace.engine.node_checks).
        self.problems: dict[int, str] = node_problems(self)
        self.fenced: BoolArray = np.zeros(n_nodes, dtype=bool)
        self.fenced[list(self.problems)] = True

    # --- construction -------------------------------------------------------------------

    @classmethod
    def from_objects(
        cls,
        nodes: Iterable[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any]] = (),
        config: EngineConfig | None = None,
    ) -> Snapshot:
        """From Node and Pod JSON objects as the API returns them."""
        cfg = config or EngineConfig()
        shapes: dict[PodShape, PodShape] = {}
        return cls(
            (node_from_json(n, cfg) for n in nodes),
            (pod_from_json(p, cfg, shapes) for p in pods),
            cfg,
        )

    @classmethod
    def from_list(cls, doc: Mapping[str, Any], config: EngineConfig | None = None) -> Snapshot:
        """From a ``kubectl get nodes,pods -A -o json`` List (other kinds are ignored)."""
        items = doc.get("items")
        if not isinstance(items, list):
            raise SnapshotError("expected a Kubernetes List with an 'items' array")
        nodes = [i for i in items if isinstance(i, dict) and i.get("kind") == "Node"]
        pods = [i for i in items if isinstance(i, dict) and i.get("kind") == "Pod"]
        return cls.from_objects(nodes, pods, config)

    def _bind_existing(self, pods: list[PodRecord]) -> None:
        rows: list[int] = []
        vecs: list[IntArray] = []
        for p in pods:
            if p.phase in _TERMINAL:
                continue
            p.slot = len(self.pods)
            self.pods.append(p)
            node = self.node_index.get(p.node_name, -1) if p.node_name else -1
            if node < 0:
                p.node, p.gpus = -1, ()
                if not p.node_name:
                    self.pending.append(p)
                continue
            vec, _ = self.vector(p.shape)
            rows.append(node)
            vecs.append(vec)
            p.node = node
            self._on_node[node][p.slot] = None
            if p.shape.is_gpu:
                p.gpus = self._existing_gpus(p, node)
        if rows:
            np.add.at(self.used, np.array(rows), np.stack(vecs))

    def _existing_gpus(self, p: PodRecord, node: int) -> tuple[int, ...]:
        gpus = self._bound_devices(p.shape, node, p.gpu_index)
        for g in gpus:
            self.gpu_free[node, g] -= p.shape.gpu_milli
        return gpus

    def _bound_devices(
        self, shape: PodShape, node: int, gpu_index: tuple[int, ...]
    ) -> tuple[int, ...]:
        """The devices a pod already bound to ``node`` holds (changes nothing)."""
        d, k = shape.gpu_milli, shape.gpu_count
        total = int(self.gpu_total[node])
        if gpu_index and all(0 <= g < total for g in gpu_index):
            return gpu_index[:k] if len(gpu_index) >= k else gpu_index
        free = self.gpu_free[node, :total]
        # Whole GPUs take the lowest fully free devices; a share takes the tightest fit.
        order = (
            np.argsort(-free, kind="stable")
            if d >= 1000
            else np.lexsort((np.arange(total), np.where(free >= d, free, 10_000)))
        )
        return tuple(int(g) for g in sorted(order[:k].tolist()))

    # --- per-shape views ----------------------------------------------------------------

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    def vector(self, shape: PodShape) -> tuple[IntArray, bool]:
        """The shape's request as a row over ``resources``, and whether every resource it
        asks for exists somewhere in the cluster."""
        hit = self._vec_cache.get(shape)
        if hit is None:
            vec = np.zeros(len(self.resources), dtype=np.int64)
            known = True
            for r, v in shape.requests:
                j = self.res_index.get(r)
                if j is None:
                    known = known and v == 0
                else:
                    vec[j] = v
            hit = (vec, known)
            self._vec_cache[shape] = hit
        return hit

    def label_codes(self, key: str) -> tuple[IntArray, dict[str, int]]:
        """Per-node integer codes of label ``key`` (-1 where absent) and the code table."""
        hit = self._label_cache.get(key)
        if hit is None:
            vocab: dict[str, int] = {}
            codes = np.fromiter(
                (
                    vocab.setdefault(v, len(vocab)) if (v := n.labels.get(key)) is not None else -1
                    for n in self.nodes
                ),
                dtype=np.int64,
                count=self.n_nodes,
            )
            hit = (codes, vocab)
            self._label_cache[key] = hit
        return hit

    def taint_matrix(self) -> tuple[list[Taint], BoolArray]:
        """The distinct NoSchedule/NoExecute taints and which node carries which."""
        if self._taint_matrix is None:
            index: dict[Taint, int] = {}
            cells: list[tuple[int, int]] = []
            for i, n in enumerate(self.nodes):
                for t in n.taints:
                    if t.effect != "PreferNoSchedule":
                        cells.append((i, index.setdefault(t, len(index))))
            m = np.zeros((self.n_nodes, len(index)), dtype=bool)
            for i, j in cells:
                m[i, j] = True
            self._taints = list(index)
            self._taint_matrix = m
        return self._taints, self._taint_matrix

    def static_cache(self) -> dict[PodShape, BoolArray]:
        """Filters that no placement changes (selectors, taints, models), per shape."""
        return self._static_cache

    def free(self) -> IntArray:
        return self.alloc - self.used

    def gpu_free_total(self, nodes: IntArray | slice = slice(None)) -> IntArray:
        """Free thousandths of a GPU per node (of ``nodes``, default all)."""
        free = self.gpu_free[nodes]
        out: IntArray = np.where(free > 0, free, 0).sum(axis=1)
        return out

    def pods_on(self, node: int) -> list[PodRecord]:
        """The pods bound to ``node`` (those placed with a :class:`PodRecord`)."""
        return [self.pods[i] for i in self._on_node[node]]

    def pods_by_node(self) -> list[list[PodRecord]]:
        out: list[list[PodRecord]] = [[] for _ in range(self.n_nodes)]
        for p in self.pods:
            if p.node >= 0:
                out[p.node].append(p)
        return out

    # --- changes, journaled -------------------------------------------------------------

    def place(
        self,
        shape: PodShape,
        node: int,
        gpus: Sequence[int] = (),
        pod: PodRecord | None = None,
    ) -> None:
        """Bind ``shape`` (and ``pod``, if given) to ``node`` on devices ``gpus``.

        The caller has checked that it fits; the engine's placement functions do.
        """
        gpus = tuple(gpus)
        if shape.is_gpu and len(gpus) != shape.gpu_count:
            raise ValueError(f"{shape.gpu_count} GPU(s) needed, {len(gpus)} given")
        if pod is not None and pod.node >= 0:
            raise ValueError(f"pod {pod.key} is already bound")
        pod_i = -1
        if pod is not None:
            pod_i = self._pod_position(pod)
        self._apply(+1, node, shape, gpus, pod_i)

    def remove(self, pod: PodRecord) -> None:
        """Unbind a bound pod, freeing its resources (an eviction, in a what-if)."""
        if pod.node < 0:
            raise ValueError(f"pod {pod.key} is not bound")
        self._apply(-1, pod.node, pod.shape, pod.gpus, self._pod_position(pod))

    def place_bound(
        self, shape: PodShape, node: int, gpu_index: Sequence[int] = ()
    ) -> tuple[int, ...]:
        """Count a pod that is already bound to ``node`` (the scheduler put it there, an
        informer saw it) without keeping a pod record: it takes the devices its
        ``gpu_index`` names when the node has them, else those the constructor would
        give it. Unlike :meth:`place` nothing is checked, since a real node may hold more
        than the arrays say fits. Journaled; :meth:`unplace` undoes it. Returns the
        devices taken."""
        gpus = self._bound_devices(shape, node, tuple(gpu_index)) if shape.is_gpu else ()
        self._apply(+1, node, shape, gpus, -1)
        return gpus

    def unplace(self, shape: PodShape, node: int, gpus: Sequence[int] = ()) -> None:
        """Undo a :meth:`place` or :meth:`place_bound` made without a pod record, given
        the same shape, node and devices. Journaled."""
        self._apply(-1, node, shape, tuple(gpus), -1)

    def _pod_position(self, pod: PodRecord) -> int:
        if 0 <= pod.slot < len(self.pods) and self.pods[pod.slot] is pod:
            return pod.slot
        pod.slot = len(self.pods)
        self.pods.append(pod)
        return pod.slot

    def _apply(
        self, sign: int, node: int, shape: PodShape, gpus: tuple[int, ...], pod_i: int
    ) -> None:
        vec, _ = self.vector(shape)
        self.used[node] += sign * vec
        for g in gpus:
            self.gpu_free[node, g] -= sign * shape.gpu_milli
        self.node_version[node] += 1
        if pod_i >= 0:
            p = self.pods[pod_i]
            if sign > 0:
                p.node, p.gpus = node, gpus
                self._on_node[node][pod_i] = None
            else:
                p.node, p.gpus = -1, ()
                self._on_node[node].pop(pod_i, None)
        if self._savepoints:
            self._journal.append((sign, node, shape, gpus, pod_i))

    def fork(self) -> int:
        """Open a what-if; returns a token for :meth:`revert` or :meth:`commit`."""
        self._savepoints.append((len(self._journal), len(self.pods)))
        return len(self._savepoints)

    def revert(self, token: int | None = None) -> None:
        """Undo every change since the matching :meth:`fork`, exactly."""
        depth = len(self._savepoints) if token is None else token
        if not 0 < depth <= len(self._savepoints):
            raise ValueError("no open fork to revert")
        mark, n_pods = self._savepoints[depth - 1]
        del self._savepoints[depth - 1 :]
        while len(self._journal) > mark:
            sign, node, shape, gpus, pod_i = self._journal.pop()
            vec, _ = self.vector(shape)
            self.used[node] -= sign * vec
            for g in gpus:
                self.gpu_free[node, g] += sign * shape.gpu_milli
            self.node_version[node] += 1
            if pod_i >= 0:
                p = self.pods[pod_i]
                if sign > 0:
                    p.node, p.gpus = -1, ()
                    self._on_node[node].pop(pod_i, None)
                else:
                    p.node, p.gpus = node, gpus
                    self._on_node[node][pod_i] = None
        for p in self.pods[n_pods:]:
            p.slot = -1
        del self.pods[n_pods:]
        if not self._savepoints:
            self._journal.clear()

    def commit(self, token: int | None = None) -> None:
        """Keep the changes since the matching :meth:`fork` (they join the outer fork)."""
        depth = len(self._savepoints) if token is None else token
        if not 0 < depth <= len(self._savepoints):
            raise ValueError("no open fork to commit")
        del self._savepoints[depth - 1 :]
        if not self._savepoints:
            self._journal.clear()

    @contextmanager
    def what_if(self) -> Iterator[Snapshot]:
        """``with snap.what_if(): ...``: every change inside is reverted on exit."""
        token = self.fork()
        try:
            yield self
        finally:
            self.revert(token)

    def state(self) -> tuple[bytes, bytes, tuple[tuple[int, tuple[int, ...]], ...]]:
        """A fingerprint of everything a placement can change (for tests and checks)."""
        return (
            self.used.tobytes(),
            self.gpu_free.tobytes(),
            tuple((p.node, p.gpus) for p in self.pods),
        )
