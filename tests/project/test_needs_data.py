"""Without the third-party data, tests that need it are left out and the run says so in
one line; with it, they all run. Checked on a tiny subset in a pytest of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.needs_data import closing_line

ROOT = Path(__file__).resolve().parents[2]
SUBSET = [
    "tests/sim/test_arrivals.py::test_matches_the_go_simulator_draws",  # trace, 3 cases
    "tests/kubeapi/test_server.py::test_custom_types_match_the_published_crds",  # crds
    "tests/project/test_get_data.py::test_only_picks_a_part",  # needs nothing
]


def pytest_run(data: Path, *extra: str) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "CORRAL_TRACE_DIR"}
    env["CORRAL_DATA"] = str(data)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *extra, *SUBSET],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, proc.stdout.splitlines()


@pytest.mark.slow
def test_without_the_data_one_line_counts_what_did_not_run(tmp_path: Path) -> None:
    code, lines = pytest_run(tmp_path)
    assert code == 0, "\n".join(lines)
    want = (
        f"3 trace tests not run: no trace; 1 crds test not run: no CRDs in "
        f"$CORRAL_DATA ({tmp_path}); `make data` gets them"
    )
    assert lines.count(want) == 1, "\n".join(lines)
    # It is the line before pytest's own closing line, and nothing was skipped.
    assert lines[-2] == want
    assert lines[-1].startswith("1 passed, 4 deselected in "), lines[-1]


@pytest.mark.slow
def test_with_the_data_everything_is_collected_and_no_line(tmp_path: Path) -> None:
    trace = tmp_path / "data/alibaba-gpu-v2023"
    trace.mkdir(parents=True)
    (trace / "openb_node_list_gpu_node.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\n")
    (tmp_path / "crds").mkdir()
    (tmp_path / "crds/x.yaml").write_text("{}\n")
    code, lines = pytest_run(tmp_path, "--collect-only")
    assert code == 0, "\n".join(lines)
    assert not [ln for ln in lines if "not run" in ln]
    assert lines[-1].startswith("5 tests collected in "), lines[-1]


def test_closing_line_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORRAL_DATA", raising=False)
    monkeypatch.delenv("CORRAL_TRACE_DIR", raising=False)
    assert closing_line({"trace": 9}) == (
        "9 trace tests not run: no trace in ../shared; `make data` gets it"
    )
    monkeypatch.setenv("CORRAL_TRACE_DIR", "/t")
    assert closing_line({"trace": 1}) == (
        "1 trace test not run: no trace in ../shared or $CORRAL_TRACE_DIR (/t); `make data` gets it"
    )


def test_closing_line_without_kubectl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORRAL_DATA", raising=False)
    monkeypatch.delenv("CORRAL_TRACE_DIR", raising=False)
    assert closing_line({"kubectl": 1}) == (
        "1 kubectl test not run: no kubectl on PATH; `apt-get install kubectl` gets it"
    )
    assert closing_line({"crds": 2, "kubectl": 3}) == (
        "2 crds tests not run: no CRDs in ../shared; `make data` gets it; "
        "3 kubectl tests not run: no kubectl on PATH; `apt-get install kubectl` gets it"
    )


@pytest.mark.slow
def test_without_kubectl_its_tests_are_counted(tmp_path: Path) -> None:
    """With no kubectl on PATH the kubectl test is left out and the line says how to get
    kubectl; nothing is skipped."""
    env = {k: v for k, v in os.environ.items() if k not in ("CORRAL_TRACE_DIR", "PATH")}
    env["PATH"] = str(Path(sys.executable).parent)  # python, and no kubectl
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "tests/kubeapi/test_kubectl.py",
            "tests/project/test_get_data.py::test_only_picks_a_part",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "kubectl tests not run: no kubectl on PATH; `apt-get install kubectl` gets it"
        in (lines[-2])
    ), lines[-2]
    assert "skipped" not in lines[-1] and "1 passed" in lines[-1], lines[-1]
