"""The gangplace command as a user runs it."""

import json
from pathlib import Path

import pytest
from gangplace.cli import main

from tests.builders.engine_json import node_json, pod_json


def test_demo_shows_report_and_placements(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "GPU fragmentation of the bundled sample cluster" in out
    assert "gang pytorch-llama: 5 pods placed" in out
    assert "does not fit: gang mpi-train" in out


def test_report_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"]["gpus"] == 72 and doc["total"]["idle"] == 40
    assert {"shape": "cpu=64 memory=512Gi gpu=8", "pods": 0} in doc["largest_gang"]


def test_report_per_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--json"]) == 0
    assert "nodes" not in json.loads(capsys.readouterr().out)
    assert main(["report", "--json", "--per-node"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sum(n["gpus"] for n in doc["nodes"]) == doc["total"]["gpus"] == 72
    assert sum(n["idle"] for n in doc["nodes"]) == doc["total"]["idle"]
    assert main(["report", "--per-node"]) == 0
    out = capsys.readouterr().out.split("Every GPU node, most fragmented first:")[1]
    rows = out.strip().splitlines()[2:]
    assert len(rows) == len(doc["nodes"])
    frag = [float(r.split()[4]) for r in rows]
    assert frag == sorted(frag, reverse=True)


def test_place_on_a_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "cluster.json"
    items = [node_json("a", gpus=8), node_json("b", gpus=8), pod_json("x", "a", gpus=6)]
    dump.write_text(json.dumps({"kind": "List", "items": items}))
    code = main(["place", "--snapshot", str(dump), "--pods", "3", "--gpus", "4", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and not doc["ok"] and "2/3 required members fit" in doc["reason"]
    assert main(["place", "--snapshot", str(dump), "--pods", "2", "--gpus", "4"]) == 0
    assert "gang gang: 2 pods placed" in capsys.readouterr().out


def test_bad_input_exits_2_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--snapshot", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["report", "--snapshot", str(bad)]) == 2
    assert "not JSON" in capsys.readouterr().err
    assert main(["place", "--pods", "2", "--cpu", "two"]) == 2
    assert "'two'" in capsys.readouterr().err
    assert main(["place", "--pods", "2", "--min-available", "3"]) == 2
    assert "minAvailable 3" in capsys.readouterr().err


def test_place_bad_shapes_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    for flags, says in (
        (["--cpu", "lots"], "invalid quantity 'lots'"),
        (["--gpu-milli", "1500"], "GPU demand 1 x 1500 milli is out of range"),
        (["--gpus", "2", "--gpu-milli", "500"], "may use only one GPU"),
    ):
        assert main(["place", "--pods", "2", *flags]) == 2
        assert says in capsys.readouterr().err
    # a share alone is a share of one GPU
    assert main(["place", "--pods", "2", "--gpu-milli", "500", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(len(a["gpus"]) == 1 for a in doc["assignments"])
