"""The fragmentation report that the CLI, the descheduler and kubectl-corral print.

Per node, per GPU model and for the cluster: GPUs, allocated, idle, fragmented (FGD's
F(M)) and stranded (idle GPUs on nodes where no typical GPU task can start -- for want
of CPU, memory or whole devices), and the largest gang of a few probe shapes that fits
all-or-nothing right now. :func:`compare_reports` sets two reports side by side (before
and after a plan), per model and for the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gangplace.engine.feasibility import member_capacity
from gangplace.engine.fragmentation import TargetWorkload, node_fragmentation, node_satisfiable
from gangplace.engine.gang import Gang, GangOptions, place_gang
from gangplace.engine.model import PodShape
from gangplace.engine.snapshot import Snapshot

__all__ = [
    "WIDTH",
    "FragmentationReport",
    "ModelRow",
    "NodeRow",
    "ReportDelta",
    "compare_reports",
    "fit_label",
    "fragmentation_report",
    "largest_gang",
    "model_width",
    "probe_label",
    "render_comparison",
    "render_nodes",
    "render_report",
    "render_workload",
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
    stranded: float = 0.0
    free_memory: int = 0


@dataclass(slots=True)
class FragmentationReport:
    models: list[ModelRow]
    total: ModelRow
    largest: list[tuple[str, int]] = field(default_factory=list)
    worst_nodes: list[NodeRow] = field(default_factory=list)
    nodes: list[NodeRow] = field(default_factory=list)
    # What "fragmented" was measured against: each typical task and its share.
    workload: list[tuple[str, float]] = field(default_factory=list)
    # Where the probe shapes of ``largest`` come from, said beside them.
    probes_from: str = ""

    def to_dict(self, with_nodes: bool = False) -> dict[str, Any]:
        row = {**asdict(self.total), "frag_rate_pct": round(self.total.frag_rate, 2)}
        out: dict[str, Any] = {
            "total": row,
            "models": [{**asdict(m), "frag_rate_pct": round(m.frag_rate, 2)} for m in self.models],
            "largest_gang": [{"shape": s, "pods": n} for s, n in self.largest],
            "worst_nodes": [asdict(n) for n in self.worst_nodes],
            "workload": [{"task": t, "share": round(w, 4)} for t, w in self.workload],
            "probes_from": self.probes_from,
        }
        if with_nodes:
            out["nodes"] = [asdict(n) for n in self.nodes]
        return out


def largest_gang(snap: Snapshot, shape: PodShape) -> int:
    """How many pods of ``shape`` fit all-or-nothing right now, by the engine's own
    gang placement (a dry run: the snapshot is left as it was).

    Pods of one shape on different nodes never compete, so the sum of per-node
    capacities bounds the answer; the gang placement confirms it (and if it ever fell
    short, the largest size it does place is found by bisection).
    """
    bound = int(member_capacity(snap, shape).sum())
    if bound == 0:
        return 0

    def fits(n: int) -> bool:
        gang = Gang.uniform("probe", shape, n)
        return place_gang(snap, gang, options=GangOptions(dry_run=True, best_effort=False)).ok

    if fits(bound):
        return bound
    lo, hi = 0, bound  # fits(lo), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def fragmentation_report(
    snap: Snapshot,
    workload: TargetWorkload,
    probes: Sequence[PodShape] = (),
    worst: int = 5,
    probes_from: str = "",
) -> FragmentationReport:
    """Per node, per GPU model and cluster figures, in GPUs. ``probes_from`` says where
    the probe shapes come from (two reports with different probes then say why their
    largest gangs differ)."""
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
    mem_j = snap.res_index.get("memory")

    def node_row(i: int) -> NodeRow:
        n = int(gpu_nodes[i])
        return NodeRow(
            node=snap.node_names[n],
            model=snap.nodes[n].gpu_model,
            gpus=int(total_gpus[i]),
            idle=round(float(idle[i]), 3),
            fragmented=round(float(frag[i]), 3),
            free_cpu=int(snap.alloc[n, cpu_j] - snap.used[n, cpu_j]),
            stranded=round(float(stranded[i]), 3),
            free_memory=int(snap.alloc[n, mem_j] - snap.used[n, mem_j]) if mem_j is not None else 0,
        )

    all_nodes = [node_row(i) for i in range(gpu_nodes.size)]
    order = np.argsort(-frag, kind="stable")[:worst]
    worst_nodes = [all_nodes[int(i)] for i in order if frag[i] > 0]
    largest = [(probe_label(p), largest_gang(snap, p)) for p in probes]
    tasks = [(t.describe(), w) for t, w in zip(workload.shapes, workload.weights, strict=True)]
    return FragmentationReport(rows, total, largest, worst_nodes, all_nodes, tasks, probes_from)


def probe_label(shape: PodShape) -> str:
    """A probe's shape with where it may run: a probe made from a waiting gang carries
    its node selector and GPU models, and fits only where they allow."""
    where = [f"{k}={v}" for k, v in shape.node_selector]
    if shape.gpu_models:
        where.append(f"GPU {'|'.join(shape.gpu_models)}")
    if shape.affinity:
        where.append("node affinity")
    return shape.describe() + (f" ({', '.join(where)})" if where else "")


@dataclass(frozen=True, slots=True)
class ReportDelta:
    """One model (or the cluster, ``model == "all"``) before and after a plan."""

    model: str
    before: ModelRow
    after: ModelRow

    @property
    def freed_fragment(self) -> float:
        return round(self.before.fragmented - self.after.fragmented, 3)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "before": {**asdict(self.before), "frag_rate_pct": round(self.before.frag_rate, 2)},
            "after": {**asdict(self.after), "frag_rate_pct": round(self.after.frag_rate, 2)},
        }


def compare_reports(before: FragmentationReport, after: FragmentationReport) -> list[ReportDelta]:
    """Per-model rows (then the cluster row) of two reports of the same cluster."""
    after_by = {m.model: m for m in after.models}
    out = [ReportDelta(m.model, m, after_by[m.model]) for m in before.models if m.model in after_by]
    out.append(ReportDelta("all", before.total, after.total))
    return out


def _fmt(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.005 else f"{x:.2f}"


# Tables fit this many columns: a GPU model label wider than its column is cut in the
# middle (``NVIDIA-A100-SXM4-80GB`` fits; the JSON output has every label whole).
WIDTH = 100


def model_width(models: Sequence[str], rest: int, least: int = 14) -> int:
    """The width of a GPU-model column: the longest label and a space, at least
    ``least``, at most what ``WIDTH`` leaves beside ``rest`` columns of figures."""
    return max(least, min(max((len(m) for m in models), default=0) + 2, WIDTH - rest))


def fit_label(text: str, width: int) -> str:
    """``text`` in ``width - 1`` characters (a space is left before the next column):
    a longer one keeps its start and its end, which tell GPU models apart."""
    room = width - 1
    if len(text) <= room:
        return text
    head = (room - 1) // 2
    return f"{text[:head]}~{text[len(text) - (room - 1 - head) :]}"


def render_report(rep: FragmentationReport, title: str = "GPU fragmentation") -> str:
    w = model_width([m.model for m in rep.models], 65)
    head = f"{'GPU model':<{w}}{'nodes':>7}{'GPUs':>7}{'used':>9}{'idle':>9}{'fragmented':>12}"
    head += f"{'stranded':>10}{'frag rate':>11}"
    lines = [title, head, "-" * len(head)]
    for m in [*rep.models, rep.total]:
        if m is rep.total:
            lines.append("-" * len(head))
        lines.append(
            f"{fit_label(m.model, w):<{w}}{m.nodes:>7}{m.gpus:>7}{_fmt(m.allocated):>9}"
            f"{_fmt(m.idle):>9}{_fmt(m.fragmented):>12}{_fmt(m.stranded):>10}"
            f"{m.frag_rate:>10.1f}%"
        )
    if any(abs(m.allocated - round(m.allocated)) > 0.0005 for m in rep.models):
        lines.append(
            "used and idle count shares of a GPU: a pod holding 500m of one (GPU sharing) "
            "uses 0.5 GPU"
        )
    lines.extend(render_workload(rep))
    if rep.largest:
        lines.append("")
        lines.append("Largest gang that fits all-or-nothing now:")
        if rep.probes_from:
            lines.append(f"  (probe shapes: {rep.probes_from})")
        lines.extend(f"  {n:>6} pods of {s}" for s, n in rep.largest)
    if rep.worst_nodes:
        lines.append("")
        lines.append("Most fragmented nodes:")
        nw = max(25, *(len(n.node) + 1 for n in rep.worst_nodes))
        mw = max(11, min(max(len(n.model) for n in rep.worst_nodes) + 1, WIDTH - nw - 47))
        lines.extend(
            f"  {n.node:<{nw}}{fit_label(n.model, mw):<{mw}}{n.gpus} GPUs, idle "
            f"{_fmt(n.idle)}, fragmented {_fmt(n.fragmented)}, free cpu {n.free_cpu / 1000:g}"
            for n in rep.worst_nodes
        )
    return "\n".join(lines)


def _wrap_items(head: str, items: list[str], width: int = 88) -> list[str]:
    """``head`` then ``items`` joined by commas, broken between items, never inside."""
    lines, line = [], head
    for i, item in enumerate(items):
        text = item + ("," if i < len(items) - 1 else "")
        if len(line) + len(text) + 1 > width and line.strip() != head.strip():
            lines.append(line.rstrip())
            line = "    "
        line += text + " "
    lines.append(line.rstrip())
    return lines


def render_workload(rep: FragmentationReport) -> list[str]:
    """What "fragmented" counts, and the workload it was measured against."""
    if not rep.workload:
        return [
            "fragmented: no pods to learn the typical workload from, so no idle GPU is "
            "counted as fragmented"
        ]
    lines = [
        "fragmented: idle GPUs that a share of the typical workload cannot use where they "
        "are (FGD),",
        *_wrap_items(
            "  measured against the running pods' typical tasks: ",
            [f"{100 * w:.0f}% {t}" for t, w in rep.workload],
        ),
    ]
    if any(t.endswith("no GPU") for t, _ in rep.workload):
        lines.append(
            "  (a task that needs no GPU counts every idle GPU of a node as fragmented; "
            "docs/engine.md)"
        )
    return lines


def render_nodes(rep: FragmentationReport, limit: int | None = None) -> str:
    """One line per GPU node, most fragmented first."""
    rows = sorted(rep.nodes, key=lambda n: (-n.fragmented, n.node))[:limit]
    nw = max([26, *(len(n.node) for n in rows)]) + 2
    mw = max([8, *(len(n.model) for n in rows)]) + 2
    head = f"{'node':<{nw}}{'model':<{mw}}{'GPUs':>5}{'idle':>8}{'frag':>8}"
    head += f"{'stranded':>10}{'free cpu':>10}"
    lines = [head, "-" * len(head)]
    lines.extend(
        f"{n.node:<{nw}}{n.model:<{mw}}{n.gpus:>5}{_fmt(n.idle):>8}{_fmt(n.fragmented):>8}"
        f"{_fmt(n.stranded):>10}{n.free_cpu / 1000:>10g}"
        for n in rows
    )
    return "\n".join(lines)


def render_comparison(before: FragmentationReport, after: FragmentationReport) -> str:
    """Before and after a plan, side by side: the cluster, then each GPU model."""
    b, a = before.total, after.total
    w = 22
    lines = [f"{'':<{w}}{'before':>10}{'after':>10}{'change':>10}"]
    for label, x, y in (
        ("idle GPUs", b.idle, a.idle),
        ("fragmented GPUs", b.fragmented, a.fragmented),
        ("stranded GPUs", b.stranded, a.stranded),
        ("fragmentation rate %", b.frag_rate, a.frag_rate),
    ):
        lines.append(f"{label:<{w}}{_fmt(x):>10}{_fmt(y):>10}{_fmt(y - x):>10}")
    # A probe's shape (with its node selector) is longer than the label column: the
    # rows are numbered and the shapes follow the table.
    largest = list(zip(before.largest, after.largest, strict=False))
    for i, ((_, n0), (_, n1)) in enumerate(largest, 1):
        lines.append(f"{f'largest gang, probe {i}':<{w}}{n0:>10}{n1:>10}{n1 - n0:>10}")
    lines.extend(f"  probe {i}: {shape}" for i, ((shape, _), _) in enumerate(largest, 1))
    deltas = [d for d in compare_reports(before, after) if d.model != "all"]
    if deltas:
        lines.append("")
        mw = model_width([d.model for d in deltas], 52)
        lines.append(
            f"{'GPU model':<{mw}}{'fragmented before':>19}{'after':>8}"
            f"{'stranded before':>17}{'after':>8}"
        )
        lines.extend(
            f"{fit_label(d.model, mw):<{mw}}{_fmt(d.before.fragmented):>19}"
            f"{_fmt(d.after.fragmented):>8}{_fmt(d.before.stranded):>17}{_fmt(d.after.stranded):>8}"
            for d in deltas
        )
    return "\n".join(lines)
