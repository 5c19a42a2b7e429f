"""The exact check "can the pods placed, plus one more, all be placed at once, whatever
the arrangement", by *configurations*: a configuration is what one node of a type holds
(pods of each shape, and how the GPU-sharing pods share its GPUs), and a cluster's
arrangement is a number of nodes of each type on each configuration.

The master problem covers the demand of every shape with at most ``N_t`` configurations
of type t; its LP is solved by column generation (the pricing problem, one small
integer model per node type, finds the configuration worth the most at the LP's duals:
CPU, memory and every other resource of the node, whole GPUs, and the shares packed GPU
by GPU). The columns never expire -- the node types do not change -- so a replay's
checks share one pool, seeded with the configurations the nodes actually hold.

* **Infeasible** is a proof: the Lagrangian bound ``sum_s d_s pi_s - sum_t N_t v_t``
  (``v_t`` the pricing's proven upper bound) is a lower bound on the demand any
  arrangement leaves uncovered; above zero, none covers it all.
* **Feasible** is a packing: an integer solution of the master over the columns found
  (the restricted master, then a dive that fixes the LP's large values and prices the
  residual), decoded node by node into pods on nodes and devices (:meth:`apply`).
* Otherwise the check ran out of its time limit (or found no integer solution among
  the columns): counted as timed out by the caller.

Every resource and GPU rule the engine's :func:`~gangplace.engine.feasibility.fits`
checks is in the pricing problem; the node types group nodes that answer every static
filter alike, so any node of a type stands for another. The pods counted are the
snapshot's pod records (a replay keeps one for every pod it binds).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.optimize import Bounds, LinearConstraint, linprog, milp
from scipy.sparse import coo_matrix, csr_matrix

from gangplace.engine.model import PodShape
from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.snapshot import Snapshot
from gangplace.mover.lp_rows import Rows
from gangplace.sim.exact_layout import Config, ExactPlan, apply_plan
from gangplace.sim.fit_bound import FEASIBLE, INFEASIBLE, TIMEOUT, node_types

__all__ = ["ExactFit", "ExactResult"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_EPS = 1e-6  # reduced costs and bounds below this are taken as zero


@dataclass(slots=True)
class ExactResult:
    status: str  # FEASIBLE (with a plan), INFEASIBLE (a proof) or TIMEOUT
    seconds: float
    how: str  # "lp-bound", "restricted-ip", "dive", or why it timed out
    plan: ExactPlan | None = None
    iterations: int = 0
    columns: int = 0
    bound: float = 0.0  # the best Lagrangian bound (uncovered pods, >0 proves)


@dataclass(slots=True)
class _Master:
    """The column pool: (type, counts) -> column index, and each column's config."""

    key: dict[tuple[int, tuple[int, ...]], int] = field(default_factory=dict)
    cols: list[tuple[int, Config]] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    idx: list[int] = field(default_factory=list)
    vals: list[float] = field(default_factory=list)

    def add(self, t: int, cfg: Config) -> bool:
        k = (t, cfg.counts)
        if k in self.key:
            return False
        c = len(self.cols)
        self.key[k] = c
        self.cols.append((t, cfg))
        for j, v in enumerate(cfg.counts):
            if v:
                self.rows.append(j)
                self.idx.append(c)
                self.vals.append(float(v))
        return True


