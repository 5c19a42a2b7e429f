"""An aggregated integer model of "can these pods all be placed on this cluster at once",
whatever the arrangement: a necessary condition, solved with HiGHS (scipy's ``milp``).

Nodes are grouped into *types* (same allocatable, GPU count, model and device resource,
and the same static filters for every shape involved); pods are counted by shape.
Variables: ``x[t, s]``, the pods of shape s on nodes of type t (integers), ``u[t]``, the
GPUs of type t that GPU-sharing pods use (integers), and a flow over the *arc-flow graph*
of one GPU (loads 0..1000 in the thousandths' common divisor, an arc per share size),
whose paths are the ways one GPU can be shared. Constraints, all implied by any real
placement:

* every resource of type t: the pods' requests fit in ``N_t`` x the node's allocatable;
* GPUs of type t: whole-GPU pods' devices plus ``u[t]`` fit in ``N_t x G_t``;
* per type, bin-packing cuts on the shares (Martello and Toth's L2 family): the shares
  above half a GPU each need a GPU of their own, and for each size a, the shares above
  1000 - a plus the total of the shares in [a, 1000 - a] fit in ``u[t]`` GPUs;
* over all types, the shares pack into ``sum u[t]`` GPUs as paths of the arc-flow graph
  (the arc-flow LP, as strong as the Gilmore-Gomory bound of bin packing);
* per type and resource, the pods that need more than half a node (or more than half
  its GPUs) number at most ``N_t``: no node holds two.

So "infeasible" is a proof that no arrangement exists; "feasible" is not a packing (the
model pools each type's nodes), and a caller that needs one must build it. The same
model with "at most the count of each shape" and the GPU demand maximised bounds the
offline optimum (:func:`offline_bound`).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import Bounds, LinearConstraint, milp

from gangplace.engine.feasibility import static_mask
from gangplace.engine.model import PodShape
from gangplace.engine.snapshot import Snapshot
from gangplace.mover.lp_rows import Rows

__all__ = [
    "FEASIBLE",
    "INFEASIBLE",
    "TIMEOUT",
    "FitModel",
    "NodeTypes",
    "OfflineBound",
    "node_types",
    "offline_bound",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

FEASIBLE, INFEASIBLE, TIMEOUT = "feasible", "infeasible", "timeout"


@dataclass(frozen=True, slots=True)
class NodeTypes:
    """The cluster's nodes grouped into interchangeable types for a set of shapes."""

    count: IntArray  # nodes per type
    alloc: IntArray  # (types, resources) allocatable of one node
    gpus: IntArray  # GPUs per node of each type
    members: list[IntArray]  # node indices of each type
    allowed: npt.NDArray[np.bool_]  # (types, shapes): a pod of the shape may go there
    shapes: list[PodShape]


def node_types(snap: Snapshot, shapes: list[PodShape]) -> NodeTypes:
    """Group the nodes: same allocatable, GPU count, model, device resource, and the same
    static filter answer for every shape (so any node of a type can stand for another)."""
    n = snap.n_nodes
    masks = (
        np.stack([static_mask(snap, s) for s in shapes], axis=1)
        if shapes
        else np.zeros((n, 0), dtype=bool)
    )
    keys = np.concatenate(
        [
            snap.alloc,
            snap.gpu_total[:, None],
            snap.gpu_model[:, None],
            snap.gpu_resource[:, None],
            masks.astype(np.int64),
        ],
        axis=1,
    )
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    members = [np.flatnonzero(inverse == t) for t in range(len(uniq))]
    first = np.array([m[0] for m in members], dtype=np.int64)
    alloc = snap.alloc[first]
    gpus = snap.gpu_total[first]
    allowed = masks[first].copy()
    for j, s in enumerate(shapes):
        vec, known = snap.vector(s)
        fits_empty = (alloc >= vec[None, :]).all(axis=1) & known
        if s.is_gpu:
            fits_empty &= gpus >= s.gpu_count
        allowed[:, j] &= fits_empty
    return NodeTypes(
        count=np.array([len(m) for m in members], dtype=np.int64),
        alloc=alloc,
        gpus=gpus,
        members=members,
        allowed=allowed,
        shapes=list(shapes),
    )


@dataclass(frozen=True, slots=True)
class OfflineBound:
    """The most GPU demand (milli-GPU) any choice of the given pods could place."""

    lp_milli: float  # the LP relaxation's optimum: an upper bound
    milp_bound_milli: float  # the MILP's proven bound (<= lp), at its time limit
    milp_best_milli: float  # the best integer solution of the model found (may be 0)
    status: str
    seconds: float


