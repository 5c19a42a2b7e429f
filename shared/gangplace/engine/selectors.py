"""Label and field selectors, as the API server reads them (pure: no I/O).

Two forms of label selector exist: the query-string form of list and watch requests
(``app=web,tier in (a,b),!canary``) and the structured form inside objects such as a
PodDisruptionBudget (``matchLabels`` / ``matchExpressions``). Both parse into the same
:class:`LabelSelector`, so a PDB's selector and a list query match a pod the same way.
Field selectors are the small ``field=value,field!=value`` language of list queries.

This is the one implementation: the Kubernetes layer (informers, the evictor's budget
checks, the test API server) and the descheduler's planner (disruption budgets in a
dump) both match with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelRequirement",
    "LabelSelector",
    "SelectorError",
    "field_value",
]


class SelectorError(ValueError):
    """A selector that cannot be parsed; the message quotes it and says what is wrong."""


_LABEL_OPS = ("In", "NotIn", "Exists", "DoesNotExist")
# A qualified label key: optional DNS prefix and a name of alphanumerics, '-', '_', '.'.
_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        # NotIn: a missing key matches, as in the API server.
        return self.key not in labels or labels[self.key] not in self.values

    def __str__(self) -> str:
        if self.operator == "Exists":
            return self.key
        if self.operator == "DoesNotExist":
            return f"!{self.key}"
        vals = sorted(self.values)
        if len(vals) == 1:
            return f"{self.key}={vals[0]}" if self.operator == "In" else f"{self.key}!={vals[0]}"
        op = "in" if self.operator == "In" else "notin"
        return f"{self.key} {op} ({','.join(vals)})"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Requirements that must all hold. ``nothing=True`` is the null selector of a PDB,
    which selects no pod at all (an empty selector selects every pod)."""

    requirements: tuple[LabelRequirement, ...] = ()
    nothing: bool = False

    @property
    def empty(self) -> bool:
        return not self.requirements and not self.nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        """The query-string form: ``a=b,c!=d,e in (f,g),h notin (i),j,!k``."""
        if text is None or not text.strip():
            return cls()
        return cls(tuple(_parse_label_requirements(text)))

    @classmethod
    def from_json(cls, raw: Any, what: str = "selector") -> LabelSelector:
        """The structured form of an object (``matchLabels`` and ``matchExpressions``).
        ``None`` is the null selector (matches nothing)."""
        if raw is None:
            return cls(nothing=True)
        if not isinstance(raw, Mapping):
            raise SelectorError(f"{what}: expected an object with matchLabels/matchExpressions")
        reqs: list[LabelRequirement] = []
        match_labels = raw.get("matchLabels") or {}
        if not isinstance(match_labels, Mapping):
            raise SelectorError(f"{what}.matchLabels: expected a map of strings")
        for k, v in match_labels.items():
            _check_key(str(k), what)
            reqs.append(LabelRequirement(str(k), "In", frozenset({str(v)})))
        for i, expr in enumerate(raw.get("matchExpressions") or ()):
            where = f"{what}.matchExpressions[{i}]"
            if not isinstance(expr, Mapping):
                raise SelectorError(f"{where}: expected an object")
            key, op = expr.get("key"), expr.get("operator")
            if not isinstance(key, str) or op not in _LABEL_OPS:
                raise SelectorError(f"{where}: needs a key and an operator in {_LABEL_OPS}")
            _check_key(key, where)
            values = frozenset(str(v) for v in expr.get("values") or ())
            if op in ("In", "NotIn") and not values:
                raise SelectorError(f"{where}: operator {op} needs at least one value")
            if op in ("Exists", "DoesNotExist") and values:
                raise SelectorError(f"{where}: operator {op} takes no values")
            reqs.append(LabelRequirement(key, str(op), values))
        return cls(tuple(reqs))


def _check_key(key: str, what: str) -> None:
    if len(key) > 316 or not _KEY.match(key):
        raise SelectorError(f"{what}: {key!r} is not a valid label key")


