"""``corral-descheduler``: plan offline (text and JSON), exit codes, the run surface."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gangplace.thirdparty import trace_dir

from descheduler.cli import main
from tests.builders.descheduler_cluster import as_list, gang, gpu_node, pod

ROOT = Path(__file__).resolve().parents[2]
TRACE = trace_dir(ROOT)  # tests marked `trace` run only when it is found


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_on_the_small_sample_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--snapshot", "sample:small")
    assert code == 0
    for expected in (
        "GPU fragmentation now",
        "A100-SXM4-80GB",
        "make room: pod research/notebook-",
        "makes room for research/llm-finetune",
        "makes room for training/pretrain",
        "release stale gang: gang speech/mpi-stale",
        "Before and after the plan:",
        "Largest pod that fits on one node",
        "Waiting gangs that cannot start after: speech/mpi-stale",
    ):
        assert expected in out, expected
    # each move says how and at what priority; the Jobs are suspended, not killed
    assert "make room: gang training/sweep-a (whole, 2 pods), suspend, priority 0" in out
    assert "suspends Job training/sweep-a (resumed after)" in out
    assert "make room: pod research/notebook-4, evict, priority 0" in out
    # protected pods never show up as moved, and each says why it stays
    moves = out.split("Plan:")[1].split("Waiting gangs the plan")[0]
    kept = out.split("Running gangs not movable")[1].split("Before and after")[0]
    for never in ("sweep-c", "finetune-d", "tts-serve", "nvidia-device-plugin", "etcd-backup"):
        assert f"/{never}" not in moves, never
    assert 'training/finetune-d-0 is annotated corral.dev/evictable: "false"' in kept
    assert "inference/pod:tts-serve-0 (priority 0): queue inference is not reclaimable" in kept


def test_plan_on_the_small_sample_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--snapshot", "sample:small", "--output", "json")
    assert code == 0
    doc = json.loads(out)
    for key in (
        "evictions",
        "waiting_gangs_before",
        "waiting_gangs_after",
        "fragmentation_before",
        "fragmentation_after",
        "moves",
    ):
        assert key in doc
    names = {(e["namespace"], e["name"], e["gang"]) for e in doc["evictions"]}
    assert ("research", "notebook-3", None) in names and ("research", "notebook-4", None) in names
    assert ("training", "sweep-a-0", "sweep-a") in names
    assert ("speech", "mpi-stale-0", "mpi-stale") in names
    assert set(doc["waiting_gangs_before"]) == {
        "training/pretrain",
        "research/llm-finetune",
        "speech/mpi-stale",
    }
    assert doc["waiting_gangs_after"] == ["speech/mpi-stale"]
    assert doc["now"] == "2026-12-01T12:00:00Z"  # from the dump's snapshot-time annotation
    how = {m["unit"]: (m["method"], m["priority"], m["workloads"]) for m in doc["moves"]}
    assert how["training/sweep-a"] == ("suspend", 0, ["Job training/sweep-a"])
    assert how["research/pod:notebook-4"] == ("evict", 0, [])
    assert how["speech/mpi-stale"] == ("evict", 0, [])  # a stale gang is released, not held
    assert doc["moves_by_method"] == {"suspend": 4, "evict": 4}
    not_moved = {x["unit"]: x["reason"] for x in doc["not_moved"]}
    assert not_moved["training/sweep-c"] == (
        "disruption budget training/sweep-c allows 0 more disruption(s); the move needs 4"
    )
    assert not_moved["kube-system/pod:etcd-backup-cpu-0"].endswith("is a static (mirror) pod")


@pytest.mark.slow
def test_plan_by_default_on_the_trace_built_sample(capsys: pytest.CaptureFixture[str]) -> None:
    """The default: 48 nodes of the Alibaba trace filled from its pod list; the plan
    lets waiting gangs start and lowers the fragmentation."""
    code, out, _ = run(capsys, "plan", "--output", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["now"] == "2026-12-01T12:00:00Z"
    before, after = doc["waiting_gangs_before"], doc["waiting_gangs_after"]
    assert len(before) == 3 and len(after) < len(before) and set(after) <= set(before)
    assert doc["evictions"] and doc["fragmentation_after"] < doc["fragmentation_before"]
    served = {m["for_gang"] for m in doc["moves"]}
    assert served and served.isdisjoint(after)
    code, text, _ = run(capsys, "plan")
    assert code == 0 and "(sample-trace.json)" in text and "openb-node-" in text
    assert "Waiting gangs that cannot start after:" in text
    code, _, err = run(capsys, "plan", "--snapshot", "sample:nope")
    assert code == 2 and "sample:trace, sample:small" in err


@pytest.mark.slow
@pytest.mark.trace
def test_the_trace_sample_is_what_its_script_writes(tmp_path: Path) -> None:
    """Deterministic: the script writes the bundled file again, byte for byte (after an
    engine change that moves pods, run `python -m scripts.make_trace_sample`)."""
    from scripts import make_trace_sample

    assert TRACE is not None
    out = tmp_path / "sample.json"
    make_trace_sample.write(make_trace_sample.build(TRACE), out)
    assert out.read_bytes() == (ROOT / "descheduler/data/sample-trace.json").read_bytes()


def write(tmp_path: Path, doc: dict[str, Any]) -> str:
    f = tmp_path / "dump.json"
    f.write_text(json.dumps(doc))
    return str(f)


def test_plan_on_a_dump_with_now_and_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    items: list[Any] = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-1", "n1", 4, owner_kind=""), pod("s1a", "n1", 1), pod("s1b", "n1", 1)]
    items += [pod("big-0", "n0", 7, owner_kind=""), pod("big-2", "n2", 7, owner_kind="")]
    items += gang("llm", [], 4, pending=1)
    dump = write(tmp_path, as_list(items))
    code, out, _ = run(
        capsys, "plan", "--snapshot", dump, "--now", "2026-12-02T12:00:00Z", "--output", "json"
    )
    assert code == 0
    doc = json.loads(out)
    assert sorted(e["name"] for e in doc["evictions"]) == ["s1a", "s1b"]
    assert doc["waiting_gangs_after"] == []
    cfg = tmp_path / "c.yaml"
    cfg.write_text("limits:\n  max_evictions_per_run: 1\n")
    code, out, _ = run(capsys, "plan", "--snapshot", dump, "--config", str(cfg), "--output", "json")
    assert code == 0 and json.loads(out)["evictions"] == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "No such file"),
        ("{not json", "not JSON"),
        ('{"kind": "List"}', "items"),
        (json.dumps(as_list(gpu_node("n0"), pod("p", "n0", 1, cpu="lots"))), "pod default/p"),
        (json.dumps(as_list(gpu_node("n0"), gpu_node("n0"))), "same name: n0;"),
    ],
)
def test_bad_input_exits_2_with_a_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | None, message: str
) -> None:
    f = tmp_path / "dump.json"
    if content is not None:
        f.write_text(content)
    code, out, err = run(capsys, "plan", "--snapshot", str(f))
    assert code == 2 and out == ""
    assert message in err and err.startswith("corral-descheduler: ")


def test_bad_config_and_now_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("limits:\n  max_evictions_per_rnu: 3\n")
    code, _, err = run(capsys, "plan", "--config", str(cfg))
    assert code == 2
    assert "limits.max_evictions_per_rnu: unknown key; allowed: max_evictions_per_run" in err
    code, _, err = run(capsys, "plan", "--now", "tomorrow")
    assert code == 2 and "tomorrow" in err


def test_run_surface(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-kubeconfig")
    code, _, err = run(capsys, "run", "--once", "--dry-run", "--kubeconfig", missing)
    assert code == 2 and "--kubeconfig" in err and "no such file" in err
    code, _, err = run(capsys, "run")
    assert code == 2 and "--once" in err and "--interval" in err
    code, _, err = run(capsys, "run", "--interval", "1m", "--renew-deadline", "20")
    assert code == 2 and "--renew-deadline" in err
    code, _, err = run(capsys, "run", "--interval", "soon")
    assert code == 2 and "--interval" in err
    cfg = tmp_path / "c.yaml"
    cfg.write_text("runner: {interval: -1}\n")
    code, _, err = run(capsys, "run", "--once", "--config", str(cfg))
    assert code == 2 and "runner.interval" in err
    with pytest.raises(SystemExit):
        main(["run", "--once", "--interval", "10m"])  # one or the other


def test_config_prints_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "config")
    assert code == 0 and "max_evictions_per_run: 50" in out and "cooldown: 1h" in out


def test_the_default_namespace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from descheduler.running.process import default_namespace

    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert default_namespace(tmp_path) == "corral-system"
    (tmp_path / "namespace").write_text("batch-infra\n")
    assert default_namespace(tmp_path) == "batch-infra"
    monkeypatch.setenv("POD_NAMESPACE", "from-downward-api")
    assert default_namespace(tmp_path) == "from-downward-api"
