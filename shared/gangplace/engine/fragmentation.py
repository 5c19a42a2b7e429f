"""GPU fragmentation as the FGD paper defines it (Weng et al., USENIX ATC 2023).

For a node n and a task shape m = (cpu c, GPUs k, thousandths per GPU d, models S):
all idle GPU of n is *fragment* for m when m cannot run there (CPU-only task, model
not allowed, too little CPU, fewer than k GPUs with d free); when m can run, only the
GPUs with less than d free are. A target workload M weighs shapes by frequency p_m:
F_n(M) = sum_m p_m F_n(m), F(M) = sum_n F_n(M). Memory plays no part, as in the paper.

The sums are taken the paper's way -- per category (q1 lack both, q2 lack GPU, q4 lack
CPU, CPU-only fits / lacks CPU, no access), each in the order of M, then the categories
in that order -- so that two placements the paper scores equal are equal here, bit for
bit (FGD truncates its scores, so a last-bit difference can flip a choice).

Everything works on raw arrays of any leading shape, so a scorer can measure a node
*after* a hypothetical placement -- many of them at once -- without touching the
snapshot.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gangplace.engine.model import PodShape
from gangplace.engine.snapshot import Snapshot

__all__ = [
    "DEFAULT_COVERAGE",
    "FragTable",
    "TargetWorkload",
    "TaskShape",
    "frag_amount",
    "fragmentation",
    "fragmentation_rate",
    "node_fragmentation",
    "node_satisfiable",
    "stranded_gpus",
    "typical_workload",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# The paper's categories, in the order it sums them (q3, the usable part, is skipped).
Q1_LACK_BOTH, Q2_LACK_GPU, Q4_LACK_CPU, XL_SATISFIED, XR_LACK_CPU, NO_ACCESS = range(6)
_N_CATEGORIES = 6


@dataclass(frozen=True, slots=True, order=True)
class TaskShape:
    """The paper's view of a pod: CPU (milli), thousandths per GPU, GPU count, models.

    ``memory`` (bytes) is not part of the paper's shape and takes no part in equality;
    it is the least memory seen for the shape, used only to tell stranded GPUs.
    """

    cpu: int
    gpu_milli: int
    gpu_count: int
    models: tuple[str, ...] = ()
    memory: int = field(default=0, compare=False)

    @classmethod
    def of(cls, shape: PodShape) -> TaskShape:
        mem = shape.request("memory")
        if not shape.is_gpu:
            return cls(shape.request("cpu"), 0, 0, (), mem)
        return cls(shape.request("cpu"), shape.gpu_milli, shape.gpu_count, shape.gpu_models, mem)

    @property
    def model_key(self) -> str:
        """The models as the paper's pods carry them (``A|B``), which is how it sorts."""
        return "|".join(self.models)

    def describe(self) -> str:
        cpu = f"cpu={self.cpu / 1000:g}"
        if self.gpu_milli == 0:
            gpu = "no GPU"
        elif self.gpu_milli < 1000:
            gpu = f"gpu={self.gpu_milli}m"
        else:
            gpu = f"gpu={self.gpu_count}"
        return f"{cpu} {gpu}" + (f" on {self.model_key}" if self.models else "")


@dataclass(frozen=True, slots=True)
class TargetWorkload:
    """Typical task shapes with their frequencies (summing to 1)."""

    shapes: tuple[TaskShape, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.shapes) != len(self.weights):
            raise ValueError("one weight per shape")
        if any(not 0 <= w <= 1 for w in self.weights):
            raise ValueError("weights must lie in [0, 1]")

    @classmethod
    def from_shapes(
        cls, shapes: Iterable[PodShape | TaskShape], coverage: float = 0.95
    ) -> TargetWorkload:
        """The most frequent shapes covering ``coverage`` of the pods, as the paper
        builds M from a pod list: ties in count go to the larger shape (cpu, then GPU
        share, GPU count, models), and the frequencies are renormalised over the kept
        shapes with the paper's own floating-point steps."""
        if not 0 < coverage <= 1:
            raise ValueError(f"coverage must be in (0, 1], got {coverage}")
        counts: Counter[TaskShape] = Counter()
        least_memory: dict[TaskShape, int] = {}
        for s in shapes:
            t = s if isinstance(s, TaskShape) else TaskShape.of(s)
            counts[t] += 1
            least_memory[t] = min(least_memory.get(t, t.memory), t.memory)
        if not counts:
            return cls((), ())
        total = float(sum(counts.values()))
        ranked = sorted(
            counts.items(),
            key=lambda kv: (kv[1], kv[0].cpu, kv[0].gpu_milli, kv[0].gpu_count, kv[0].model_key),
            reverse=True,
        )
        expected = round(coverage * 100, 9) * total / 100.0
        chosen: list[tuple[TaskShape, int]] = []
        covered = 0.0
        for shape, n in ranked:
            if covered >= expected:
                break
            chosen.append((shape, n))
            covered += n
        share = covered / total
        kept = tuple(
            TaskShape(s.cpu, s.gpu_milli, s.gpu_count, s.models, least_memory[s]) for s, _ in chosen
        )
        whole = len(chosen) == len(ranked)
        weights = tuple(n / total if whole else (n / total) / share for _, n in chosen)
        return cls(kept, weights)

    @classmethod
    def of(cls, weighted: Sequence[tuple[TaskShape, float]]) -> TargetWorkload:
        total = sum(w for _, w in weighted)
        return cls(tuple(s for s, _ in weighted), tuple(w / total for _, w in weighted))


