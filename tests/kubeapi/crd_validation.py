"""What apiextensions-apiserver refuses in a custom resource after pruning it: a value
that breaks its CRD's structural schema (type, enum, required, bounds, lengths, items,
pattern), 422 Invalid with every error the schema finds.

Followed from kubernetes v1.28.7 ``staging/src/k8s.io/apiextensions-apiserver/pkg/
apiserver/validation/validation.go`` (``ValidateCustomResource`` and
``kubeOpenAPIResultToFieldErrors``: a type error is ``field.TypeInvalid``, an enum
``field.NotSupported``, a missing property ``field.Required``, a too long string
``field.TooLongMaxLength``, too many items ``field.TooMany``, anything else
``field.Invalid`` with kube-openapi's message) and kube-openapi ``pkg/validation/errors/
schema.go`` (``in body must be of type``, ``should be greater than or equal to``, ...).
A null value is not checked: apiextensions drops the nulls of fields that are not
nullable before validating (``PruneNonNullableNullsWithoutDefaults``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tests.kubeapi.status import ApiStatusError

Json = dict[str, Any]

__all__ = ["custom_resource_errors", "invalid_custom_resource"]

Error = tuple[str, str]  # (field path, the error after "path: ")


def _go(value: Any) -> str:
    """A value as ``field.Error`` prints it (``%q`` for strings, ``%v`` for the rest)."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_ok(s: Mapping[str, Any], value: Any) -> bool:
    if s.get("x-kubernetes-int-or-string"):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    want = s.get("type")
    if not isinstance(want, str):
        return True
    have = _type_name(value)
    return have == want or (want == "number" and have == "integer")


def custom_resource_errors(schema: Mapping[str, Any], obj: Mapping[str, Any]) -> list[Error]:
    """Every error ``obj`` (already pruned) has against its CRD's ``openAPIV3Schema``;
    ``apiVersion``, ``kind`` and ``metadata`` at the root are the server's own."""
    out: list[Error] = []
    props = schema.get("properties") or {}
    for key in schema.get("required") or ():
        if key not in obj and key not in ("apiVersion", "kind", "metadata"):
            out.append((key, "Required value"))
    for k, v in obj.items():
        if k in ("apiVersion", "kind", "metadata"):
            continue
        s = props.get(k)
        if isinstance(s, Mapping):
            _check(v, s, k, out)
    return out


def _check(value: Any, s: Mapping[str, Any], path: str, out: list[Error]) -> None:
    if value is None:
        return
    if not _type_ok(s, value):
        want = s.get("type")
        have = _type_name(value)
        out.append(
            (path, f'Invalid value: "{have}": {path} in body must be of type {want}: "{have}"')
        )
        return
    enum = s.get("enum")
    if isinstance(enum, list) and value not in enum:
        allowed = ", ".join(_go(e) for e in enum)
        out.append((path, f"Unsupported value: {_go(value)}: supported values: {allowed}"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _bounds(value, s, path, out)
    elif isinstance(value, str):
        _string(value, s, path, out)
    elif isinstance(value, list):
        _array(value, s, path, out)
    elif isinstance(value, dict):
        _object(value, s, path, out)


def _bounds(value: float, s: Mapping[str, Any], path: str, out: list[Error]) -> None:
    low, high = s.get("minimum"), s.get("maximum")
    said = f"Invalid value: {_go(value)}: {path} in body should be"
    if isinstance(low, (int, float)):
        if s.get("exclusiveMinimum") and value <= low:
            out.append((path, f"{said} greater than {_go(low)}"))
        elif value < low:
            out.append((path, f"{said} greater than or equal to {_go(low)}"))
    if isinstance(high, (int, float)):
        if s.get("exclusiveMaximum") and value >= high:
            out.append((path, f"{said} less than {_go(high)}"))
        elif value > high:
            out.append((path, f"{said} less than or equal to {_go(high)}"))


def _string(value: str, s: Mapping[str, Any], path: str, out: list[Error]) -> None:
    shortest, longest, pattern = s.get("minLength"), s.get("maxLength"), s.get("pattern")
    if isinstance(longest, int) and len(value) > longest:
        out.append((path, f"Too long: may not be longer than {longest}"))
    if isinstance(shortest, int) and len(value) < shortest:
        out.append(
            (
                path,
                f"Invalid value: {_go(value)}: {path} in body should be at least "
                f"{shortest} chars long",
            )
        )
    if isinstance(pattern, str) and re.search(pattern, value) is None:
        out.append((path, f"Invalid value: {_go(value)}: {path} in body should match '{pattern}'"))


def _array(value: list[Any], s: Mapping[str, Any], path: str, out: list[Error]) -> None:
    fewest, most = s.get("minItems"), s.get("maxItems")
    if isinstance(most, int) and len(value) > most:
        out.append((path, f"Too many: {len(value)}: must have at most {most} items"))
    if isinstance(fewest, int) and len(value) < fewest:
        out.append(
            (
                path,
                f"Invalid value: {len(value)}: {path} in body should have at least {fewest} items",
            )
        )
    items = s.get("items")
    if isinstance(items, Mapping):
        for i, v in enumerate(value):
            _check(v, items, f"{path}[{i}]", out)


def _object(value: Json, s: Mapping[str, Any], path: str, out: list[Error]) -> None:
    props = s.get("properties") or {}
    extra = s.get("additionalProperties")
    for key in s.get("required") or ():
        if key not in value:
            out.append((f"{path}.{key}", "Required value"))
    for k, v in value.items():
        sub = props.get(k) if k in props else extra
        if isinstance(sub, Mapping):
            _check(v, sub, f"{path}.{k}", out)


def invalid_custom_resource(
    kind: str, group: str, name: str, errors: list[Error]
) -> ApiStatusError:
    """The 422 of a custom resource its schema refuses, as the API server words it."""
    parts = [f"{f}: {m}" for f, m in errors]
    message = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return ApiStatusError(
        422,
        "Invalid",
        f'{kind}.{group} "{name}" is invalid: {message}',
        {
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": _reason(m), "message": m, "field": f} for f, m in errors],
        },
    )


def _reason(message: str) -> str:
    if " in body must be of type " in message:
        return "FieldValueTypeInvalid"
    for prefix, reason in (
        ("Required value", "FieldValueRequired"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
    ):
        if message.startswith(prefix):
            return reason
    return "FieldValueInvalid"
