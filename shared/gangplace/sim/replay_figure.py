"""``gangplace simulate --png FILE``: the FGD paper's figure -- unallocated GPU (% of
capacity) against the workload arrived so far (% of GPU capacity), one curve per policy,
over the whole replay and zoomed on the tail where the policies part."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gangplace.cli_exit import UsageError
from gangplace.plotting import pyplot
from gangplace.sim.replay import ReplayResult

__all__ = ["SIZE", "draw_replays"]

DPI = 100
SIZE = (12.0, 4.8)  # inches; x DPI: pixels
# The right panel starts here (% arrived): below it every policy places everything.
TAIL_FROM = 80


def draw_replays(path: str, results: Sequence[ReplayResult], title: str) -> None:
    """Write the figure of ``results`` (one replay per policy, same arrivals) to ``path``."""
    plt = pyplot()
    fig, (full, tail) = plt.subplots(1, 2, figsize=SIZE, gridspec_kw={"width_ratios": (1, 1.2)})
    end = max((r.curve[-1].arrived_pct for r in results if r.curve), default=130)
    ideal_x = list(range(0, end + 1))
    ideal_y = [max(0.0, 100.0 - x) for x in ideal_x]
    for ax in (full, tail):
        ax.plot(ideal_x, ideal_y, "--", color="#999999", linewidth=1, label="every pod placed")
    tail_top = 1.0
    for r in results:
        xs = [p.arrived_pct for p in r.curve]
        ys = [p.unallocated_gpu_pct for p in r.curve]
        line = f"{r.policy} ({r.final.unallocated_gpu_pct:.1f}% at {r.final.arrived_pct}%)"
        (drawn,) = full.plot(xs, ys, linewidth=1.6, label=line)
        tail.plot(xs, ys, linewidth=1.6, color=drawn.get_color(), marker=".", markersize=3)
        tail_top = max([tail_top, *(y for x, y in zip(xs, ys, strict=True) if x >= TAIL_FROM)])
    full.set_xlim(0, end)
    full.set_ylim(0, 100)
    full.set_title("whole replay", fontsize=10)
    tail.set_xlim(TAIL_FROM, end)
    tail.set_ylim(0, tail_top * 1.1)
    tail.set_title(f"from {TAIL_FROM}% arrived, where the policies part", fontsize=10)
    for ax in (full, tail):
        ax.set_xlabel("arrived workload (% of GPU capacity)")
        ax.grid(color="#dddddd", linewidth=0.6)
    full.set_ylabel("unallocated GPU (% of capacity)")
    full.legend(fontsize=8, loc="lower left", title="policy (unallocated at the end)",
                title_fontsize=8)  # fmt: skip
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    try:
        fig.savefig(Path(path), dpi=DPI, format="png")
    except OSError as e:
        raise UsageError(f"--png {path}: cannot write it: {e.strerror or e}") from None
    finally:
        plt.close(fig)