@dataclass(frozen=True, slots=True, eq=False)
class FragTable:
    """A workload compiled against one cluster's GPU model codes, for vector maths."""

    cpu: IntArray  # [S]
    milli: IntArray  # [S]
    count: IntArray  # [S]
    weight: FloatArray  # [S]
    cpu_only: BoolArray  # [S]
    # allowed[s, code]: shape s may use GPU model ``code``; the last column is "no GPU".
    allowed: BoolArray

    @classmethod
    def compile(cls, workload: TargetWorkload, models: Sequence[str]) -> FragTable:
        code = {m: i for i, m in enumerate(models)}
        n = len(workload.shapes)
        allowed = np.ones((n, len(models) + 1), dtype=bool)
        for i, s in enumerate(workload.shapes):
            if s.models:
                allowed[i, :] = False
                for m in s.models:
                    if m in code:
                        allowed[i, code[m]] = True
        return cls(
            cpu=np.array([s.cpu for s in workload.shapes], dtype=np.int64),
            milli=np.array([s.gpu_milli for s in workload.shapes], dtype=np.int64),
            count=np.array([s.gpu_count for s in workload.shapes], dtype=np.int64),
            weight=np.array(workload.weights, dtype=np.float64),
            cpu_only=np.array([s.gpu_milli == 0 for s in workload.shapes], dtype=bool),
            allowed=allowed,
        )


_TABLES: dict[tuple[int, tuple[str, ...]], tuple[TargetWorkload, FragTable]] = {}


def table_for(snap: Snapshot, workload: TargetWorkload) -> FragTable:
    """The workload compiled for ``snap``'s model codes (memoised)."""
    key = (id(workload), tuple(snap.gpu_models))
    hit = _TABLES.get(key)
    if hit is None or hit[0] is not workload:
        if len(_TABLES) > 64:
            _TABLES.clear()
        hit = (workload, FragTable.compile(workload, snap.gpu_models))
        _TABLES[key] = hit
    return hit[1]


def frag_amount(
    table: FragTable, free_cpu: IntArray, gpu_free: IntArray, model: IntArray
) -> FloatArray:
    """F_n(M) in thousandths of a GPU for every node state given.

    ``free_cpu`` has any shape X, ``gpu_free`` X + (GPUs,) (negative entries are
    padding), ``model`` X (model codes, -1 for a node without GPUs).
    """
    r = np.maximum(gpu_free, 0)
    idle = r.sum(axis=-1)
    if table.cpu.size == 0:
        return np.zeros(idle.shape, dtype=np.float64)
    r_s = r[..., None, :]  # X + (1, G)
    d = table.milli[:, None]  # (S, 1)
    has_room = r_s >= d
    gpu_ok = has_room.sum(axis=-1) >= table.count  # X + (S,)
    sliver = np.where(has_room, 0, r_s).sum(axis=-1)  # X + (S,)
    cpu_ok = free_cpu[..., None] >= table.cpu  # X + (S,)
    access = np.moveaxis(table.allowed[:, model], 0, -1)  # X + (S,)
    idle_s = idle[..., None]
    cat = np.where(
        table.cpu_only,
        np.where(cpu_ok, XL_SATISFIED, XR_LACK_CPU),
        np.where(
            ~access,
            NO_ACCESS,
            np.where(
                gpu_ok,
                np.where(cpu_ok, Q2_LACK_GPU, Q4_LACK_CPU),
                np.where(cpu_ok, Q2_LACK_GPU, Q1_LACK_BOTH),
            ),
        ),
    )
    amount = np.where(~table.cpu_only & access & gpu_ok & cpu_ok, sliver, idle_s)
    terms = table.weight * amount.astype(np.float64)
    out = np.zeros(idle.shape, dtype=np.float64)
    for c in range(_N_CATEGORIES):
        hit = cat == c
        if hit.any():
            # cumsum adds strictly left to right, as the paper's loop does.
            out = out + np.cumsum(np.where(hit, terms, 0.0), axis=-1)[..., -1]
    return out


