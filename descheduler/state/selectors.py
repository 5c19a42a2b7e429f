"""Label selectors as a PodDisruptionBudget carries them (``matchLabels`` and
``matchExpressions``), matched against pod labels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LabelSelector", "SelectorError"]

_OPS = ("In", "NotIn", "Exists", "DoesNotExist")


class SelectorError(ValueError):
    """A selector the API server would not accept; the message says which part."""


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """``None`` selects nothing (a null selector); an empty one selects everything."""

    labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    nothing: bool = False

    @classmethod
    def from_json(cls, raw: Any, what: str = "selector") -> LabelSelector:
        if raw is None:
            return cls(nothing=True)
        if not isinstance(raw, Mapping):
            raise SelectorError(f"{what}: expected a map with matchLabels / matchExpressions")
        labels = raw.get("matchLabels") or {}
        if not isinstance(labels, Mapping):
            raise SelectorError(f"{what}.matchLabels: expected a map of strings")
        exprs = []
        for e in raw.get("matchExpressions") or ():
            if not isinstance(e, Mapping) or not isinstance(e.get("key"), str):
                raise SelectorError(f"{what}.matchExpressions: each needs a key")
            op = e.get("operator")
            if op not in _OPS:
                raise SelectorError(
                    f"{what}.matchExpressions[{e['key']}]: operator must be one of {_OPS}"
                )
            values = tuple(str(v) for v in e.get("values") or ())
            if op in ("In", "NotIn") and not values:
                raise SelectorError(f"{what}.matchExpressions[{e['key']}]: {op} needs values")
            exprs.append((str(e["key"]), str(op), values))
        return cls(tuple(sorted((str(k), str(v)) for k, v in labels.items())), tuple(exprs))

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for k, v in self.labels:
            if labels.get(k) != v:
                return False
        for key, op, values in self.expressions:
            have = key in labels
            if op == "Exists" and not have:
                return False
            if op == "DoesNotExist" and have:
                return False
            if op == "In" and (not have or labels[key] not in values):
                return False
            if op == "NotIn" and have and labels[key] in values:
                return False
        return True
