"""Resource quantities in the canonical form the API server stores them in: "1000" cpu is
answered as "1k", "0.5" as "500m", "1024Mi" as "1Gi", as typed objects come back from a
real server. Written apart from the engine's parser on purpose."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

__all__ = ["canonical", "canonical_resources"]

_Q = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIX = {e: s for s, e in _DECIMAL.items()}


def canonical(text: str) -> str:
    """The canonical form of a quantity; ``text`` unchanged when it is not one."""
    m = _Q.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        return text
    number, suffix = Fraction(m.group(1)), m.group(2) or ""
    if suffix in _BINARY:
        value, fmt = number * 1024 ** _BINARY[suffix], "binary"
    elif suffix[:1] in ("e", "E") and suffix not in _DECIMAL:
        value, fmt = number * Fraction(10) ** int(suffix[1:]), "exponent"
    else:
        value, fmt = number * Fraction(10) ** _DECIMAL[suffix], "decimal"
    if fmt == "binary" and (abs(value) < 1024 or value.denominator != 1):
        fmt = "decimal"
    if fmt == "binary":
        k = 0
        while k < 6 and value % 1024 ** (k + 1) == 0:
            k += 1
        return f"{int(value / 1024**k)}{'' if k == 0 else [*_BINARY][k - 1]}"
    # Decimal: rounded up to a nano, then the largest exponent (a multiple of 3) that
    # leaves a whole mantissa.
    nanos = -((-value * 10**9) // 1)
    if nanos == 0:
        return "0"
    exp = -9
    while exp < 18 and nanos % 10 ** (exp + 12) == 0:
        exp += 3
    mantissa = nanos // 10 ** (exp + 9)
    if fmt == "exponent":
        return f"{mantissa}" if exp == 0 else f"{mantissa}e{exp}"
    return f"{mantissa}{_SUFFIX[exp]}"


def canonical_resources(resources: Any) -> None:
    """Canonicalise a ResourceRequirements (requests, limits) or resource list in place."""
    if not isinstance(resources, dict):
        return
    for key in ("requests", "limits"):
        if isinstance(resources.get(key), dict):
            canonical_resources(resources[key])
    for name, value in list(resources.items()):
        if isinstance(value, str) and name not in ("requests", "limits"):
            resources[name] = canonical(value)
