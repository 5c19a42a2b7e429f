"""Checks of the values users type, with messages that name the key, the value and
what is allowed -- kubectl shows them verbatim, so they must stand on their own.

The checks are pure and the same few values recur across a workload's pods, so their
answers are memoised (a refusal is an exception and is simply computed again)."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from gangplace.config_errors import KeyedValueError
from gangplace.engine import checkpoints, timeparse
from gangplace.engine.timeparse import format_duration

__all__ = [
    "InvalidValue",
    "MinAvailable",
    "check_checkpoint_interval",
    "check_default_min_available",
    "check_duration",
    "check_gang_name",
    "check_queue",
    "derived_name",
    "format_duration",
    "parse_min_available",
    "parse_network_topology",
]

# int32 seconds: the widest timeout any backend field holds (scheduleTimeoutSeconds).
MAX_TIMEOUT_SECONDS = 2**31 - 1
# PodGroup minMember and the other backends' counts are int32 in the API.
MAX_COUNT = 2**31 - 1
MAX_NAME = 63

_COUNT = re.compile(r"^[+]?[0-9]+$")
_NEGATIVE = re.compile(r"^-[0-9]+%?$")
_PERCENT = re.compile(r"^[+]?([0-9]+)%$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_QUEUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class InvalidValue(KeyedValueError):
    """A user value that is refused; ``str()`` is the whole message for the user."""

    def __init__(self, key: str, value: str, problem: str, allowed: str) -> None:
        self.key, self.value, self.problem, self.allowed = key, value, problem, allowed
        super().__init__(f'{key}: "{_shown(value)}" {problem}; allowed: {allowed}')


# A refused value is quoted back to the user; a huge one is cut, not echoed whole.
_SHOWN = 64


def _shown(value: str) -> str:
    if len(value) <= _SHOWN:
        return value
    return f"{value[:_SHOWN]}... ({len(value)} characters)"


@dataclass(frozen=True, slots=True)
class MinAvailable:
    """A parsed min-available: a pod count, or a percentage of the gang size."""

    count: int | None = None
    percent: int | None = None

    def resolve(self, size: int) -> int:
        """The number of pods for a gang of ``size`` (a percentage rounds up, >= 1)."""
        if self.count is not None:
            return self.count
        assert self.percent is not None
        return max(1, math.ceil(size * self.percent / 100))


def _min_allowed(size: int | None) -> str:
    if size is None:
        return 'a whole number of pods, at least 1, such as "4"'
    return (
        f'a whole number of pods from 1 to {size} (the gang size), such as "{size}", '
        f'or a percentage from 1% to 100%, such as "80%"'
    )


def _bounded_int(digits: str) -> int:
    """The number, or MAX_COUNT + 1 for anything longer than a count can be (Python
    refuses to convert thousands of digits, and no gang is that large)."""
    digits = digits.lstrip("+").lstrip("0") or "0"
    return int(digits) if len(digits) <= len(str(MAX_COUNT)) else MAX_COUNT + 1


# Parses are cached only for short values: every valid one is short, and a cache keyed
# by whatever fits in an annotation (256 KiB) would let requests fill the memory.
_CACHED_LEN = 32


def parse_min_available(key: str, raw: str, size: int | None) -> MinAvailable:
    """Parse and check ``raw`` against the gang ``size`` (None: a pod alone, whose gang
    size is not known, so only a count can be checked)."""
    if len(raw) <= _CACHED_LEN:
        return _parse_min_cached(key, raw, size)
    return _parse_min(key, raw, size)


def _parse_min(key: str, raw: str, size: int | None) -> MinAvailable:
    text = raw.strip()
    allowed = _min_allowed(size)
    if m := _PERCENT.match(text):
        pct = _bounded_int(m.group(1))
        if size is None:
            raise InvalidValue(
                key,
                raw,
                "is a percentage, but a pod on its own does not know the size of its gang "
                "(set the percentage on the workload, or give a count here)",
                allowed,
            )
        if not 1 <= pct <= 100:
            raise InvalidValue(key, raw, "is not a percentage from 1% to 100%", allowed)
        return MinAvailable(percent=pct)
    if _COUNT.match(text):
        n = _bounded_int(text)
        if n > MAX_COUNT:
            raise InvalidValue(key, raw, f"is too large: at most {MAX_COUNT} pods", allowed)
        if n < 1:
            raise InvalidValue(key, raw, "is too small: a gang needs at least 1 pod", allowed)
        if size is not None and n > size:
            raise InvalidValue(key, raw, f"is more than the gang size {size}", allowed)
        return MinAvailable(count=n)
    if _NEGATIVE.match(text):
        raise InvalidValue(key, raw, "is negative", allowed)
    raise InvalidValue(key, raw, "is neither a number of pods nor a percentage", allowed)


_DEFAULT_MIN_ALLOWED = (
    'a whole number of pods, at least 1, such as "4", or a percentage from 1% to 100%, '
    'such as "80%"'
)


def check_default_min_available(key: str, raw: str) -> MinAvailable:
    """A config's default min-available: for gangs of any size, so a count or a
    percentage, and the message says so (not a gang size of its own)."""
    try:
        return parse_min_available(key, raw, MAX_COUNT)
    except InvalidValue as e:
        raise InvalidValue(key, raw, e.problem, _DEFAULT_MIN_ALLOWED) from None


_parse_min_cached = lru_cache(maxsize=4096)(_parse_min)


def check_duration(key: str, raw: str) -> int:
    """Seconds in a Go duration (``30m``, ``1h30m``, ``90s``), rounded up: the grammar of
    :func:`gangplace.engine.timeparse.parse_duration`, which the descheduler reads the
    same annotations with; a unit is required and the result fits every backend's field."""
    if len(raw) <= _CACHED_LEN:
        return _parse_duration_cached(key, raw)
    return _parse_duration(key, raw)


