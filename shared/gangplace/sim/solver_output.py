"""Keep a solver's own prints off standard output.

HiGHS, through scipy, can print a line to the process's standard output from C
(``HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();``) whatever
scipy's ``disp`` says. Commands that print their figures, or JSON, on standard output
run their solves inside :func:`solver_prints_to_stderr`, so what they print stays whole.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["solver_prints_to_stderr"]


@contextlib.contextmanager
def solver_prints_to_stderr() -> Iterator[None]:
    """File descriptor 1 points at standard error while the block runs (worker processes
    started in it inherit that); Python's own prints in the block go there too."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no descriptor 1 at all: nothing to keep clean
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
