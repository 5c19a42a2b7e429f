"""Label and field selectors: the engine's pure implementation, re-exported where the
Kubernetes layer has always offered them."""

from ..engine.selectors import (
    FieldRequirement,
    FieldSelector,
    LabelRequirement,
    LabelSelector,
    SelectorError,
    field_value,
)

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelRequirement",
    "LabelSelector",
    "SelectorError",
    "field_value",
]
