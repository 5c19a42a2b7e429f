"""A solver's own prints from C never reach the standard output a command prints its
figures or JSON on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import json, multiprocessing, os
from gangplace.sim.solver_output import solver_prints_to_stderr

def child():
    os.write(1, b"from a worker\n")

if __name__ == "__main__":
    with solver_prints_to_stderr():
        os.write(1, b"HighsMipSolverData::transformNewIntegerFeasibleSolution\n")
        p = multiprocessing.get_context("spawn").Process(target=child)
        p.start()
        p.join()
        print("a Python print in the block")
    print(json.dumps({"figures": 1}))
"""


def test_solver_prints_go_to_stderr_and_the_json_stays_whole(tmp_path: Path) -> None:
    script = tmp_path / "prints.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(out.stdout) == {"figures": 1}
    assert "HighsMipSolverData" in out.stderr
    assert "from a worker" in out.stderr
    assert "a Python print in the block" in out.stderr