class _Model:
    """The constraint matrix, built once per (cluster, shape counts)."""

    def __init__(self, snap: Snapshot, counts: Mapping[PodShape, int]) -> None:
        shapes = [s for s, c in counts.items() if c > 0]
        self.shapes = shapes
        self.counts = np.array([counts[s] for s in shapes], dtype=np.int64)
        nt = node_types(snap, shapes)
        self.types = nt
        self.snap = snap
        pairs = [
            (t, j) for t in range(len(nt.count)) for j in range(len(shapes)) if nt.allowed[t, j]
        ]
        self.pairs = pairs
        nx = len(pairs)
        n_types = len(nt.count)
        share_sizes = sorted({s.gpu_milli for s in shapes if s.is_shared_gpu})
        self.share_sizes = share_sizes
        step = reduce(math.gcd, share_sizes, 1000) if share_sizes else 1000
        loads = list(range(0, 1001, step))
        reach = {0}
        for a in loads:  # loads some set of shares can reach (each size any number of times)
            if a in reach:
                for w in share_sizes:
                    if a + w <= 1000:
                        reach.add(a + w)
        reach.add(1000)
        arcs: list[tuple[int, int, int]] = []  # (from, to, size or 0 for a loss arc)
        for a in sorted(reach):
            for w in share_sizes:
                if a + w in reach:
                    arcs.append((a, a + w, w))
            if a < 1000:
                arcs.append((a, 1000, 0))
        self.arcs = arcs
        # Variable layout: x pairs, then u per type, then arcs, then z (GPUs shared, total).
        self.ix_u = nx
        self.ix_arc = nx + n_types
        self.ix_z = self.ix_arc + len(arcs)
        self.n_var = self.ix_z + 1
        rows = Rows()
        add = rows.add

        by_type: dict[int, list[tuple[int, int]]] = {}
        for v, (t, j) in enumerate(pairs):
            by_type.setdefault(t, []).append((v, j))
        # Each shape: its pods placed (== count, or <= count for the offline bound; the
        # bounds are set per use below).
        self.row_shape = len(rows)
        by_shape: dict[int, list[int]] = {}
        for v, (_, j) in enumerate(pairs):
            by_shape.setdefault(j, []).append(v)
        for j in range(len(shapes)):
            add([(v, 1.0) for v in by_shape.get(j, [])], 0.0, 0.0)
        n_res = snap.alloc.shape[1]
        vecs = [snap.vector(s)[0] for s in shapes]
        for t, items in by_type.items():
            nodes = int(nt.count[t])
            for k in range(n_res):
                cap = int(nt.alloc[t, k])
                ent = [(v, float(vecs[j][k])) for v, j in items if vecs[j][k] > 0]
                if ent:
                    add(ent, -np.inf, float(nodes) * cap)
                    big = [(v, 1.0) for v, j in items if 2 * vecs[j][k] > cap]
                    if big:
                        add(big, -np.inf, float(nodes))
            g = int(nt.gpus[t])
            whole = [(v, float(shapes[j].gpu_count)) for v, j in items if _whole(shapes[j])]
            add([*whole, (self.ix_u + t, 1.0)], -np.inf, float(nodes * g))
            big = [(v, 1.0) for v, j in items if _whole(shapes[j]) and 2 * shapes[j].gpu_count > g]
            if big:
                add(big, -np.inf, float(nodes))
            shares = [(v, shapes[j].gpu_milli) for v, j in items if shapes[j].is_shared_gpu]
            if shares:
                # Shares above half a GPU: one GPU each.
                add(
                    [(v, 1.0) for v, d in shares if 2 * d > 1000] + [(self.ix_u + t, -1.0)],
                    -np.inf,
                    0.0,
                )
                for a in [0, *share_sizes]:
                    if 2 * a > 1000:
                        break
                    ent = []
                    for v, d in shares:
                        if d > 1000 - a:
                            ent.append((v, 1000.0))
                        elif d >= a:
                            ent.append((v, float(d)))
                    add([*ent, (self.ix_u + t, -1000.0)], -np.inf, 0.0)
            else:
                add([(self.ix_u + t, 1.0)], 0.0, 0.0)
        # The arc-flow: conservation at every inner load, z paths from 0 to 1000.
        node_arcs_out: dict[int, list[int]] = {}
        node_arcs_in: dict[int, list[int]] = {}
        for i, (a, b, _) in enumerate(arcs):
            node_arcs_out.setdefault(a, []).append(self.ix_arc + i)
            node_arcs_in.setdefault(b, []).append(self.ix_arc + i)
        for a in sorted(reach):
            ent = [(c, 1.0) for c in node_arcs_out.get(a, [])]
            ent += [(c, -1.0) for c in node_arcs_in.get(a, [])]
            if a == 0:
                add([*ent, (self.ix_z, -1.0)], 0.0, 0.0)
            elif a == 1000:
                add([*ent, (self.ix_z, 1.0)], 0.0, 0.0)
            elif ent:
                add(ent, 0.0, 0.0)
        # z = sum u, and each share size: arcs of that size >= the shares of that size.
        add([(self.ix_u + t, 1.0) for t in range(n_types)] + [(self.ix_z, -1.0)], 0.0, 0.0)
        for w in share_sizes:
            ent = [(self.ix_arc + i, 1.0) for i, (_, _, s) in enumerate(arcs) if s == w]
            ent += [
                (v, -1.0)
                for v, (_, j) in enumerate(pairs)
                if shapes[j].is_shared_gpu and shapes[j].gpu_milli == w
            ]
            add(ent, 0.0, np.inf)
        self.n_rows = len(rows)
        self.A = rows.matrix(self.n_var)
        self.lo, self.hi = rows.bounds()
        integ = np.zeros(self.n_var)
        integ[: self.ix_arc] = 1
        self.integrality = integ
        ub = np.full(self.n_var, np.inf)
        for v, (_, j) in enumerate(pairs):
            ub[v] = float(self.counts[j])
        for t in range(n_types):
            ub[self.ix_u + t] = float(nt.count[t] * nt.gpus[t])
        self.ub = ub

    def solve(
        self,
        c: FloatArray,
        shape_lo: FloatArray,
        time_limit: float,
        relax: bool = False,
        shape_hi: FloatArray | None = None,
    ) -> Any:
        lo, hi = self.lo.copy(), self.hi.copy()
        n = len(self.shapes)
        lo[self.row_shape : self.row_shape + n] = shape_lo
        hi[self.row_shape : self.row_shape + n] = self.counts if shape_hi is None else shape_hi
        return milp(
            c,
            constraints=LinearConstraint(self.A, lo, hi),
            integrality=np.zeros(self.n_var) if relax else self.integrality,
            bounds=Bounds(np.zeros(self.n_var), self.ub),
            options={"time_limit": max(time_limit, 0.01), "presolve": True},
        )


