"""Issue 26, the engine's tools (``gangplace``): dumps that cannot be used, values the
engine cannot count, gangs that cannot be asked for, and output cut short by ``| head``.
Each case failed (a traceback, or exit 0 in silence) before the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from gangplace.cli import main
from gangplace.engine import EngineConfig, SnapshotError
from gangplace.engine.node_pod_records import node_from_json
from gangplace.snapshot_io import load_list

from tests.builders.engine_json import node_json, pod_json

BIN = Path(sys.executable).parent


def _dump(tmp_path: Path, items: list[dict[str, Any]], name: str = "dump.json") -> str:
    f = tmp_path / name
    f.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(f)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("gangplace", ["demo"]),
        ("gangplace", ["report"]),
        ("gangplace", ["report", "--per-node"]),
        ("corral-descheduler", ["plan", "--snapshot", "sample:small"]),
        ("corral-descheduler", ["config"]),
        ("kubectl-corral", ["frag", "--plan", "--snapshot", "sample:small"]),
    ],
)
def test_output_cut_short_by_its_reader_ends_quietly(command: str, argv: list[str]) -> None:
    """``CMD | head -1``: the reader is gone before the command writes (its end of the
    pipe closed at once), so every write fails; no traceback, exit 0."""
    proc = subprocess.Popen(
        [str(BIN / command), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0
    assert err == ""


def test_an_empty_list_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _dump(tmp_path, [])
    code, out, err = _run(["report", "--snapshot", path], capsys)
    assert (code, out) == (2, "")
    assert err == (
        f"gangplace: {path}: the List is empty: nothing to measure or place on; dump the "
        "nodes with the pods: kubectl get nodes,pods -A -o json\n"
    )


def test_a_list_of_pods_only_is_refused(tmp_path: Path) -> None:
    path = _dump(tmp_path, [pod_json("p", "n1")])
    with pytest.raises(SnapshotError, match="the List holds no Node"):
        load_list(path)


def test_a_yaml_dump_is_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "dump.yaml"
    f.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node_json("n")]}))
    code, _, err = _run(["report", "--snapshot", str(f)], capsys)
    assert code == 2
    assert err == (
        f"gangplace: {f}: not JSON (it looks like YAML); corral reads JSON dumps: "
        "kubectl get nodes,pods -A -o json\n"
    )


def test_a_binary_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "dump.json"
    f.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    code, _, err = _run(["report", "--snapshot", str(f)], capsys)
    assert code == 2 and "not JSON (not UTF-8 text)" in err


@pytest.mark.parametrize("value", ["1.5", "500m", "7.9"])
def test_a_fractional_gpu_on_a_node_is_refused(value: str) -> None:
    node = node_json("gpu-0", gpus=8)
    node["status"]["allocatable"]["nvidia.com/gpu"] = value
    with pytest.raises(SnapshotError) as e:
        node_from_json(node, EngineConfig())
    assert str(e.value) == (
        f'node gpu-0: status.allocatable["nvidia.com/gpu"]: "{value}" is not a whole '
        'number of GPUs; allowed: a whole number, such as "8" (a device plugin counts devices)'
    )


def test_a_fractional_gpu_ends_the_report_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = node_json("gpu-0", gpus=8)
    node["status"]["allocatable"]["nvidia.com/gpu"] = "1.5"
    code, out, err = _run(["report", "--snapshot", _dump(tmp_path, [node])], capsys)
    assert (code, out) == (2, "") and '"1.5" is not a whole number of GPUs' in err


def test_a_pod_on_a_node_missing_from_the_dump_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = [
        node_json("gpu-0", gpus=8),
        pod_json("here", "gpu-0", gpus=2, namespace="ml"),
        pod_json("lost", "gone-node", gpus=4, namespace="ml"),
    ]
    path = _dump(tmp_path, items)
    code, out, err = _run(["report", "--snapshot", path, "--json"], capsys)
    assert code == 0
    assert json.loads(out)["total"]["allocated"] == 2  # the lost pod is not counted...
    assert err == (  # ...and that is said
        f"gangplace: warning: {path}: 1 pod(s) bound to a node that is not in the dump, left "
        "out of the figures: ml/lost on gone-node (dump nodes and pods together: kubectl get "
        "nodes,pods -A -o json)\n"
    )


def test_place_refuses_a_gang_of_no_pods(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["place", "--pods", "0"], capsys)
    assert (code, out) == (2, "")
    assert err == "gangplace: --pods 0: a gang needs at least 1 pod\n"
    assert _run(["place", "--pods", "-3"], capsys)[0] == 2


def test_place_refuses_a_topology_key_no_node_has(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["place", "--pods", "6", "--gpus", "4", "--topology-key", "rack"], capsys)
    assert (code, out) == (2, "")
    assert err == (
        "gangplace: --topology-key rack: no node in the dump has this label; topology "
        "labels on the nodes: topology.corral.dev/rack\n"
    )
    code, out, _ = _run(
        ["place", "--pods", "2", "--gpus", "4", "--topology-key", "topology.corral.dev/rack"],
        capsys,
    )
    assert code == 0 and "2 pods placed" in out


def test_an_unexpected_error_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import gangplace.cli as cli

    def boom(*_: object, **__: object) -> None:
        raise KeyError("nodes")

    monkeypatch.setattr(cli, "fragmentation_report", boom)
    monkeypatch.delenv("CORRAL_TRACEBACK", raising=False)
    code, _, err = _run(["report"], capsys)
    assert code == 1
    assert err == (
        "gangplace: internal error: KeyError: 'nodes' (a bug in corral; please report it "
        "with the command line; CORRAL_TRACEBACK=1 shows where)\n"
    )
    monkeypatch.setenv("CORRAL_TRACEBACK", "1")
    with pytest.raises(KeyError):
        main(["report"])


# --- figures that say what they count ---------------------------------------------------


def test_the_worked_example_of_docs_engine_md() -> None:
    from gangplace.engine import Snapshot
    from gangplace.engine.fragmentation import TargetWorkload, TaskShape
    from gangplace.engine.node_pod_records import pod_from_json
    from gangplace.engine.report import fragmentation_report, render_report

    node = node_from_json(node_json("gpu-0", cpu="96", memory="1024Gi", gpus=8))
    pod = pod_from_json(pod_json("train-0", "gpu-0", cpu="8", memory="64Gi", gpus=5))
    m = TargetWorkload(
        (TaskShape(8000, 1000, 1), TaskShape(8000, 1000, 4), TaskShape(8000, 0, 0)),
        (0.5, 0.25, 0.25),
    )
    rep = fragmentation_report(Snapshot([node], [pod]), m)
    assert (rep.total.idle, rep.total.fragmented, rep.total.frag_rate) == (3, 1.5, 50.0)
    text = render_report(rep)
    row = "(unlabelled)        1      8        5        3        1.50         0      50.0%"
    assert row in text
    doc = (Path(__file__).parents[2] / "docs" / "engine.md").read_text()
    assert row in doc  # the docs show what the engine prints
    assert "measured against the running pods' typical tasks: 50% cpu=8 gpu=1" in text
    assert "a task that needs no GPU counts every idle GPU of a node as fragmented" in text


def test_a_cluster_without_pods_has_nothing_fragmented_or_stranded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _dump(tmp_path, [node_json("gpu-0", gpus=8), node_json("t4-0", gpus=4)])
    code, out, _ = _run(["report", "--snapshot", path, "--json"], capsys)
    total = json.loads(out)["total"]
    assert code == 0 and total["idle"] == 12
    assert (total["fragmented"], total["stranded"], total["frag_rate_pct"]) == (0, 0, 0)
    code, out, _ = _run(["report", "--snapshot", path], capsys)
    assert "no pods to learn the typical workload from" in out


def test_gangplace_and_the_descheduler_agree_on_one_dump_or_say_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from descheduler.cli import main as descheduler_main

    dump = Path(__file__).parents[2] / "descheduler" / "data" / "sample-fragmented.json"
    assert main(["report", "--snapshot", str(dump), "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert descheduler_main(["plan", "--snapshot", str(dump), "--output", "json"]) == 0
    report = json.loads(capsys.readouterr().out)["report_before"]
    assert report["total"]["fragmented"] == ours["total"]["fragmented"]
    assert report["workload"] == ours["workload"]
    # The largest gangs differ, and each report says which probes it used.
    assert ours["probes_from"] == "probes of 1, 4 and 8 GPUs per pod"
    assert report["probes_from"].startswith("the waiting gangs' largest members")


def test_shared_gpu_use_is_explained_and_the_comparison_fits_its_columns() -> None:
    from gangplace.engine import Snapshot
    from gangplace.engine.fragmentation import typical_workload
    from gangplace.engine.model import PodShape
    from gangplace.engine.node_pod_records import pod_from_json
    from gangplace.engine.report import fragmentation_report, render_comparison, render_report

    node = node_from_json(node_json("gpu-0", cpu="96", memory="1024Gi", gpus=8))
    shared = pod_json("infer-0", "gpu-0", cpu="2", memory="8Gi")
    shared["metadata"]["annotations"] = {"alibabacloud.com/gpu-milli": "500"}
    pods = [pod_from_json(pod_json("train-0", "gpu-0", gpus=2)), pod_from_json(shared)]
    snap = Snapshot([node], pods)
    probe = PodShape.of({"cpu": 8000}, gpus=8, node_selector=(("nvidia.com/gpu.product", "H100"),))
    rep = fragmentation_report(snap, typical_workload(snap), [probe], probes_from="test")
    assert rep.total.allocated == 2.5
    assert "a pod holding 500m of one (GPU sharing) uses 0.5 GPU" in render_report(rep)
    table = render_comparison(rep, rep)
    assert "largest gang, probe 1" in table
    assert "  probe 1: cpu=8 gpu=8 (nvidia.com/gpu.product=H100)" in table
    assert max(len(line) for line in table.splitlines()) <= 88


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("cpu", "1Ei", "'1Ei' is too large (at most 2^62"),
        (
            "nvidia.com/gpu",
            "524289",
            '"524289" is too many GPUs for one node; allowed: at most 256',
        ),
    ],
)
def test_quantities_beyond_what_the_engine_holds_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: str, says: str
) -> None:
    """Found by tests/project/test_junk_inputs.py: these overflowed int64 sums or asked
    for terabytes of per-device state."""
    node = node_json("gpu-0", gpus=8)
    node["status"]["allocatable"][field] = value
    code, out, err = _run(["report", "--snapshot", _dump(tmp_path, [node])], capsys)
    assert (code, out) == (2, "") and says in err and err.count("\n") == 1
