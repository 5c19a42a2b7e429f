"""``gangplace simulate`` and ``gangplace gangstudy``: output and clear errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gangplace.cli import main

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"n{i},32000,131072,{2 if i % 2 else 4},{'T4' if i % 2 else 'G2'}\n" for i in range(8)
)
GPUS, MILLI = [0, 1, 1, 2, 1], [0, 450, 1000, 1000, 810]
PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n" + "".join(
    f"p{i:03d},{2000 + 500 * (i % 5)},4096,{GPUS[i % 5]},{MILLI[i % 5]},\n" for i in range(60)
)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    n, p = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    n.write_text(NODES)
    p.write_text(PODS)
    return n, p


def test_simulate_json(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    n, p = files
    assert main(["simulate", "--nodes", str(n), "--pods", str(p), "--policy", "fgd", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("allocated_gpu_pct", "unallocated_gpu_pct", "fragmented_gpu_pct", "frag_rate_pct",
                "pods_unallocated", "seconds", "curve"):  # fmt: skip
        assert key in out
    # A small cluster stops short of 130%: the resampling stops at the first pod whose
    # share would cross 1.3 x capacity.
    assert 120 <= out["curve"][-1]["arrived_pct"] <= 130
    assert out["allocated_gpu_pct"] + out["unallocated_gpu_pct"] == pytest.approx(100)


def test_simulate_table(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    n, p = files
    assert main(["simulate", "--nodes", str(n), "--pods", str(p), "--every", "50"]) == 0
    out = capsys.readouterr().out
    assert "policy corral" in out
    assert "% arrived: allocated" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy", "nope"], "--policy nope: unknown"),
        (["--inflate", "-1"], "--inflate -1.0"),
        (["--every", "0"], "--every 0"),
        (["--pods", "/no/such.csv"], "--pods: /no/such.csv"),
        (["--trace-dir", "/no/such/dir"], "--trace-dir /no/such/dir"),
    ],
)
def test_simulate_bad_input(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    n, p = files
    args = ["simulate", "--nodes", str(n), "--pods", str(p), *extra]
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_bad_node_file(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, p = files
    assert main(["simulate", "--nodes", str(p), "--pods", str(p)]) == 2
    assert "--nodes" in capsys.readouterr().err


def test_gangstudy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n = tmp_path / "n.csv"
    n.write_text(NODES)
    p = tmp_path / "p.csv"
    p.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,8000,4096,2,1000\nb,16000,4096,4,1000\n"
    )
    args = ["gangstudy", "--nodes", str(n), "--pods", str(p), "--loads", "60,90", "--jobs", "60"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "pod-by-pod" in out and "all-or-nothing" in out
    assert main([*args, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    assert len(rows) == 4
    assert main([*args, "--loads", "abc"]) == 2
    assert "--loads" in capsys.readouterr().err


def test_gangstudy_with_given_job_shapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = tmp_path / "n.csv"
    n.write_text(NODES)
    base = ["gangstudy", "--nodes", str(n), "--loads", "90", "--jobs", "40", "--json"]
    jobs = ["--job", "4:gpus=1,cpu=2,memory=8Gi", "--job", "2:gpu-milli=500"]
    assert main([*base, *jobs]) == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    assert {r["mode"] for r in rows} == {"pod-by-pod", "all-or-nothing"}
    assert all(r["load_pct"] == 90 and r["jobs"] == 40 for r in rows)
    assert main([*base[:-1], *jobs]) == 0
    assert "from 2 given job shape(s)" in capsys.readouterr().out
    for bad, says in (
        ("4", "expected WORKERS"),
        ("0:gpus=1", "at least 1"),
        ("4:gpus=two", "gpus 'two': expected a whole number"),
        ("4:cpu=lots", "invalid quantity 'lots'"),
        ("4:colour=red", "expected one of gpus, gpu-milli, cpu, memory"),
        ("4:gpu-milli=1500", "GPU demand 1 x 1500 milli is out of range"),
        ("4:gpus=2,gpu-milli=500", "a pod that shares a GPU may use only one GPU"),
        ("4:gpus=0", "a gang study job needs GPUs"),
    ):
        assert main([*base, "--job", bad]) == 2
        err = capsys.readouterr().err
        assert f"--job '{bad}'" in err and says in err, err
