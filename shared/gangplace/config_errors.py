"""pydantic's validation errors in the user's terms, for every corral config file.

One style for the webhook's and the descheduler's configs, the same the webhook uses
for the keys users type on their objects (``webhook.admission.validate.InvalidValue``)::

    KEY: VALUE what is wrong; allowed: what is allowed

with KEY the path of the key as the user wrote it (``eviction.excluded_namespaces``,
``defaultMinAvailable.*``), never pydantic's "Input should be a valid tuple".
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gangplace.engine.kinds import WorkloadKind, with_added

__all__ = [
    "ConfigError",
    "KeyedValueError",
    "checked_kinds",
    "describe_validation_error",
    "shown",
]


class ConfigError(ValueError):
    """A config file that cannot be used (either component's); the message names the file
    and the key."""


class KeyedValueError(ValueError):
    """A refusal whose message already names the key, the value and what is allowed;
    raised from a validator, it is shown as it is."""


_Added = TypeVar("_Added", bound=Sequence[WorkloadKind])


def checked_kinds(entries: _Added, *, gangs: bool = False) -> _Added:
    """A config's ``workloads:`` entries, refused in one line when the registry cannot
    take them (the same check for the webhook's config and the descheduler's).
    ``gangs``: each entry needs its roles (the webhook makes gangs of the kinds it adds;
    the descheduler reads none)."""
    for i, e in enumerate(entries):
        if gangs and not e.roles:
            raise KeyedValueError(
                f"workloads[{i}].roles: missing for {e.kind} of group {e.group!r} (allowed: "
                "its roles, where its pod templates are and how many pods each makes)"
            )
    try:
        with_added(entries)
    except ValueError as e:
        raise KeyedValueError(str(e)) from None
    return entries


_SHOWN = 60


def shown(value: Any) -> str:
    """A value as the user wrote it in YAML, cut when long: strings in double quotes."""
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def _list_example(value: Any) -> str:
    item = value if isinstance(value, str) and value else "kube-system"
    return f"a list, such as [{item}]"


def _allowed(kind: str, ctx: dict[str, Any], value: Any) -> tuple[str, str] | None:
    """(what is wrong, what is allowed) for pydantic's error ``kind``."""
    table: dict[str, tuple[str, str]] = {
        "string_type": ("is not a string", 'a string; in YAML quote it, such as "3"'),
        "list_type": ("is not a list", _list_example(value)),
        "tuple_type": ("is not a list", _list_example(value)),
        "set_type": ("is not a list", _list_example(value)),
        "dict_type": ("is not a mapping", "a mapping of keys to values, such as {key: value}"),
        "model_type": ("is not a mapping", "a mapping of the keys this section takes"),
        "model_attributes_type": ("is not a mapping", "a mapping of the keys this section takes"),
        "int_type": ("is not a whole number", "a whole number, such as 4"),
        "int_parsing": ("is not a whole number", "a whole number, such as 4"),
        "int_from_float": ("is not a whole number", "a whole number, such as 4"),
        "float_type": ("is not a number", "a number, such as 0.5"),
        "float_parsing": ("is not a number", "a number, such as 0.5"),
        "finite_number": ("is not a finite number", "a number, such as 0.5"),
        "bool_type": ("is not true or false", "true or false"),
        "bool_parsing": ("is not true or false", "true or false"),
        "missing": ("is missing", "a value for this required key"),
        "too_short": ("is too short", f"at least {ctx.get('min_length')} item(s)"),
        "string_too_short": ("is too short", f"at least {ctx.get('min_length')} character(s)"),
        "string_too_long": ("is too long", f"at most {ctx.get('max_length')} characters"),
        "greater_than_equal": ("is too small", f"a number >= {ctx.get('ge')}"),
        "greater_than": ("is too small", f"a number > {ctx.get('gt')}"),
        "less_than_equal": ("is too large", f"a number <= {ctx.get('le')}"),
        "less_than": ("is too large", f"a number < {ctx.get('lt')}"),
        "enum": ("is not one of the choices", f"{ctx.get('expected')}"),
        "literal_error": ("is not one of the choices", f"{ctx.get('expected')}"),
    }
    return table.get(kind)


def _section(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (through ``X | None``), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if (found := _section(arg)) is not None:
                return found
    return None


def _keys_beside(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> list[str]:
    """The keys the section holding ``loc``'s last part takes, as users write them."""
    cls = model
    for part in loc[:-1]:
        if cls is None:
            return []
        field = next(
            (f for n, f in cls.model_fields.items() if part in (n, f.alias)),
            None,
        )
        cls = _section(field.annotation) if field is not None else None
    if cls is None:
        return []
    return [f.alias or n for n, f in cls.model_fields.items()]


def _one(err: Any, model: type[BaseModel] | None) -> str:
    key = ".".join(str(x) for x in err["loc"]) or "(top level)"
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        keys = _keys_beside(model, tuple(err["loc"]))
        return f"{key}: unknown key" + (f"; allowed: {', '.join(keys)}" if keys else "")
    cause = ctx.get("error")
    if isinstance(cause, KeyedValueError):
        return str(cause)  # the check's own message names the key and the value already
    known = _allowed(kind, ctx, value)
    if known is not None:
        problem, allowed = known
        if kind == "missing":
            return f"{key}: {problem}"
        return f"{key}: {shown(value)} {problem}; allowed: {allowed}"
    msg = str(cause) if cause is not None else err["msg"].removeprefix("Value error, ")
    if isinstance(value, dict | list) or kind == "missing":
        return f"{key}: {msg}"
    return f"{key}: {shown(value)}: {msg}"


def describe_validation_error(
    error: ValidationError, where: str, model: type[BaseModel] | None = None
) -> str:
    """Every error of ``error`` on one line, each naming its key: ``WHERE: KEY: ...``,
    the errors joined by ``; ``. With the config's ``model``, an unknown key lists the
    known ones."""
    return f"{where}: " + "; ".join(_one(e, model) for e in error.errors())