def node_fragmentation(
    snap: Snapshot,
    workload: TargetWorkload,
    nodes: IntArray | slice = slice(None),
    *,
    free_cpu: IntArray | None = None,
    gpu_free: IntArray | None = None,
) -> FloatArray:
    """F_n(M) in thousandths of a GPU for ``nodes``; ``free_cpu`` / ``gpu_free`` may
    replace the snapshot's figures for those nodes (a what-if)."""
    cpu_j = snap.res_index["cpu"]
    if free_cpu is None:
        free_cpu = snap.alloc[nodes, cpu_j] - snap.used[nodes, cpu_j]
    g = snap.gpu_free[nodes] if gpu_free is None else gpu_free
    return frag_amount(table_for(snap, workload), free_cpu, g, snap.gpu_model[nodes])


def node_satisfiable(
    snap: Snapshot, workload: TargetWorkload, nodes: IntArray | slice = slice(None)
) -> BoolArray:
    """Nodes where at least one GPU shape of M could start now: CPU, memory (the least
    any pod of the shape asked for), model and GPUs all fit. With no GPU shape in M
    (no pods at all, or none with GPUs) every node is: no typical GPU task is kept from
    an idle GPU, so none is stranded."""
    if not any(t.gpu_milli for t in workload.shapes):
        return np.ones(snap.gpu_free[nodes].shape[0], dtype=bool)
    cpu_j = snap.res_index["cpu"]
    free_cpu = snap.alloc[nodes, cpu_j] - snap.used[nodes, cpu_j]
    mem_j = snap.res_index.get("memory")
    free_mem = (
        snap.alloc[nodes, mem_j] - snap.used[nodes, mem_j]
        if mem_j is not None
        else np.full(free_cpu.shape, 1 << 62, dtype=np.int64)
    )
    r_g = np.maximum(snap.gpu_free[nodes], 0)
    model = snap.gpu_model[nodes]
    table = table_for(snap, workload)
    any_ok = np.zeros(r_g.shape[0], dtype=bool)
    for i, shape in enumerate(workload.shapes):
        if shape.gpu_milli == 0:
            continue
        ok = ((r_g >= shape.gpu_milli).sum(axis=1) >= shape.gpu_count) & (free_cpu >= shape.cpu)
        ok &= free_mem >= shape.memory
        ok &= table.allowed[i, model]
        any_ok |= ok
    return any_ok


def stranded_gpus(
    snap: Snapshot, workload: TargetWorkload, nodes: IntArray | slice = slice(None)
) -> FloatArray:
    """Idle thousandths of a GPU on nodes where no GPU shape of M can start."""
    idle = np.maximum(snap.gpu_free[nodes], 0).sum(axis=1)
    return np.where(node_satisfiable(snap, workload, nodes), 0.0, idle.astype(np.float64))


def fragmentation(snap: Snapshot, workload: TargetWorkload) -> float:
    """Cluster F(M) in GPUs."""
    return float(node_fragmentation(snap, workload).sum()) / 1000.0


def fragmentation_rate(snap: Snapshot, workload: TargetWorkload) -> float:
    """F(M) / idle GPUs, in percent (0 when nothing is idle)."""
    idle = float(snap.gpu_free_total().sum())
    return 100.0 * float(node_fragmentation(snap, workload).sum()) / idle if idle > 0 else 0.0


# The paper keeps the most frequent shapes covering 95% of the pods.
DEFAULT_COVERAGE = 0.95


def typical_workload(snap: Snapshot, coverage: float = DEFAULT_COVERAGE) -> TargetWorkload:
    """FGD's typical workload of a cluster: the shapes of its running pods (of every
    pod when none runs), the most frequent covering ``coverage``. The one answer for
    every report -- ``gangplace report``, ``corral-descheduler plan`` and ``kubectl
    corral frag`` measure against the same workload. No pods: an empty workload, and
    nothing counts as fragmented (there is no typical task to be kept from a GPU)."""
    shapes = [p.shape for p in snap.pods if p.node >= 0] or [p.shape for p in snap.pods]
    task: dict[PodShape, TaskShape] = {}
    for s in shapes:
        if s not in task:
            task[s] = TaskShape.of(s)
    return TargetWorkload.from_shapes([task[s] for s in shapes], coverage)
