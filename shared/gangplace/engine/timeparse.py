"""Durations and timestamps as Kubernetes writes them.

Durations follow Go's ``time.ParseDuration`` (``"30m"``, ``"1h30m"``, ``"90s"``), which is
what ``corral.dev/gang-timeout`` and Volcano's ``volcano.sh/sla-waiting-time`` carry; a bare
number is seconds. Timestamps are RFC 3339 (``metadata.creationTimestamp``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache

__all__ = ["TimeFormatError", "format_duration", "format_time", "parse_duration", "parse_time"]

# Longer than any timeout or cool-down means anything (and than datetime arithmetic
# allows): 100 years. Longer values, or hundreds of digits, are refused, not infinite.
MAX_DURATION_SECONDS = 100 * 365 * 86400.0
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


class TimeFormatError(ValueError):
    """A duration or timestamp that cannot be read; the message quotes it."""


def parse_duration(text: str | int | float) -> float:
    """Seconds in ``text``: ``"1h30m"`` -> 5400.0; a number is seconds. Never negative."""
    if isinstance(text, bool):
        raise TimeFormatError(f"duration {text!r}: expected a duration such as '30m'")
    if isinstance(text, int | float):
        if text < 0:
            raise TimeFormatError(f"duration {text!r}: must not be negative")
        return _bounded(float(text), text)
    s = text.strip()
    if not s:
        raise TimeFormatError("duration '': expected a duration such as '30m', '1h30m' or '90s'")
    if re.fullmatch(r"\d+(?:\.\d+)?", s):
        return _bounded(float(s), text)
    pos, total = 0, 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise TimeFormatError(
            f"duration {text!r}: expected a duration such as '30m', '1h30m' or '90s' "
            "(units ns, us, ms, s, m, h)"
        )
    return _bounded(total, text)


def _bounded(seconds: float, text: object) -> float:
    if not seconds <= MAX_DURATION_SECONDS:  # also nan and inf
        shown = repr(text) if len(repr(text)) <= 40 else f"{repr(text)[:40]}..."
        raise TimeFormatError(f"duration {shown}: too long (at most 100 years)")
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
