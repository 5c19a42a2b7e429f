"""Exponential backoff with jitter, so that many clients retrying after one outage do not
come back in lockstep."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass(slots=True)
class Backoff:
    """Delays of ``initial * factor**n``, capped at ``maximum``, each shortened by a random
    fraction up to ``jitter`` (0: none, 1: anywhere from zero to the full delay)."""

    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.5
    rng: random.Random = field(default_factory=random.Random)
    _attempt: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError(
                f"backoff: need 0 < initial <= maximum, got {self.initial}, {self.maximum}"
            )
        if self.factor < 1 or not 0 <= self.jitter <= 1:
            raise ValueError("backoff: need factor >= 1 and 0 <= jitter <= 1")

    def next(self) -> float:
        base = min(self.maximum, self.initial * self.factor**self._attempt)
        self._attempt = min(self._attempt + 1, 64)
        return base * (1 - self.jitter * self.rng.random())

    def reset(self) -> None:
        self._attempt = 0

    @property
    def attempts(self) -> int:
        return self._attempt
