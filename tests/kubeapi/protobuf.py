"""The one protobuf body this server reads: a SelfSubjectAccessReview, which kubectl's
typed client (``kubectl auth can-i``) sends as ``application/vnd.kubernetes.protobuf``
(it accepts a JSON answer). Every other protobuf body is 415, as the JSON-only server
this is cannot decode it.

The envelope is kubernetes' ``runtime.Unknown`` behind the magic ``k8s\\x00``
(``staging/src/k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go``, v1.28);
the field numbers are those of ``staging/src/k8s.io/api/authorization/v1/generated.proto``
(SelfSubjectAccessReview: metadata 1, spec 2; the spec's resourceAttributes 1 and
nonResourceAttributes 2; ResourceAttributes: namespace 1, verb 2, group 3, version 4,
resource 5, subresource 6, name 7; NonResourceAttributes: path 1, verb 2).
"""

from __future__ import annotations

from typing import Any

from tests.kubeapi.status import ApiStatusError

Json = dict[str, Any]

__all__ = ["PROTOBUF", "access_review_from_protobuf"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"

_RESOURCE_ATTRIBUTES = {
    1: "namespace",
    2: "verb",
    3: "group",
    4: "version",
    5: "resource",
    6: "subresource",
    7: "name",
}
_NON_RESOURCE_ATTRIBUTES = {1: "path", 2: "verb"}


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(data: bytes) -> dict[int, list[bytes | int]]:
    """A message's fields by number (length-delimited ones as bytes)."""
    out: dict[int, list[bytes | int]] = {}
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        value: bytes | int
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i : i + size], i + size
        elif wire == 1:
            value, i = int.from_bytes(data[i : i + 8], "little"), i + 8
        elif wire == 5:
            value, i = int.from_bytes(data[i : i + 4], "little"), i + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _message(fields: dict[int, list[bytes | int]], number: int) -> dict[int, list[bytes | int]]:
    raw = fields.get(number, [b""])[-1]
    return _fields(raw) if isinstance(raw, bytes) else {}


def _strings(fields: dict[int, list[bytes | int]], names: dict[int, str]) -> Json:
    out: Json = {}
    for number, name in names.items():
        raw = fields.get(number, [b""])[-1]
        if isinstance(raw, bytes) and raw:
            out[name] = raw.decode()
    return out


def unsupported() -> ApiStatusError:
    return ApiStatusError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml",
    )


def access_review_from_protobuf(raw: bytes) -> Json:
    """The SelfSubjectAccessReview in a protobuf body, as its JSON form."""
    if not raw.startswith(_MAGIC):
        raise unsupported()
    try:
        unknown = _fields(raw[len(_MAGIC) :])
        type_meta = _strings(_message(unknown, 1), {1: "apiVersion", 2: "kind"})
        if type_meta.get("kind") != "SelfSubjectAccessReview":
            raise unsupported()
        spec_fields = _message(_message(unknown, 2), 2)
        spec: Json = {}
        if 1 in spec_fields:
            spec["resourceAttributes"] = _strings(_message(spec_fields, 1), _RESOURCE_ATTRIBUTES)
        if 2 in spec_fields:
            spec["nonResourceAttributes"] = _strings(
                _message(spec_fields, 2), _NON_RESOURCE_ATTRIBUTES
            )
    except (ValueError, UnicodeDecodeError) as e:
        raise ApiStatusError(400, "BadRequest", f"error decoding the protobuf body: {e}") from None
    return {**type_meta, "spec": spec}
