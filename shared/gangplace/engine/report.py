"""The fragmentation report that the CLI, the descheduler and kubectl-corral print.

Per GPU model and for the cluster: GPUs, allocated, idle, fragmented (FGD's F(M)) and
stranded (idle GPUs on nodes where no typical GPU task can start), and the largest gang
of a few probe shapes that fits all-or-nothing right now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .feasibility import member_capacity
from .fragmentation import TargetWorkload, node_fragmentation, node_satisfiable
from .model import PodShape
from .snapshot import Snapshot

__all__ = [
    "FragmentationReport",
    "ModelRow",
    "NodeRow",
    "fragmentation_report",
    "largest_gang",
    "render_comparison",
    "render_report",
]


@dataclass(frozen=True, slots=True)
class ModelRow:
    model: str
    nodes: int
    gpus: int
    allocated: float
    idle: float
    fragmented: float
    stranded: float

    @property
    def frag_rate(self) -> float:
        """Fragmented / idle, in percent."""
        return 100.0 * self.fragmented / self.idle if self.idle > 0 else 0.0


@dataclass(frozen=True, slots=True)
class NodeRow:
    node: str
    model: str
    gpus: int
    idle: float
    fragmented: float
    free_cpu: int


@dataclass(slots=True)
class FragmentationReport:
    models: list[ModelRow]
    total: ModelRow
    largest: list[tuple[str, int]] = field(default_factory=list)
    worst_nodes: list[NodeRow] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        row = {**asdict(self.total), "frag_rate_pct": round(self.total.frag_rate, 2)}
        return {
            "total": row,
            "models": [{**asdict(m), "frag_rate_pct": round(m.frag_rate, 2)} for m in self.models],
            "largest_gang": [{"shape": s, "pods": n} for s, n in self.largest],
            "worst_nodes": [asdict(n) for n in self.worst_nodes],
        }


def largest_gang(snap: Snapshot, shape: PodShape) -> int:
    """How many pods of ``shape`` fit all-or-nothing right now.

    Pods of one shape on different nodes never compete, so the greedy gang placement
    reaches exactly the sum of per-node capacities; we count that directly.
    """
    return int(member_capacity(snap, shape).sum())


def fragmentation_report(
    snap: Snapshot,
    workload: TargetWorkload,
    probes: Sequence[PodShape] = (),
    worst: int = 5,
) -> FragmentationReport:
    gpu_nodes = np.flatnonzero(snap.gpu_total > 0)
    frag = node_fragmentation(snap, workload, gpu_nodes) / 1000.0
    idle = snap.gpu_free_total(gpu_nodes) / 1000.0
    stranded = np.where(node_satisfiable(snap, workload, gpu_nodes), 0.0, idle)
    total_gpus = snap.gpu_total[gpu_nodes]
    models = snap.gpu_model[gpu_nodes]

    def row(name: str, sel: np.ndarray[Any, np.dtype[np.bool_]]) -> ModelRow:
        gpus = int(total_gpus[sel].sum())
        return ModelRow(
            model=name,
            nodes=int(sel.sum()),
            gpus=gpus,
            allocated=round(gpus - float(idle[sel].sum()), 3),
            idle=round(float(idle[sel].sum()), 3),
            fragmented=round(float(frag[sel].sum()), 3),
            stranded=round(float(stranded[sel].sum()), 3),
        )

    rows = [row(m or "(unlabelled)", models == i) for i, m in enumerate(snap.gpu_models)]
    total = row("all", np.ones(gpu_nodes.size, dtype=bool))
    cpu_j = snap.res_index["cpu"]
    order = np.argsort(-frag, kind="stable")[:worst]
    worst_nodes = [
        NodeRow(
            node=snap.node_names[int(gpu_nodes[i])],
            model=snap.nodes[int(gpu_nodes[i])].gpu_model,
            gpus=int(total_gpus[i]),
            idle=round(float(idle[i]), 3),
            fragmented=round(float(frag[i]), 3),
            free_cpu=int(snap.alloc[gpu_nodes[i], cpu_j] - snap.used[gpu_nodes[i], cpu_j]),
        )
        for i in order
        if frag[i] > 0
    ]
    largest = [(p.describe(), largest_gang(snap, p)) for p in probes]
    return FragmentationReport(rows, total, largest, worst_nodes)


def _fmt(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.005 else f"{x:.2f}"


def render_report(rep: FragmentationReport, title: str = "GPU fragmentation") -> str:
    head = f"{'GPU model':<14}{'nodes':>7}{'GPUs':>7}{'used':>9}{'idle':>9}{'fragmented':>12}"
    head += f"{'stranded':>10}{'frag rate':>11}"
    lines = [title, head, "-" * len(head)]
    for m in [*rep.models, rep.total]:
        if m is rep.total:
            lines.append("-" * len(head))
        lines.append(
            f"{m.model:<14}{m.nodes:>7}{m.gpus:>7}{_fmt(m.allocated):>9}{_fmt(m.idle):>9}"
            f"{_fmt(m.fragmented):>12}{_fmt(m.stranded):>10}{m.frag_rate:>10.1f}%"
        )
    if rep.largest:
        lines.append("")
        lines.append("Largest gang that fits all-or-nothing now:")
        lines.extend(f"  {n:>6} pods of {s}" for s, n in rep.largest)
    if rep.worst_nodes:
        lines.append("")
        lines.append("Most fragmented nodes:")
        lines.extend(
            f"  {n.node:<24} {n.model:<10} {n.gpus} GPUs, idle {_fmt(n.idle)}, "
            f"fragmented {_fmt(n.fragmented)}, free cpu {n.free_cpu / 1000:g}"
            for n in rep.worst_nodes
        )
    return "\n".join(lines)


def render_comparison(before: FragmentationReport, after: FragmentationReport) -> str:
    """Cluster figures before and after a plan, side by side."""
    b, a = before.total, after.total
    lines = [f"{'':<22}{'before':>10}{'after':>10}"]
    for label, x, y in (
        ("idle GPUs", b.idle, a.idle),
        ("fragmented GPUs", b.fragmented, a.fragmented),
        ("stranded GPUs", b.stranded, a.stranded),
        ("fragmentation rate %", b.frag_rate, a.frag_rate),
    ):
        lines.append(f"{label:<22}{_fmt(x):>10}{_fmt(y):>10}")
    for (shape, n0), (_, n1) in zip(before.largest, after.largest, strict=False):
        lines.append(f"{'largest gang ' + shape:<22}{n0:>10}{n1:>10}")
    return "\n".join(lines)
