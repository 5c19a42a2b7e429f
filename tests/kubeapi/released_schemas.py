"""The OpenAPI schemas of each Kubernetes release, and what the API server's decoder
makes of an object of a built-in kind against them: its unknown fields, or the first
value of a wrong JSON type.

The schemas are kubernetes-validate's strict ones (``kubernetes-json-schema/
v1.XX.0-local-strict/_definitions.json``, made from each release's published OpenAPI
document, every struct closed by ``additionalProperties: false``): one file per release
1.25-1.37, read once and walked directly (no general JSON-schema validator: the walk
must tell an unknown field from a wrong type, as the decoder does, and name them as it
does).

What the decoder answers follows kubernetes v1.28.7
``staging/src/k8s.io/apimachinery/pkg/runtime/serializer/json/json.go`` (Decode:
strict decoding with ``sigs.k8s.io/json``, a type error ends decoding before unknown
fields count) and ``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go``
(``transformDecodeError``: ``Pod in version "v1" cannot be handled as a Pod: ...``, 400
BadRequest). A type error is worded as Go's ``encoding/json`` ``UnmarshalTypeError``
(Go 1.20, as kube 1.28 is built): ``json: cannot unmarshal string into Go struct field
PodSpec.spec.containers of type v1.Container`` -- the innermost struct, the field path
without indices, the Go type of the value. The unknown fields are named by
``sigs.k8s.io/json`` with their full path, ``spec.containers[0].foo``.

A real server's OpenAPI document has no enums for built-in kinds and its ``required``
lists are not what its validation enforces (a missing ``containers`` is a validation
error, a missing ``imageID`` in a container status is not): neither is checked here;
the hand-written validation is (:mod:`.validation`, :mod:`.job_validation`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate

from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.versions import Release

Json = dict[str, Any]

__all__ = [
    "SCHEMA_RELEASES",
    "Decoded",
    "decode",
    "decode_error",
    "kinds_of",
    "schema_dir",
]

_ROOT = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
SCHEMA_RELEASES: tuple[Release, ...] = tuple(Release(1, m) for m in range(25, 38))
_REF = "#/$defs/"


def schema_dir(release: Release) -> Path:
    """The folder of the strict schemas of ``release`` (ValueError: none shipped)."""
    path = _ROOT / f"v{release.major}.{release.minor}.0-local-strict"
    if not path.is_dir():
        raise ValueError(f"no OpenAPI schemas of Kubernetes {release} (have 1.25-1.37)")
    return path


@functools.cache
def _definitions(release: Release) -> dict[str, Json]:
    with open(schema_dir(release) / "_definitions.json", encoding="utf-8") as f:
        defs: dict[str, Json] = json.load(f)["$defs"]
    return defs


@functools.cache
def kinds_of(release: Release) -> dict[tuple[str, str], str]:
    """(apiVersion, kind) -> the definition of every kind ``release`` serves with its own
    ``x-kubernetes-group-version-kind`` (lists, options and events of watch included)."""
    out: dict[tuple[str, str], str] = {}
    for name, d in _definitions(release).items():
        gvks = d.get("x-kubernetes-group-version-kind") or ()
        if len(gvks) != 1:
            continue  # DeleteOptions, WatchEvent: one definition for every group
        g = gvks[0]
        api_version = f"{g['group']}/{g['version']}" if g["group"] else g["version"]
        out[(api_version, g["kind"])] = name
    return out


@dataclass(frozen=True, slots=True)
class TypeMismatch:
    """A value of the wrong JSON type, in the words of Go's UnmarshalTypeError."""

    value: str  # "string", "number", "number 1.5", "bool", "object", "array"
    struct: str  # the innermost Go struct, "PodSpec"
    field: str  # its path without indices, "spec.containers"
    go_type: str  # "v1.Container", "int32", "map[string]string"
    path: str  # the full path, "spec.containers[0]" (for tests and messages)

    def message(self) -> str:
        return (
            f"json: cannot unmarshal {self.value} into Go struct field "
            f"{self.struct}.{self.field} of type {self.go_type}"
        )


@dataclass(frozen=True, slots=True)
class Decoded:
    """What decoding found: the first type mismatch (decoding stops there) or the
    unknown fields, in document order."""

    mismatch: TypeMismatch | None
    unknown: tuple[str, ...]


_NO_FINDINGS = Decoded(None, ())


def decode(release: Release, obj: Mapping[str, Any], api_version: str, kind: str) -> Decoded:
    """Decode ``obj`` as ``api_version``/``kind`` of ``release``; a kind the release's
    schemas lack is not checked (nothing found)."""
    name = kinds_of(release).get((api_version, kind))
    if name is None:
        return _NO_FINDINGS
    walk = _Walk(_definitions(release))
    walk.struct(obj, name, "", "")
    return Decoded(walk.mismatch, tuple(walk.unknown))