# The webhook's own words for what is allowed (its answers are pinned): the common units;
# the parser takes every unit Go's does.
_DURATION_ALLOWED = (
    'a positive duration made of numbers with the units h, m or s, such as "30m", "1h30m" or "90s"'
)


def check_checkpoint_interval(key: str, raw: str) -> float:
    """Seconds in a ``corral.dev/checkpoint-interval``: the engine's rule (the descheduler
    reads the same value), refused here with the webhook's words."""
    try:
        return checkpoints.interval_seconds(raw)
    except ValueError as e:
        raise InvalidValue(key, raw, str(e), checkpoints.INTERVAL_ALLOWED) from None


def _parse_duration(key: str, raw: str) -> int:
    try:
        total = timeparse.parse_duration(raw, numbers=False, at_most=MAX_TIMEOUT_SECONDS)
    except timeparse.DurationError as e:
        raise InvalidValue(key, raw, e.problem, _DURATION_ALLOWED) from None
    seconds = math.ceil(total)
    if seconds < 1:
        raise InvalidValue(key, raw, "is too short: at least 1s", _DURATION_ALLOWED)
    return seconds


_parse_duration_cached = lru_cache(maxsize=1024)(_parse_duration)


_TOPOLOGY_MODES: Final = ("hard", "soft")
_TOPOLOGY_ALLOWED: Final = (
    '"hard" or "soft", optionally with the highest network tier the gang may span: "hard:2"'
)


def parse_network_topology(key: str, raw: str) -> dict[str, Any]:
    """``"hard:2"`` -> ``{"mode": "hard", "highestTierAllowed": 2}`` (Volcano 1.12+'s
    ``spec.networkTopology``); InvalidValue else."""
    mode, sep, tier = raw.strip().partition(":")
    mode = mode.strip().lower()
    if mode not in _TOPOLOGY_MODES:
        raise InvalidValue(key, raw, "has no mode hard or soft", _TOPOLOGY_ALLOWED)
    out: dict[str, Any] = {"mode": mode}
    if sep:
        t = tier.strip()
        if not t.isdigit() or int(t) < 1:
            raise InvalidValue(key, raw, "has a tier that is not a number >= 1", _TOPOLOGY_ALLOWED)
        out["highestTierAllowed"] = int(t)
    return out


_NAME_ALLOWED = (
    f"up to {MAX_NAME} lower-case letters, digits, '-' and '.', starting and ending with "
    "a letter or digit"
)


@lru_cache(maxsize=4096)
def check_gang_name(key: str, raw: str) -> str:
    """A gang name usable as a PodGroup name and as a label value by every backend."""
    if len(raw) > MAX_NAME or not _NAME.match(raw):
        raise InvalidValue(key, raw, "is not a valid gang name", _NAME_ALLOWED)
    return raw


@lru_cache(maxsize=1024)
def check_queue(key: str, raw: str) -> str:
    """A queue name usable as a label value (YuniKorn's ``root.a.b`` included)."""
    if len(raw) > MAX_NAME or not _QUEUE.match(raw):
        raise InvalidValue(
            key,
            raw,
            "is not a valid queue name",
            f"up to {MAX_NAME} letters, digits, '-', '_' and '.', starting and ending with "
            "a letter or digit",
        )
    return raw


@lru_cache(maxsize=8192)
def derived_name(*parts: str) -> str:
    """``<kind>-<name>`` in lower case, kept to 63 characters with a stable hash suffix
    when longer, so every backend can carry it in a label."""
    name = "-".join(p for p in parts if p).lower().strip("-.")
    if len(name) <= MAX_NAME and _NAME.match(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    clean = re.sub(r"[^a-z0-9.-]+", "-", name)[: MAX_NAME - 9].strip("-.") or "gang"
    return f"{clean}-{digest}"
