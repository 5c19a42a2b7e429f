"""``kubectl corral frag --png``: a PNG of every GPU node (used, idle, fragmented, by
model) of the expected size, before and after with ``--plan``, that changes with the
cluster; without matplotlib one line naming the plot extra."""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path

import pytest

from kubectl_corral.cli import run
from kubectl_corral.frag_picture import DPI, FRAGMENTED, SIZE_ONE, SIZE_TWO
from tests.plugin.scattered_cluster import scattered, write_dump
from tests.png_checks import colour_share, png_size


def corral(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = asyncio.run(run(list(argv), out, err, {"KUBECONFIG": "/nonexistent/kubeconfig"}))
    return code, out.getvalue(), err.getvalue()


def test_frag_png_of_the_nodes_changes_with_the_cluster(tmp_path: Path) -> None:
    pictures = []
    for idle_nodes in (4, 1):
        dump = write_dump(tmp_path / f"d{idle_nodes}.json", scattered(partly_idle=idle_nodes))
        png = tmp_path / f"frag{idle_nodes}.png"
        code, out, err = corral("frag", "--snapshot", str(dump), "--png", str(png))
        assert (code, err) == (0, "")
        assert out.endswith(f"Picture: {png}\n")
        assert png_size(png) == (SIZE_ONE[0] * DPI, SIZE_ONE[1] * DPI)
        pictures.append(png)
    assert pictures[0].read_bytes() != pictures[1].read_bytes()
    # four nodes with fragmented GPUs draw more orange than one
    assert colour_share(pictures[0], FRAGMENTED) > 2 * colour_share(pictures[1], FRAGMENTED) > 0


def test_frag_plan_png_before_and_after(tmp_path: Path) -> None:
    dump = write_dump(tmp_path / "d.json", scattered())
    png = tmp_path / "plan.png"
    code, _, _ = corral("frag", "--plan", "--snapshot", str(dump), "--png", str(png), "-o", "json")
    assert code == 0
    width, height = png_size(png)
    assert (width, height) == (SIZE_TWO[0] * DPI, SIZE_TWO[1] * DPI)
    # the plan suspends two 1-GPU Jobs to make room: less is fragmented after it
    before = colour_share(png, FRAGMENTED, slice(0, height // 2))
    after = colour_share(png, FRAGMENTED, slice(height // 2, height))
    assert before > after > 0


def test_frag_png_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    png = tmp_path / "frag.png"
    code, out, err = corral("frag", "--snapshot", "sample:small", "--png", str(png))
    assert (code, out) == (2, "")
    assert err == (
        "kubectl corral: --png needs matplotlib, which is not installed: pip install "
        "'corral[plot]' (the plot extra; from a checkout: pip install -e '.[plot]')\n"
    )
    assert not png.exists()
    code, out, _ = corral("frag", "--snapshot", "sample:small")  # the table needs none
    assert code == 0 and "GPU fragmentation of" in out


def test_frag_png_that_cannot_be_written(tmp_path: Path) -> None:
    png = tmp_path / "no" / "such" / "dir.png"
    code, out, err = corral("frag", "--snapshot", "sample:small", "--png", str(png))
    assert (code, out) == (1, "")
    assert err.startswith(f"kubectl corral: --png {png}: cannot write it: ")
    assert err.count("\n") == 1