def decode_error(kind: str, version: str, mismatch: TypeMismatch) -> ApiStatusError:
    """The 400 a body with a wrong type gets (create.go ``transformDecodeError``)."""
    return ApiStatusError(
        400,
        "BadRequest",
        f'{kind} in version "{version}" cannot be handled as a {kind}: {mismatch.message()}',
    )


def _types(s: Mapping[str, Any]) -> tuple[str, ...] | None:
    """A schema's ``type``: a name or a list of names (None: any)."""
    t = s.get("type")
    if t is None:
        return None
    return (t,) if isinstance(t, str) else tuple(t)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _short(name: str) -> str:
    """``io.k8s.api.core.v1.PodSpec`` -> ``v1.PodSpec`` (the Go package and type)."""
    parts = name.split(".")
    return ".".join(parts[-2:])


class _Walk:
    """One decode: the definitions followed from a kind down its values."""

    def __init__(self, defs: dict[str, Json]) -> None:
        self.defs = defs
        self.mismatch: TypeMismatch | None = None
        self.unknown: list[str] = []

    def _resolve(self, s: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
        ref = s.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            name = ref[len(_REF) :]
            return self.defs[name], name
        return s, None

    def _go_type(self, s: Mapping[str, Any]) -> str:
        s, name = self._resolve(s)
        if name is not None and "properties" in s:
            return _short(name)
        if name is not None and ("oneOf" in s or "format" in s):
            return _short(name)  # Quantity, IntOrString, Time: their own unmarshalers
        t = next((t for t in _types(s) or () if t != "null"), None)
        if t == "integer":
            return str(s.get("format") or "int64")
        if t == "number":
            return "float64"
        if t == "boolean":
            return "bool"
        if t == "string":
            return "[]uint8" if s.get("format") == "byte" else "string"
        if t == "array":
            items = s.get("items")
            return "[]" + (self._go_type(items) if isinstance(items, Mapping) else "interface {}")
        extra = s.get("additionalProperties")
        if isinstance(extra, Mapping):
            return "map[string]" + self._go_type(extra)
        return "map[string]interface {}"

    def _accepts(self, s: Mapping[str, Any], value: Any) -> bool:
        alternatives = s.get("oneOf")
        if isinstance(alternatives, list):
            return any(self._accepts(self._resolve(a)[0], value) for a in alternatives)
        types = _types(s)
        if types is None:
            return True
        for t in types:
            if (
                (t == "string" and isinstance(value, str))
                or (t == "boolean" and isinstance(value, bool))
                or (t == "integer" and isinstance(value, int) and not isinstance(value, bool))
                or (
                    t == "number"
                    and isinstance(value, (int, float))
                    and not isinstance(value, bool)
                )
                or (t == "object" and isinstance(value, dict))
                or (t == "array" and isinstance(value, list))
            ):
                return True
        return False

    def _mismatch(self, value: Any, s: Mapping[str, Any], at: tuple[str, str, str, str]) -> None:
        struct, field, path, _ = at
        kind = _json_kind(value)
        types = _types(self._resolve(s)[0]) or ()
        if kind == "number" and "integer" in types and isinstance(value, float):
            kind = f"number {json.dumps(value)}"
        self.mismatch = TypeMismatch(kind, struct, field, self._go_type(s), path)

    def value(self, value: Any, s: Mapping[str, Any], at: tuple[str, str, str, str]) -> None:
        """``at``: (innermost struct, its field path, full path, Go path so far)."""
        if self.mismatch is not None or value is None:
            return  # null decodes to the zero value of anything
        resolved, name = self._resolve(s)
        if not self._accepts(resolved, value):
            self._mismatch(value, s, at)
            return
        if isinstance(value, dict):
            if name is not None and "properties" in resolved:
                self.struct(value, name, at[2], at[3])
                return
            extra = resolved.get("additionalProperties")
            if isinstance(extra, Mapping):
                for k, v in value.items():
                    self.value(v, extra, (at[0], at[1], f"{at[2]}[{k}]", at[3]))
        elif isinstance(value, list):
            items = resolved.get("items")
            if isinstance(items, Mapping):
                for i, v in enumerate(value):
                    self.value(v, items, (at[0], at[1], f"{at[2]}[{i}]", at[3]))

    def struct(self, obj: Mapping[str, Any], name: str, path: str, go_path: str) -> None:
        d = self.defs[name]
        props: Mapping[str, Any] = d.get("properties") or {}
        closed = d.get("additionalProperties") is False
        struct = name.rsplit(".", 1)[-1]
        for k, v in obj.items():
            sub = f"{path}.{k}" if path else k
            s = props.get(k)
            if s is None:
                if closed and not k.startswith("$"):
                    self.unknown.append(sub)
                continue
            field = f"{go_path}.{k}" if go_path else k
            self.value(v, s, (struct, field, sub, field))
            if self.mismatch is not None:
                return