_TOKEN = re.compile(r"\s*(\(|\)|,|!=|==|=|!|[^\s(),!=]+)")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:  # pragma: no cover - the pattern matches any non-space character
            raise SelectorError(f"label selector {text!r}: cannot read at position {pos}")
        out.append(m.group(1))
        pos = m.end()
    return out


def _parse_label_requirements(text: str) -> list[LabelRequirement]:
    toks = _tokens(text)
    reqs: list[LabelRequirement] = []
    i = 0

    def fail(msg: str) -> SelectorError:
        return SelectorError(f"label selector {text!r}: {msg}")

    def value(tok: str) -> str:
        if not _VALUE.match(tok) or len(tok) > 63:
            raise fail(f"{tok!r} is not a valid label value")
        return tok

    while i < len(toks):
        if toks[i] == "!":
            if i + 1 >= len(toks):
                raise fail("'!' must be followed by a key")
            key = toks[i + 1]
            _check_key(key, f"label selector {text!r}")
            reqs.append(LabelRequirement(key, "DoesNotExist"))
            i += 2
        else:
            key = toks[i]
            _check_key(key, f"label selector {text!r}")
            i += 1
            if i >= len(toks) or toks[i] == ",":
                reqs.append(LabelRequirement(key, "Exists"))
            elif toks[i] in ("=", "==", "!="):
                op = "NotIn" if toks[i] == "!=" else "In"
                if i + 1 >= len(toks) or toks[i + 1] in (",", "(", ")"):
                    # key= (empty value) is allowed and means the empty string.
                    reqs.append(LabelRequirement(key, op, frozenset({""})))
                    i += 1
                else:
                    reqs.append(LabelRequirement(key, op, frozenset({value(toks[i + 1])})))
                    i += 2
            elif toks[i] in ("in", "notin"):
                op = "In" if toks[i] == "in" else "NotIn"
                if i + 1 >= len(toks) or toks[i + 1] != "(":
                    raise fail(f"expected '(' after {toks[i]!r}")
                i += 2
                vals: set[str] = set()
                while i < len(toks) and toks[i] != ")":
                    if toks[i] != ",":
                        vals.add(value(toks[i]))
                    i += 1
                if i >= len(toks):
                    raise fail("missing ')'")
                if not vals:
                    raise fail(f"{toks[i - 1]!r}: a set needs at least one value")
                reqs.append(LabelRequirement(key, op, frozenset(vals)))
                i += 1
            else:
                raise fail(f"unexpected {toks[i]!r} after key {key!r}")
        if i < len(toks):
            if toks[i] != ",":
                raise fail(f"expected ',' before {toks[i]!r}")
            i += 1
            if i >= len(toks):
                raise fail("trailing ','")
    return reqs


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str

    def __str__(self) -> str:
        return f"{self.field}{'=' if self.equal else '!='}{self.value}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """``field=value`` / ``field!=value`` terms that must all hold."""

    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(r.field for r in self.requirements)

    def matches(self, get: Callable[[str], str]) -> bool:
        """``get(field)`` returns the object's value of a field as a string."""
        return all((get(r.field) == r.value) == r.equal for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    @classmethod
    def parse(cls, text: str | None) -> FieldSelector:
        if text is None or not text.strip():
            return cls()
        reqs: list[FieldRequirement] = []
        for term in text.split(","):
            term = term.strip()
            m = re.fullmatch(r"([A-Za-z0-9_.\-/]+)\s*(!=|==|=)\s*(.*)", term)
            if not m:
                raise SelectorError(
                    f"field selector {text!r}: {term!r} is not of the form field=value, "
                    "field==value or field!=value"
                )
            reqs.append(FieldRequirement(m.group(1), m.group(2) != "!=", m.group(3).strip()))
        return cls(tuple(reqs))


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """An object's field (dotted path) as the API server renders it in field selectors:
    missing is the empty string, booleans are ``true``/``false``."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
        if cur is None:
            return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)
