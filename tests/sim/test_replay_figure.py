"""``gangplace simulate --png``: the FGD paper's figure (unallocated GPU against arrived
workload, one curve per policy) as a PNG of the expected size that changes with the
cluster; several policies in one run; without matplotlib one line naming the extra."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from gangplace.cli import main
from gangplace.sim.replay_figure import DPI, SIZE

from tests.png_checks import png_size
from tests.sim.test_replay_command import NODES, PODS


def _files(tmp_path: Path, nodes: str) -> tuple[Path, Path]:
    n, p = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    n.write_text(nodes)
    p.write_text(PODS)
    return n, p


def test_simulate_png_per_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pictures = []
    for i, nodes in enumerate((NODES, NODES.replace(",4,G2", ",8,G2"))):
        n, p = _files(tmp_path, nodes)
        png = tmp_path / f"replay{i}.png"
        args = ["simulate", "--nodes", str(n), "--pods", str(p), "--every", "50"]
        assert main([*args, "--policy", "fgd,random", "--png", str(png)]) == 0
        out = capsys.readouterr().out
        assert "policy fgd," in out and "policy random," in out and f"picture: {png}" in out
        assert png_size(png) == (SIZE[0] * DPI, SIZE[1] * DPI)
        pictures.append(png.read_bytes())
    assert pictures[0] != pictures[1]


def test_simulate_several_policies_json_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    n, p = _files(tmp_path, NODES)
    assert main(["simulate", "--nodes", str(n), "--pods", str(p), "--policy", "fgd,bestfit",
                 "--json"]) == 0  # fmt: skip
    runs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["policy"] for r in runs] == ["fgd", "bestfit"]


def test_simulate_unknown_policy_in_a_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n, p = _files(tmp_path, NODES)
    assert main(["simulate", "--nodes", str(n), "--pods", str(p), "--policy", "fgd,nope"]) == 2
    assert "--policy fgd,nope: unknown nope; choose from" in capsys.readouterr().err


def test_simulate_png_without_matplotlib(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    n, p = _files(tmp_path, NODES)
    png = tmp_path / "r.png"
    assert main(["simulate", "--nodes", str(n), "--pods", str(p), "--png", str(png)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not png.exists()
    assert captured.err == (
        "gangplace simulate: --png needs matplotlib, which is not installed: pip install "
        "'corral[plot]' (the plot extra; from a checkout: pip install -e '.[plot]')\n"
    )
