"""``kubectl corral frag --png FILE``: every GPU node as a bar of its GPUs -- used, idle
and usable, idle but fragmented (FGD, for the cluster's typical tasks) -- grouped by
GPU model; with ``--plan`` a second panel shows the same nodes, in the same order,
after the plan's moves. The figures are the report's (the engine's), drawn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangplace.engine.report import FragmentationReport, NodeRow
from gangplace.plotting import pyplot

from kubectl_corral.reader import PluginError

__all__ = ["SIZE_ONE", "SIZE_TWO", "draw_frag"]

DPI = 100
# The picture's size in inches (x DPI: pixels), one panel and two (before and after).
SIZE_ONE = (12.0, 5.0)
SIZE_TWO = (12.0, 8.6)
# Node names under the bars up to this many nodes; beyond, only the model groups.
NAMED_NODES = 48

USED, USABLE, FRAGMENTED = "#4c72b0", "#8fd19e", "#e1812c"


@dataclass(frozen=True, slots=True)
class _Slot:
    x: float
    node: str
    model: str


def _layout(nodes: Sequence[NodeRow]) -> tuple[list[_Slot], list[tuple[str, float, float, int]]]:
    """Bars grouped by GPU model (most GPUs first), in each group the most fragmented
    node first; a gap between groups. Returns the slots and (model, from, to, nodes)
    of each group."""
    by_model: dict[str, list[NodeRow]] = {}
    for n in nodes:
        by_model.setdefault(n.model or "(unlabelled)", []).append(n)
    models = sorted(by_model, key=lambda m: (-sum(n.gpus for n in by_model[m]), m))
    slots: list[_Slot] = []
    groups: list[tuple[str, float, float, int]] = []
    x = 0.0
    for m in models:
        rows = sorted(by_model[m], key=lambda n: (-n.fragmented, -n.idle, n.node))
        start = x
        for n in rows:
            slots.append(_Slot(x, n.node, m))
            x += 1
        groups.append((m, start - 0.5, x - 0.5, len(rows)))
        x += max(1.0, 0.02 * len(nodes))
    return slots, groups


def _gpus(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.005 else f"{x:.2f}"


def _panel(
    ax: Any,
    rep: FragmentationReport,
    slots: list[_Slot],
    groups: list[tuple[str, float, float, int]],
    label: str,
    top: float,
) -> None:
    rows = {n.node: n for n in rep.nodes}
    xs, used, usable, frag = [], [], [], []
    for s in slots:
        n = rows.get(s.node)
        if n is None:
            continue
        xs.append(s.x)
        used.append(max(n.gpus - n.idle, 0.0))
        usable.append(max(n.idle - n.fragmented, 0.0))
        frag.append(n.fragmented)
    width = 0.85 if len(slots) <= 400 else 1.0
    ax.bar(xs, used, width, color=USED, label="used", linewidth=0)
    ax.bar(xs, usable, width, bottom=used, color=USABLE, label="idle, usable", linewidth=0)
    bottom = [u + v for u, v in zip(used, usable, strict=True)]
    ax.bar(xs, frag, width, bottom=bottom, color=FRAGMENTED, label="idle, fragmented")
    t = rep.total
    ax.set_title(
        f"{label}: {t.gpus} GPUs on {t.nodes} nodes, {_gpus(t.allocated)} used, "
        f"{_gpus(t.idle)} idle, {_gpus(t.fragmented)} fragmented "
        f"({t.frag_rate:.0f}% of idle)",
        loc="left",
        fontsize=10,
    )
    ax.set_ylabel("GPUs")
    ax.set_ylim(0, top * 1.22)
    ax.set_xlim(-1, (slots[-1].x + 1) if slots else 1)
    ax.grid(axis="y", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    span = (slots[-1].x + 2) if slots else 1.0
    for model, lo, hi, count in groups:
        ax.axvspan(lo, hi, color="#f2f2f2", zorder=0)
        wide = (hi - lo) / span > 0.14
        text = f"{model} ({count} nodes)" if wide else model
        ax.text(
            (lo + hi) / 2,
            top * 1.19,
            text,
            ha="center",
            va="top",
            fontsize=8,
            rotation=0 if wide or len(groups) == 1 else 90,
            clip_on=True,
        )
    if len(slots) <= NAMED_NODES:
        ax.set_xticks([s.x for s in slots])
        ax.set_xticklabels([s.node for s in slots], rotation=90, fontsize=7)
    else:
        ax.set_xticks([])


def draw_frag(
    path: str,
    title: str,
    before: FragmentationReport,
    after: FragmentationReport | None = None,
) -> None:
    """Write the picture to ``path`` (PNG); ``after``: the report after a plan's moves."""
    plt = pyplot()
    panels = [("now", before)] + ([("after the plan", after)] if after is not None else [])
    size = SIZE_ONE if after is None else SIZE_TWO
    fig, axes = plt.subplots(len(panels), 1, figsize=size, squeeze=False)
    slots, groups = _layout(before.nodes)
    top = max([n.gpus for n in before.nodes], default=1) or 1
    for ax, (label, rep) in zip(axes[:, 0], panels, strict=True):
        _panel(ax, rep, slots, groups, label, top)
        if not slots:
            ax.text(0.5, 0.5, "no GPU nodes", ha="center", va="center", transform=ax.transAxes)
    if len(slots) > NAMED_NODES:
        axes[-1, 0].set_xlabel(
            f"{len(slots)} GPU nodes, one bar each, grouped by GPU model, most fragmented first"
        )
    fig.suptitle(title, fontsize=12, x=0.01, ha="left")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", ncol=3, fontsize=9, frameon=False)
    fig.text(
        0.01,
        0.005,
        "fragmented: idle GPUs that a share of the cluster's typical tasks cannot use where "
        "they are (FGD)",
        fontsize=8,
        color="#555555",
    )
    fig.tight_layout(rect=(0, 0.02, 1, 0.95))
    try:
        fig.savefig(Path(path), dpi=DPI, format="png")
    except OSError as e:
        raise PluginError(f"--png {path}: cannot write it: {e.strerror or e}") from None
    finally:
        plt.close(fig)
