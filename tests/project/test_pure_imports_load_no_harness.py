"""The pure decisions load nothing of the simulation harness: importing the planner, the
admission entry or the mover, each in a fresh interpreter, puts no ``gangplace.sim``
module in ``sys.modules``. (The import contracts say the same of the import graph;
this is what a running process actually loads, lazy imports included.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS = "gangplace.sim"

_CHILD = r"""
import importlib, json, sys
importlib.import_module(sys.argv[1])
prefix = sys.argv[2]
print(json.dumps(sorted(m for m in sys.modules if m == prefix or m.startswith(prefix + "."))))
"""


def harness_loaded_by(module: str) -> list[str]:
    """The ``gangplace.sim`` modules a fresh interpreter holds after importing ``module``."""
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, module, HARNESS],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    loaded: list[str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    "module",
    [
        "descheduler.planning.planner",
        "webhook.admission.entry",
        "gangplace.mover.place_with_moves",
        "gangplace.mover.shape_dominance",
    ],
)
def test_pure_decisions_load_no_harness_module(module: str) -> None:
    assert harness_loaded_by(module) == []


def test_the_check_sees_a_harness_module() -> None:
    """A module that does stand on the harness (the oracle's replay hooks) is caught."""
    loaded = harness_loaded_by("gangplace.sim.limit")
    assert {"gangplace.sim", "gangplace.sim.limit", "gangplace.sim.replay"} <= set(loaded)
