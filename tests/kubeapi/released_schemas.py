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
    compiled = _compiled(release)
    walk = _Walk(compiled)
    walk.struct(obj, compiled.definition(name), None)
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


# The Python types (exactly, as JSON decodes) each schema type accepts.
_PY_TYPES: dict[str, frozenset[type]] = {
    "string": frozenset({str}),
    "boolean": frozenset({bool}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "object": frozenset({dict}),
    "array": frozenset({list}),
    "null": frozenset({type(None)}),
}


class _Node:
    """One schema, compiled: the Python types it accepts (None: any), and how to go on
    into a struct (its definition), a list's items or a map's values."""

    __slots__ = ("accepts", "closed", "items", "props", "schema", "struct", "values")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema  # as written (a $ref kept), for the Go type of an error
        self.accepts: frozenset[type] | None = None
        self.struct: str | None = None  # the Go struct's name, when it is one
        self.props: dict[str, _Node] = {}
        self.closed = False
        self.items: _Node | None = None
        self.values: _Node | None = None


class _Compiled:
    """The compiled schemas of one release, built as decoding first reaches them."""

    def __init__(self, defs: dict[str, Json]) -> None:
        self.defs = defs
        self._nodes: dict[int, _Node] = {}
        self._structs: dict[str, _Node] = {}

    def resolve(self, s: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
        ref = s.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            name = ref[len(_REF) :]
            return self.defs[name], name
        return s, None

    def definition(self, name: str) -> _Node:
        node = self._structs.get(name)
        if node is None:
            node = self.node({"$ref": _REF + name})
            self._structs[name] = node
        return node

    def node(self, s: Mapping[str, Any]) -> _Node:
        node = self._nodes.get(id(s))
        if node is not None:
            return node
        node = _Node(s)
        self._nodes[id(s)] = node
        resolved, name = self.resolve(s)
        node.accepts = self._accepts(resolved)
        if name is not None and "properties" in resolved:
            node.struct = name.rsplit(".", 1)[-1]
            node.closed = resolved.get("additionalProperties") is False
            node.props = {k: self.node(v) for k, v in resolved["properties"].items()}
        extra = resolved.get("additionalProperties")
        if node.struct is None and isinstance(extra, Mapping):
            node.values = self.node(extra)
        items = resolved.get("items")
        if isinstance(items, Mapping):
            node.items = self.node(items)
        return node

    def _accepts(self, s: Mapping[str, Any]) -> frozenset[type] | None:
        alternatives = s.get("oneOf")
        if isinstance(alternatives, list):
            out: frozenset[type] = frozenset()
            for a in alternatives:
                one = self._accepts(self.resolve(a)[0])
                if one is None:
                    return None
                out |= one
            return out
        types = _types(s)
        if types is None:
            return None
        return frozenset().union(*(_PY_TYPES.get(t, frozenset()) for t in types))

    def go_type(self, s: Mapping[str, Any]) -> str:
        s, name = self.resolve(s)
        if name is not None and ("properties" in s or "oneOf" in s or "format" in s):
            return _short(name)  # a struct; Quantity, IntOrString, Time: own unmarshalers
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
            return "[]" + (self.go_type(items) if isinstance(items, Mapping) else "interface {}")
        extra = s.get("additionalProperties")
        if isinstance(extra, Mapping):
            return "map[string]" + self.go_type(extra)
        return "map[string]interface {}"


@functools.cache
def _compiled(release: Release) -> _Compiled:
    return _Compiled(_definitions(release))


# A path, built only when something is found: (parent, step); a step is a field name
# (str) or a list index or map key (a 1-tuple, written in brackets).
Trail = tuple[Any, Any] | None


def _full(trail: Trail) -> str:
    parts: list[str] = []
    while trail is not None:
        trail, step = trail
        parts.append(f"[{step[0]}]" if isinstance(step, tuple) else f".{step}")
    return "".join(reversed(parts)).lstrip(".")


def _fields(trail: Trail) -> str:
    parts: list[str] = []
    while trail is not None:
        trail, step = trail
        if not isinstance(step, tuple):
            parts.append(step)
    return ".".join(reversed(parts))


class _Walk:
    """One decode: the compiled schemas followed from a kind down its values."""

    def __init__(self, compiled: _Compiled) -> None:
        self.compiled = compiled
        self.mismatch: TypeMismatch | None = None
        self.unknown: list[str] = []

    def value(self, value: Any, node: _Node, struct: str, trail: Trail) -> None:
        """``struct``: the innermost Go struct; ``trail``: where ``value`` is."""
        if value is None:
            return  # null decodes to the zero value of anything
        if node.accepts is not None and type(value) not in node.accepts:
            self._mismatch(value, node, struct, trail)
            return
        if type(value) is dict:
            if node.struct is not None:
                self.struct(value, node, trail)
            elif node.values is not None:
                for k, v in value.items():
                    self.value(v, node.values, struct, (trail, (k,)))
                    if self.mismatch is not None:
                        return
        elif type(value) is list and node.items is not None:
            for i, v in enumerate(value):
                self.value(v, node.items, struct, (trail, (i,)))
                if self.mismatch is not None:
                    return

    def struct(self, obj: Mapping[str, Any], node: _Node, trail: Trail) -> None:
        props = node.props
        struct = node.struct or ""
        for k, v in obj.items():
            sub = props.get(k)
            if sub is None:
                if node.closed and not k.startswith("$"):
                    self.unknown.append(_full((trail, k)))
                continue
            self.value(v, sub, struct, (trail, k))
            if self.mismatch is not None:
                return

    def _mismatch(self, value: Any, node: _Node, struct: str, trail: Trail) -> None:
        kind = _json_kind(value)
        resolved = self.compiled.resolve(node.schema)[0]
        if kind == "number" and "integer" in (_types(resolved) or ()) and type(value) is float:
            kind = f"number {json.dumps(value)}"
        go_type = self.compiled.go_type(node.schema)
        self.mismatch = TypeMismatch(kind, struct, _fields(trail), go_type, _full(trail))
