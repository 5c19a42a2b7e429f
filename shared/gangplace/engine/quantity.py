"""Exact parsing of Kubernetes resource quantities.

The API server keeps quantities as exact decimals and rounds *up* when a value is read
at a coarser scale (``Quantity.MilliValue()`` and ``Value()`` both take the ceiling), so
``0.1m`` of CPU is 1 milli-CPU and ``1.5`` bytes is 2 bytes. We follow that with
:class:`fractions.Fraction`, never floats, so no request is ever rounded down.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "QuantityError",
    "exact_quantity",
    "format_quantity",
    "parse_quantity",
    "to_int",
    "to_milli",
    "unit_of",
]

# <signedNumber><suffix>; suffix is a binary SI unit, a decimal SI unit, or e<int>.
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# The API server refuses quantities beyond 2^63-1 in their base unit; so do we.
_MAX = Fraction(2**63 - 1)
# Far longer than any quantity the API server keeps (19 digits and a fraction), and
# short of Python's limit on converting digits (4,300), which would raise otherwise.
_MAX_LEN = 128


class QuantityError(ValueError):
    """A resource quantity string that Kubernetes would not accept."""

    def __init__(self, text: object, why: str) -> None:
        super().__init__(f"invalid quantity {text!r}: {why}")
        self.text = text
        self.why = why


@lru_cache(maxsize=65536)
def parse_quantity(text: str) -> Fraction:
    """The exact value of ``text`` in base units (cores, bytes, counts)."""
    if not isinstance(text, str):
        raise QuantityError(text, "expected a string such as '500m', '2Gi' or '1.5'")
    s = text.strip()
    if s != text or not s:
        raise QuantityError(text, "empty, or surrounded by whitespace")
    if len(s) > _MAX_LEN:
        raise QuantityError(f"{s[:32]}...", f"{len(s)} characters; no quantity is that long")
    m = _QUANTITY.match(s)
    if m is None:
        raise QuantityError(
            text,
            "expected a number with an optional suffix "
            "(n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or e<exponent>)",
        )
    value = Fraction(m.group("num"))
    if m.group("bin"):
        value *= _BINARY[m.group("bin")]
    elif m.group("exp"):
        exp = int(m.group("exp")[1:])
        if abs(exp) > 30:
            raise QuantityError(text, "exponent out of range")
        value *= Fraction(10) ** exp
    else:
        value *= _DECIMAL[m.group("dec") or ""]
    if abs(value) > _MAX:
        raise QuantityError(text, "too large")
    return value


def _ceil(value: Fraction) -> int:
    return math.ceil(value)


def to_milli(text: str | int | float) -> int:
    """Milli-units, rounded up as ``Quantity.MilliValue()`` does (CPU: ``100m`` -> 100)."""
    return _ceil(_as_fraction(text) * 1000)


def to_int(text: str | int | float) -> int:
    """Whole units, rounded up as ``Quantity.Value()`` does (memory: ``1Ki`` -> 1024)."""
    return _ceil(_as_fraction(text))


def _as_fraction(text: str | int | float) -> Fraction:
    # Kubernetes JSON always carries quantities as strings, but hand-written YAML may not.
    if isinstance(text, bool):
        raise QuantityError(text, "expected a string such as '500m', '2Gi' or '1.5'")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(text, "not a finite number")
        return Fraction(repr(text))
    return parse_quantity(text)


# Resources measured in milli-units; every other resource is counted in whole units.
MILLI_RESOURCES = frozenset({"cpu"})


def unit_of(resource: str) -> str:
    """The integer unit the engine uses for ``resource``."""
    if resource in MILLI_RESOURCES:
        return "milli"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return "bytes"
    return "count"


def format_quantity(resource: str, value: int) -> str:
    """A short human form of an engine integer (``12500m`` -> ``12.5``, bytes -> ``Gi``)."""
    if resource in MILLI_RESOURCES:
        return f"{value}m" if value % 1000 else str(value // 1000)
    if unit_of(resource) == "bytes":
        for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= factor and value % factor == 0:
                return f"{value // factor}{suffix}"
        for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
            if value >= factor:
                return f"{value / factor:.1f}{suffix}"
        return str(value)
    return str(value)


def exact_quantity(resource: str, value: int) -> str:
    """An engine integer of ``resource`` as a quantity string that parses back to exactly
    it (``24300m``, ``192Gi``, or plain bytes when no binary suffix divides evenly), for
    objects the API stores, unlike :func:`format_quantity` which rounds for reading."""
    unit = unit_of(resource)
    if unit == "milli":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if unit == "bytes" and value:
        for suffix, factor in _BINARY_DESC:
            if value % factor == 0:
                return f"{value // factor}{suffix}"
    return str(value)


_BINARY_DESC = sorted(((k, v) for k, v in _BINARY.items()), key=lambda kv: -kv[1])
