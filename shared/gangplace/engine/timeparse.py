"""Durations and timestamps as Kubernetes writes them.

Durations follow Go's ``time.ParseDuration`` (``"30m"``, ``"1h30m"``, ``"90s"``, ``".5h"``,
``"250ms"``), which is what ``corral.dev/gang-timeout`` and Volcano's
``volcano.sh/sla-waiting-time`` carry. Every part of corral reads them here, so a value
one part takes the other takes too. A bare number is seconds only where the caller
allows it (configuration files); annotations need a unit, as Go does. Timestamps are
RFC 3339 (``metadata.creationTimestamp``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache

__all__ = [
    "DurationError",
    "TimeFormatError",
    "duration_allowed",
    "format_duration",
    "format_time",
    "parse_duration",
    "parse_time",
]

# Longer than any timeout or cool-down means anything (and than datetime arithmetic
# allows): 100 years. Longer values, or hundreds of digits, are refused, not infinite.
MAX_DURATION_SECONDS = 100 * 365 * 86400.0
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# A refused value is quoted back; a huge one is cut, not echoed whole.
_SHOWN = 64


class TimeFormatError(ValueError):
    """A duration or timestamp that cannot be read; the message quotes it."""


class DurationError(TimeFormatError):
    """A refused duration: ``problem`` and ``allowed`` let a caller name its own key."""

    def __init__(self, text: object, problem: str, allowed: str) -> None:
        self.text, self.problem, self.allowed = text, problem, allowed
        super().__init__(f'"{_shown(text)}" {problem}; allowed: {allowed}')


def _shown(text: object) -> str:
    s = str(text)
    return s if len(s) <= _SHOWN else f"{s[:_SHOWN]}... ({len(s)} characters)"


def duration_allowed(numbers: bool = True) -> str:
    """What a duration may be, for the end of a one-line message."""
    allowed = (
        "a duration made of numbers with the units h, m, s, ms, us or ns, "
        'such as "30m", "1h30m" or "90s"'
    )
    return f"{allowed}, or a number of seconds" if numbers else allowed


def _at_most(limit: float) -> str:
    return "100 years" if limit == MAX_DURATION_SECONDS else f"{limit:.0f}s"


def parse_duration(
    text: str | int | float, *, numbers: bool = True, at_most: float = MAX_DURATION_SECONDS
) -> float:
    """Seconds in ``text``: ``"1h30m"`` -> 5400.0. Never negative, never above ``at_most``.
    ``numbers``: a bare number (``"45"``, ``45``) is seconds; otherwise it is refused, as
    Go refuses it (``"0"`` alone aside)."""
    allowed = duration_allowed(numbers)
    if isinstance(text, bool) or (isinstance(text, int | float) and not numbers):
        raise DurationError(text, "is not a duration", allowed)
    if isinstance(text, int | float):
        if text < 0:
            raise DurationError(text, "is negative", allowed)
        return _bounded(float(text), text, at_most, allowed)
    s = text.strip()
    if _NUMBER.fullmatch(s):
        if numbers or s == "0":
            return _bounded(float(s), text, at_most, allowed)
        raise DurationError(text, "is a number without a unit", allowed)
    if s.startswith("-"):
        raise DurationError(text, "is negative", allowed)
    pos, total = 0, 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise DurationError(text, "is not a duration", allowed)
    return _bounded(total, text, at_most, allowed)


def _bounded(seconds: float, text: object, at_most: float, allowed: str) -> float:
    if not seconds <= at_most:  # also nan and inf
        raise DurationError(text, f"is too long: at most {_at_most(at_most)}", allowed)
    return seconds


def format_duration(seconds: float) -> str:
    """The short Go form: 5400 -> ``1h30m``, 90 -> ``1m30s``."""
    s = round(seconds)
    if s == 0:
        return "0s"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (sec, "s")) if v)


@lru_cache(maxsize=1 << 16)
def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp (``2026-11-30T08:00:00Z``) as an aware UTC datetime.
    (Cached: a cluster's pods share few distinct creation times.)"""
    s = text.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    try:
        t = datetime.fromisoformat(s)
    except ValueError:
        raise TimeFormatError(
            f"timestamp {text!r}: expected RFC 3339, such as 2026-11-30T08:00:00Z"
        ) from None
    if t.tzinfo is None:
        raise TimeFormatError(f"timestamp {text!r}: needs a time zone (Z or +hh:mm)")
    return t.astimezone(UTC)


def format_time(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