class FitModel:
    """The model built once for a cluster and a set of shapes, then asked many times
    whether given counts of those shapes fit: the LP first (cheap; infeasible is a
    proof), then the integer model within a time limit."""

    def __init__(self, snap: Snapshot, shapes: Iterable[PodShape], most: int) -> None:
        self.model = _Model(snap, Counter(dict.fromkeys(shapes, most)))
        self.index = {s: j for j, s in enumerate(self.model.shapes)}

    def check(
        self, counts: Mapping[PodShape, int], time_limit: float, milp_time_limit: float = 0.0
    ) -> tuple[str, str]:
        """(status, by): INFEASIBLE by "lp" or "milp", FEASIBLE (by the LP alone when
        ``milp_time_limit`` is 0), or TIMEOUT."""
        m = self.model
        need = np.zeros(len(m.shapes))
        for s, c in counts.items():
            j = self.index.get(s)
            if j is None:
                raise ValueError(f"shape {s.describe()} is not in the model")
            need[j] = c
        zero = np.zeros(m.n_var)
        lp = m.solve(zero, need, time_limit, relax=True, shape_hi=need)
        if lp.status == 2:
            return INFEASIBLE, "lp"
        if lp.status != 0:
            return TIMEOUT, "lp"
        if milp_time_limit <= 0:
            return FEASIBLE, "lp"
        ip = m.solve(zero, need, milp_time_limit, shape_hi=need)
        if ip.status == 2:
            return INFEASIBLE, "milp"
        if ip.status == 0 or ip.x is not None:
            return FEASIBLE, "milp"
        return TIMEOUT, "milp"


def _whole(s: PodShape) -> bool:
    return s.is_gpu and s.gpu_milli >= 1000


def offline_bound(
    snap: Snapshot, counts: Mapping[PodShape, int], time_limit: float = 60.0
) -> OfflineBound:
    """The most GPU demand a subset of ``counts`` could place on ``snap``'s nodes (all
    pods removed first), by the same aggregated model: the LP optimum, and the MILP's
    proven bound within ``time_limit``. Both are upper bounds on any policy's
    allocation, online or offline."""
    start = time.perf_counter()
    model = _Model(snap, counts)
    demand = np.zeros(model.n_var)
    for v, (_, j) in enumerate(model.pairs):
        demand[v] = -float(model.shapes[j].gpu_demand_milli)
    zero = np.zeros(len(model.shapes))
    lp = model.solve(demand, zero, time_limit, relax=True)
    lp_val = -float(lp.fun) if lp.status == 0 else float("nan")
    left = max(time_limit - (time.perf_counter() - start), 1.0)
    ip = model.solve(demand, zero, left)
    bound = getattr(ip, "mip_dual_bound", None)
    best = -float(ip.fun) if ip.x is not None else 0.0
    ip_bound = -float(bound) if bound is not None and np.isfinite(bound) else lp_val
    status = "optimal" if ip.status == 0 else ("time limit" if ip.status == 1 else ip.message)
    return OfflineBound(
        lp_milli=lp_val,
        milp_bound_milli=min(ip_bound, lp_val) if np.isfinite(lp_val) else ip_bound,
        milp_best_milli=best,
        status=str(status),
        seconds=time.perf_counter() - start,
    )
