"""The rows of a linear model, added one at a time: ``lo <= A @ x <= hi``.

The oracle's models (the aggregated fit model, the pricing problem, the assignment
model) are each built constraint by constraint; this keeps the sparse triplets and the
bounds together so each model only says what its rows are."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
from scipy.optimize import LinearConstraint
from scipy.sparse import coo_matrix, csr_matrix

__all__ = ["Rows"]


class Rows:
    """Sparse constraint rows with their lower and upper bounds."""

    __slots__ = ("_cols", "_hi", "_lo", "_rows", "_vals")

    def __init__(self) -> None:
        self._rows: list[int] = []
        self._cols: list[int] = []
        self._vals: list[float] = []
        self._lo: list[float] = []
        self._hi: list[float] = []

    def __len__(self) -> int:
        return len(self._lo)

    def add(self, entries: Iterable[tuple[int, float]], lo: float, hi: float) -> None:
        """One row: ``lo <= sum(v * x[c] for c, v in entries) <= hi``."""
        r = len(self._lo)
        for c, v in entries:
            self._rows.append(r)
            self._cols.append(c)
            self._vals.append(v)
        self._lo.append(lo)
        self._hi.append(hi)

    def matrix(self, n_cols: int) -> csr_matrix:
        return coo_matrix(
            (self._vals, (self._rows, self._cols)), shape=(len(self._lo), n_cols)
        ).tocsr()

    def bounds(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        return np.array(self._lo, dtype=np.float64), np.array(self._hi, dtype=np.float64)

    def constraint(self, n_cols: int) -> LinearConstraint:
        lo, hi = self.bounds()
        return LinearConstraint(self.matrix(n_cols), lo, hi)