class ExactFit:
    """The exact check for one cluster and a fixed set of shapes (a replay's arrivals),
    asked many times as pods are placed."""

    def __init__(self, snap: Snapshot, shapes: Iterable[PodShape]) -> None:
        self.shapes = list(dict.fromkeys(shapes))
        for s in self.shapes:
            if s.is_shared_gpu and s.gpu_count != 1:
                raise ValueError(
                    f"shape {s.describe()}: a share of {s.gpu_count} GPUs is not modelled "
                    "(shares take one GPU each)"
                )
        self.index = {s: j for j, s in enumerate(self.shapes)}
        nt = node_types(snap, self.shapes)
        self.types = nt
        self.type_of = np.empty(snap.n_nodes, dtype=np.int64)
        for t, m in enumerate(nt.members):
            self.type_of[m] = t
        vecs = np.array([snap.vector(s)[0] for s in self.shapes], dtype=np.int64).reshape(
            len(self.shapes), -1
        )
        cols = [k for k in range(vecs.shape[1]) if vecs[:, k].any()]
        # Exact integer scaling: divide each resource by the gcd of the requests (the
        # capacity rounds down, which loses nothing since every sum is a multiple).
        g = [math.gcd(*[int(v) for v in vecs[:, k] if v]) for k in cols]
        self.vec = (vecs[:, cols] // np.array(g, dtype=np.int64)).astype(np.int64)
        self.cap = (nt.alloc[:, cols] // np.array(g, dtype=np.int64)).astype(np.int64)
        self.milli = np.array(
            [s.gpu_milli if s.is_shared_gpu else 0 for s in self.shapes], dtype=np.int64
        )
        self.whole = np.array(
            [s.gpu_count if s.is_gpu and not s.is_shared_gpu else 0 for s in self.shapes],
            dtype=np.int64,
        )
        self.pool = _Master()
        self._versions: IntArray | None = None
        # Clusters up to this many nodes are decided by the assignment model (exact).
        self.assign_nodes = 64
        # Seconds the assignment model gets on a neighbourhood, per 16 nodes.
        self.assign_seconds = 1.5
        # Whether the assignment model minimises the pods moved (slower) or stops at
        # the first packing it finds.
        self.fewest_moves = False

    # --- the current arrangement as configurations -----------------------------------

    def config_of(self, pods: Iterable[PodRecord]) -> Config:
        counts = [0] * len(self.shapes)
        on_gpu: dict[int, list[int]] = {}
        for p in pods:
            j = self.index[p.shape]
            counts[j] += 1
            if p.shape.is_shared_gpu:
                on_gpu.setdefault(p.gpus[0], []).append(j)
        bins = tuple(sorted(tuple(sorted(v)) for v in on_gpu.values()))
        return Config(tuple(counts), bins)

    def demand(
        self, snap: Snapshot, extra: PodShape | None, nodes: list[int] | None = None
    ) -> IntArray:
        d = np.zeros(len(self.shapes), dtype=np.int64)
        if nodes is None:
            for p in snap.pods:
                if p.node >= 0:
                    d[self.index[p.shape]] += 1
        else:
            for n in nodes:
                for p in snap.pods_on(n):
                    d[self.index[p.shape]] += 1
        if extra is not None:
            d[self.index[extra]] += 1
        return d

    def seed(self, snap: Snapshot) -> None:
        """Add the configurations the nodes hold now to the pool (those of the nodes
        changed since the last call)."""
        seen = self._versions
        changed = (
            np.arange(snap.n_nodes)
            if seen is None or seen.shape != snap.node_version.shape
            else np.flatnonzero(snap.node_version != seen)
        )
        for n in changed:
            pods = snap.pods_on(int(n))
            if pods:
                self.pool.add(int(self.type_of[n]), self.config_of(pods))
        self._versions = snap.node_version.copy()

    def neighbourhood(self, snap: Snapshot, shape: PodShape, k: int) -> list[int]:
        """The ``k`` nodes a search for room for ``shape`` starts from: nodes it may
        use, the most free GPU (or, for a pod without GPUs, CPU) first."""
        j = self.index[shape]
        ok = self.types.allowed[self.type_of, j]
        if shape.is_gpu:
            score = np.where(snap.gpu_free > 0, snap.gpu_free, 0).sum(axis=1).astype(float)
        else:
            c = snap.res_index["cpu"]
            score = (snap.alloc[:, c] - snap.used[:, c]) / np.maximum(snap.alloc[:, c], 1)
        cand = np.flatnonzero(ok)
        order = np.lexsort((snap.node_rank[cand], -score[cand]))
        return [int(n) for n in cand[order[:k]]]

    # --- pricing ----------------------------------------------------------------------

    def price(
        self, t: int, pi: FloatArray, most: IntArray, time_limit: float
    ) -> tuple[float, float, Config | None]:
        """The configuration of type ``t`` worth the most at duals ``pi`` (at most
        ``most`` pods of each shape): (its worth, a proven upper bound, it)."""
        nt = self.types
        js = [
            j for j in range(len(self.shapes)) if nt.allowed[t, j] and pi[j] > 1e-9 and most[j] > 0
        ]
        if not js:
            return 0.0, 0.0, None
        G = int(nt.gpus[t])
        plain = [j for j in js if not self.shapes[j].is_shared_gpu]
        share = [j for j in js if self.shapes[j].is_shared_gpu]
        n_gpu = G if share else 0
        # Variables: a_j (plain), b_{g,j} (share j on GPU g), o_g (GPU g holds shares).
        na = len(plain)
        nb = n_gpu * len(share)
        nv = na + nb + n_gpu

        def b(g: int, i: int) -> int:
            return na + g * len(share) + i

        def o(g: int) -> int:
            return na + nb + g

        c = np.zeros(nv)
        ub = np.zeros(nv)
        for i, j in enumerate(plain):
            c[i] = -pi[j]
            ub[i] = float(most[j])
        for g in range(n_gpu):
            for i, j in enumerate(share):
                c[b(g, i)] = -pi[j]
                ub[b(g, i)] = float(min(most[j], 1000 // self.milli[j]))
            ub[o(g)] = 1.0
        rows = Rows()
        add = rows.add

        for k in range(self.vec.shape[1]):
            ent = [(i, float(self.vec[j, k])) for i, j in enumerate(plain) if self.vec[j, k]]
            ent += [
                (b(g, i), float(self.vec[j, k]))
                for g in range(n_gpu)
                for i, j in enumerate(share)
                if self.vec[j, k]
            ]
            if ent:
                add(ent, -np.inf, float(self.cap[t, k]))
        ent = [(i, float(self.whole[j])) for i, j in enumerate(plain) if self.whole[j]]
        ent += [(o(g), 1.0) for g in range(n_gpu)]
        if ent:
            add(ent, -np.inf, float(G))
        for g in range(n_gpu):
            add(
                [(b(g, i), float(self.milli[j])) for i, j in enumerate(share)] + [(o(g), -1000.0)],
                -np.inf,
                0.0,
            )
            if g + 1 < n_gpu:  # symmetry: the GPUs in use first, fuller first
                add([(o(g), 1.0), (o(g + 1), -1.0)], 0.0, np.inf)
                add(
                    [(b(g, i), float(self.milli[j])) for i, j in enumerate(share)]
                    + [(b(g + 1, i), -float(self.milli[j])) for i, j in enumerate(share)],
                    0.0,
                    np.inf,
                )
        for i, j in enumerate(share):
            if n_gpu and most[j] < n_gpu * ub[b(0, i)]:
                add([(b(g, i), 1.0) for g in range(n_gpu)], -np.inf, float(most[j]))
        res = milp(
            c,
            constraints=rows.constraint(nv),
            integrality=np.ones(nv),
            bounds=Bounds(np.zeros(nv), ub),
            options={"time_limit": max(time_limit, 0.05), "mip_rel_gap": 0.0},
        )
        if res.x is None:
            # No solution in time: the LP bound of the pricing is still an upper bound.
            ub_val = float(np.dot(pi[js], most[js]))
            return 0.0, ub_val, None
        val = -float(res.fun)
        dual = getattr(res, "mip_dual_bound", None)
        upper = val if res.status == 0 else max(val, -float(dual) if dual is not None else np.inf)
        x = np.round(res.x).astype(np.int64)
        counts = [0] * len(self.shapes)
        for i, j in enumerate(plain):
            counts[j] = int(x[i])
        bins: list[tuple[int, ...]] = []
        for g in range(n_gpu):
            on: list[int] = []
            for i, j in enumerate(share):
                k = int(x[b(g, i)])
                counts[j] += k
                on.extend([j] * k)
            if on:
                bins.append(tuple(sorted(on)))
        return val, upper + 1e-7, Config(tuple(counts), tuple(sorted(bins)))

    def guided(self, snap: Snapshot, extra: PodShape, pad: int = 8) -> list[int]:
        """The nodes a packing most likely needs to change: the LP over the pool's
        columns that keeps the most nodes on the configuration they hold (a column
        used beyond the nodes holding it costs one per node) says which configurations
        to take apart; their nodes, plus the ``pad`` nodes of :meth:`neighbourhood`."""
        self.seed(snap)
        d = self.demand(snap, extra)
        holders: dict[int, list[int]] = {}
        for n in range(snap.n_nodes):
            pods = snap.pods_on(n)
            if pods:
                c = self.pool.key[(int(self.type_of[n]), self.config_of(pods).counts)]
                holders.setdefault(c, []).append(n)
        A = self._matrix()
        n_types = len(self.types.count)
        T = self._type_rows(n_types)
        nc = A.shape[1]
        S = len(self.shapes)
        have = np.zeros(nc)
        for c, ns in holders.items():
            have[c] = len(ns)
        from scipy.sparse import hstack, vstack

        a_ub = vstack([hstack([-A, -A]), hstack([T, T])]).tocsr()
        b_ub = np.concatenate([-d.astype(float), self.types.count.astype(float)])
        cost = np.concatenate([np.zeros(nc), np.ones(nc)])
        ub = np.concatenate([have, np.full(nc, np.inf)])
        lp = linprog(
            cost,
            A_ub=a_ub,
            b_ub=b_ub,
            bounds=np.stack([np.zeros(2 * nc), ub], axis=1),
            method="highs",
        )
        out: dict[int, None] = {}
        if lp.status == 0:
            keep = np.asarray(lp.x[:nc])
            for c, ns in holders.items():
                drop = math.ceil(len(ns) - keep[c] - 1e-6)
                if drop > 0:
                    free = snap.gpu_free_total(np.array(ns))
                    for i in np.argsort(-free, kind="stable")[:drop]:
                        out[ns[int(i)]] = None
        del S
        for n in self.neighbourhood(snap, extra, pad):
            out[n] = None
        return list(out)

    # --- the assignment model ---------------------------------------------------------

    def assign(
        self, snap: Snapshot, nodes: list[int], d: IntArray, deadline: float
    ) -> tuple[str, ExactPlan | None]:
        """Pods of each shape (``d``) on ``nodes`` node by node and GPU by GPU, keeping
        as many pods where they are as it can: exact for these nodes (FEASIBLE with the
        plan, INFEASIBLE, or TIMEOUT)."""
        S = len(self.shapes)
        js = [j for j in range(S) if d[j] > 0]
        c: list[float] = []
        ub: list[float] = []
        integ: list[int] = []
        rows = Rows()
        add = rows.add

        def var(cost: float, upper: float, is_int: bool = True) -> int:
            c.append(cost)
            ub.append(upper)
            integ.append(1 if is_int else 0)
            return len(c) - 1

        total: dict[int, list[tuple[int, float]]] = {j: [] for j in js}
        layout: list[tuple[int, dict[int, int], list[dict[int, int]]]] = []
        for n in nodes:
            t = int(self.type_of[n])
            G = int(self.types.gpus[t])
            cur = Counter(self.index[p.shape] for p in snap.pods_on(n))
            here = [j for j in js if self.types.allowed[t, j]]
            plain = {j: var(0.0, float(d[j])) for j in here if not self.shapes[j].is_shared_gpu}
            share = [j for j in here if self.shapes[j].is_shared_gpu]
            gpus: list[dict[int, int]] = []
            opened: list[int] = []
            if share:
                for _ in range(G):
                    gpus.append(
                        {j: var(0.0, float(min(d[j], 1000 // self.milli[j]))) for j in share}
                    )
                    opened.append(var(0.0, 1.0))
            layout.append((n, plain, gpus))
            count: dict[int, list[tuple[int, float]]] = {j: [(v, 1.0)] for j, v in plain.items()}
            for g in gpus:
                for j, v in g.items():
                    count.setdefault(j, []).append((v, 1.0))
            for j, ent in count.items():
                total[j].extend(ent)
                if cur[j] and self.fewest_moves:
                    k = var(-1.0, float(cur[j]), False)  # pods of j that stay on n
                    add([(k, 1.0), *[(v, -1.0) for v, _ in ent]], -np.inf, 0.0)
            for r in range(self.vec.shape[1]):
                ent = [(v, float(self.vec[j, r])) for j, v in plain.items() if self.vec[j, r]]
                ent += [
                    (v, float(self.vec[j, r])) for g in gpus for j, v in g.items() if self.vec[j, r]
                ]
                if ent:
                    add(ent, -np.inf, float(self.cap[t, r]))
            ent = [(v, float(self.whole[j])) for j, v in plain.items() if self.whole[j]]
            ent += [(o, 1.0) for o in opened]
            if ent:
                add(ent, -np.inf, float(G))
            for gi, g in enumerate(gpus):
                add(
                    [(v, float(self.milli[j])) for j, v in g.items()] + [(opened[gi], -1000.0)],
                    -np.inf,
                    0.0,
                )
                if gi + 1 < len(gpus):
                    add([(opened[gi], 1.0), (opened[gi + 1], -1.0)], 0.0, np.inf)
        for j in js:
            if not total[j]:
                return INFEASIBLE, None  # a shape none of these nodes may hold
            add(total[j], float(d[j]), float(d[j]))
        left = deadline - time.perf_counter()
        if left <= 0.05:
            return TIMEOUT, None
        res = milp(
            np.array(c),
            constraints=rows.constraint(len(c)),
            integrality=np.array(integ),
            bounds=Bounds(np.zeros(len(c)), np.array(ub)),
            # Fewest pods moved matters less than an answer: within 5% of the best.
            options={"time_limit": left, "mip_rel_gap": 0.05},
        )
        if res.status == 2:
            return INFEASIBLE, None
        if res.x is None:
            return TIMEOUT, None
        x = np.round(res.x).astype(np.int64)
        by_node: dict[int, Config] = {}
        for n, plain, gpus in layout:
            counts = [0] * S
            for j, v in plain.items():
                counts[j] += int(x[v])
            bins = []
            for g in gpus:
                on = [j for j, v in g.items() for _ in range(int(x[v]))]
                for j in on:
                    counts[j] += 1
                if on:
                    bins.append(tuple(sorted(on)))
            by_node[n] = Config(tuple(counts), tuple(sorted(bins)))
        return FEASIBLE, ExactPlan({}, list(nodes), by_node)

    # --- the master -------------------------------------------------------------------

    def _matrix(self) -> csr_matrix:
        p = self.pool
        return coo_matrix((p.vals, (p.rows, p.idx)), shape=(len(self.shapes), len(p.cols))).tocsr()

    def _type_rows(self, n_types: int) -> csr_matrix:
        p = self.pool
        ts = [t for t, _ in p.cols]
        return coo_matrix(
            (np.ones(len(ts)), (ts, np.arange(len(ts)))), shape=(n_types, len(ts))
        ).tocsr()

    def column_generation(
        self, d: IntArray, avail: IntArray, deadline: float
    ) -> tuple[str, FloatArray | None, int, float]:
        """The master LP over (demand ``d``, ``avail`` nodes per type) by column
        generation: (INFEASIBLE proved / FEASIBLE LP / TIMEOUT, the LP's column values,
        iterations, best bound)."""
        n_types = len(self.types.count)
        S = len(self.shapes)
        best = -np.inf
        it = 0
        while True:
            it += 1
            A = self._matrix()
            T = self._type_rows(n_types)
            nc = A.shape[1]
            from scipy.sparse import hstack, identity, vstack

            a_ub = vstack(
                [
                    hstack([-A, -identity(S, format="csr")]),
                    hstack([T, csr_matrix((n_types, S))]),
                ]
            ).tocsr()
            b_ub = np.concatenate([-d.astype(float), avail.astype(float)])
            cost = np.concatenate([np.zeros(nc), np.ones(S)])
            left = deadline - time.perf_counter()
            if left <= 0:
                return TIMEOUT, None, it, best
            lp = linprog(
                cost,
                A_ub=a_ub,
                b_ub=b_ub,
                bounds=(0, None),
                method="highs",
                options={"time_limit": left},
            )
            if lp.status != 0:
                return TIMEOUT, None, it, best
            if float(lp.fun) <= _EPS:
                # Every pod covered by the pool's columns: feasible, nothing to price.
                return FEASIBLE, np.asarray(lp.x[:nc]), it, best
            marg = np.asarray(lp.ineqlin.marginals)
            pi = np.clip(-marg[:S], 0.0, 1.0)
            pi[d == 0] = 0.0
            mu = np.maximum(-marg[S:], 0.0)
            total = float(np.dot(d, pi))
            added = 0
            ok = True
            for t in range(n_types):
                if avail[t] <= 0:
                    continue
                left = deadline - time.perf_counter()
                if left <= 0:
                    ok = False
                    break
                val, upper, cfg = self.price(t, pi, d, left)
                total -= float(avail[t]) * max(upper, 0.0)
                if cfg is not None and val > mu[t] + _EPS and self.pool.add(t, cfg):
                    added += 1
            if ok:
                best = max(best, total)
                if best > _EPS * 10:
                    return INFEASIBLE, None, it, best
            if float(lp.fun) <= _EPS and (added == 0 or not ok):
                return FEASIBLE, np.asarray(lp.x[:nc]), it, best
            if added == 0:
                if float(lp.fun) > _EPS * 10:
                    # No improving column: the LP optimum is exact, and it leaves pods out.
                    return INFEASIBLE, None, it, max(best, float(lp.fun))
                return FEASIBLE, np.asarray(lp.x[:nc]), it, best
            if not ok:
                return TIMEOUT, None, it, best

    def _restricted_ip(
        self, d: IntArray, avail: IntArray, prefer: Mapping[int, int], deadline: float
    ) -> FloatArray | None:
        """An integer solution over the pool's columns covering ``d`` (those of types
        with nodes available and no more of a shape than ``d``), or None, changing the
        fewest nodes: ``prefer`` says how many nodes hold each column now, and each use
        of a column beyond that costs one."""
        n_types = len(self.types.count)
        A_all = self._matrix()
        T_all = self._type_rows(n_types)
        use = np.array(
            [
                avail[t] > 0 and all(a <= b for a, b in zip(cfg.counts, d, strict=True))
                for t, cfg in self.pool.cols
            ],
            dtype=bool,
        )
        keep = np.flatnonzero(use)
        if keep.size == 0:
            return None
        A = A_all[:, keep]
        T = T_all[:, keep]
        nc = keep.size
        from scipy.sparse import csr_matrix as csr
        from scipy.sparse import hstack, identity, vstack

        # Variables: the columns' uses, then each column's uses beyond its holders.
        eye = identity(nc, format="csr")
        cons = LinearConstraint(
            vstack(
                [
                    hstack([A, csr((len(d), nc))]),
                    hstack([T, csr((n_types, nc))]),
                    hstack([eye, -eye]),
                ]
            ).tocsr(),
            np.concatenate([d.astype(float), np.zeros(n_types), np.full(nc, -np.inf)]),
            np.concatenate(
                [
                    np.full(len(d), np.inf),
                    avail.astype(float),
                    np.array([float(prefer.get(int(c), 0)) for c in keep]),
                ]
            ),
        )
        cost = np.concatenate([np.zeros(nc), np.ones(nc)])
        ub = np.array([float(avail[self.pool.cols[c][0]]) for c in keep])
        left = deadline - time.perf_counter()
        if left <= 0.05:
            return None
        res = milp(
            cost,
            constraints=cons,
            integrality=np.concatenate([np.ones(nc), np.zeros(nc)]),
            bounds=Bounds(np.zeros(2 * nc), np.concatenate([ub, ub])),
            options={"time_limit": left},
        )
        if res.x is None:
            return None
        out = np.zeros(len(self.pool.cols))
        out[keep] = np.round(np.asarray(res.x[:nc]))
        return out

    def _dive(self, d: IntArray, avail: IntArray, deadline: float) -> FloatArray | None:
        """Residual rounding: fix the LP's whole parts (or its largest value), price the
        residual again, until the LP is integral or turns infeasible."""
        fixed = np.zeros(len(self.pool.cols))
        d = d.copy()
        avail = avail.copy()
        while True:
            status, x, _, _ = self.column_generation(np.maximum(d, 0), avail, deadline)
            if status != FEASIBLE or x is None:
                return None
            if len(fixed) < len(x):
                fixed = np.concatenate([fixed, np.zeros(len(x) - len(fixed))])
            frac = x - np.floor(x + 1e-9)
            if (np.minimum(frac, 1 - frac) < 1e-6).all():
                fixed += np.round(x)
                return fixed
            step = np.floor(x + 1e-9)
            if step.sum() == 0:
                step = np.zeros_like(x)
                step[int(np.argmax(x))] = 1.0
            for c in np.flatnonzero(step):
                t, cfg = self.pool.cols[c]
                k = int(step[c])
                fixed[c] += k
                avail[t] -= k
                d -= k * np.array(cfg.counts, dtype=np.int64)
            if (d <= 0).all():
                return fixed
            if (avail < 0).any():
                return None

    def check(
        self,
        snap: Snapshot,
        extra: PodShape | None,
        time_limit: float,
        nodes: list[int] | None = None,
        ip: bool = True,
    ) -> ExactResult:
        """Whether the pods bound in ``snap`` plus one of ``extra`` can all be placed
        (with ``nodes``: whether the pods on those nodes plus it can be placed on them,
        the rest left as they are -- a search, whose "infeasible" proves nothing about
        the cluster). ``ip`` False stops at the LP (a proof, or FEASIBLE with no plan)."""
        start = time.perf_counter()
        deadline = start + time_limit
        self.seed(snap)
        d = self.demand(snap, extra, nodes)
        if nodes is None:
            avail = self.types.count.copy()
        else:
            avail = np.bincount(self.type_of[nodes], minlength=len(self.types.count))
        status, x, it, bound = self.column_generation(d, avail, deadline)

        def done(st: str, how: str, plan: ExactPlan | None = None) -> ExactResult:
            return ExactResult(
                st, time.perf_counter() - start, how, plan, it, len(self.pool.cols), bound
            )

        if status == INFEASIBLE:
            return done(INFEASIBLE, "lp-bound")
        if status == TIMEOUT or x is None:
            return done(TIMEOUT, "time limit in the LP")
        if not ip:
            return done(FEASIBLE, "lp")
        prefer: Counter[int] = Counter(
            self.pool.key[(int(self.type_of[n]), self.config_of(snap.pods_on(n)).counts)]
            for n in (range(snap.n_nodes) if nodes is None else nodes)
            if snap.pods_on(n)
        )
        if nodes is not None or snap.n_nodes <= self.assign_nodes:
            cap = deadline
            if nodes is not None:  # a search: a few seconds, the rest is for the cluster
                cap = min(deadline, time.perf_counter() + self.assign_seconds * len(nodes) / 16)
                # The configurations the pool holds first: a small integer model.
                sol = self._restricted_ip(d, avail, prefer, min(cap, time.perf_counter() + 1.0))
                if sol is not None:
                    return done(FEASIBLE, "configurations", self._plan(sol, nodes))
            got, plan = self.assign(
                snap, list(range(snap.n_nodes)) if nodes is None else nodes, d, cap
            )
            if got == FEASIBLE:
                return done(FEASIBLE, "assignment", plan)
            if got == INFEASIBLE:
                # Exact on these nodes: a proof when they are the whole cluster.
                return done(INFEASIBLE, "assignment")
            return done(TIMEOUT, "time limit in the assignment model")
        sol = None
        frac = x - np.floor(x + 1e-9)
        if (np.minimum(frac, 1 - frac) < 1e-6).all():
            sol, how = np.round(x), "lp"
        if sol is None:
            sol, how = self._dive(d, avail, deadline), "dive"
        if sol is None:
            sol, how = self._restricted_ip(d, avail, prefer, deadline), "restricted-ip"
        if sol is None:
            return done(TIMEOUT, "no integer arrangement among the columns in time")
        return done(FEASIBLE, how, self._plan(sol, nodes))

    def _plan(self, sol: FloatArray, nodes: list[int] | None) -> ExactPlan:
        per: dict[int, list[Config]] = {}
        for c in np.flatnonzero(sol > 0.5):
            t, cfg = self.pool.cols[c]
            per.setdefault(t, []).extend([cfg] * round(float(sol[c])))
        return ExactPlan(per, None if nodes is None else list(nodes))

    # --- carrying a plan out ----------------------------------------------------------

    def apply(
        self, snap: Snapshot, plan: ExactPlan, extra: PodShape | None, pod: PodRecord | None
    ) -> list[PodRecord]:
        """Rearrange ``snap`` into ``plan`` (plus one pod of ``extra``, as ``pod``); the
        pods that changed node or devices (see :func:`~.exact_layout.apply_plan`)."""
        return apply_plan(self, snap, plan, extra, pod)
