"""The admission review model: the AdmissionReview envelope read (a fast check of the
fields the answer needs, before any decision), the answer's shape and its errors."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from webhook.podgroup_intent import OwnerHint, PodGroupIntent

__all__ = ["API_VERSION", "AdmitResult", "Request", "ReviewError", "decode_patch", "parse_request"]

API_VERSION: Final = "admission.k8s.io/v1"


class ReviewError(ValueError):
    """The body is not an AdmissionReview this webhook can answer (HTTP 400)."""


@dataclass(slots=True)
class AdmitResult:
    """The answer to one review. ``review`` is the AdmissionReview to send back."""

    review: dict[str, Any]
    uid: str
    operation: str
    kind: str
    outcome: str  # patched | unchanged | skipped | unhandled | denied
    patch: list[dict[str, Any]] = field(default_factory=list)
    warnings: tuple[str, ...] = ()
    intents: tuple[PodGroupIntent, ...] = ()
    hints: tuple[OwnerHint, ...] = ()
    dry_run: bool = False
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return bool(self.review["response"]["allowed"])


def decode_patch(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch in an AdmissionResponse (``[]`` if none)."""
    raw = response.get("patch")
    if not raw:
        return []
    ops: list[dict[str, Any]] = orjson.loads(base64.b64decode(raw))
    return ops


@dataclass(slots=True)
class Request:
    uid: str
    operation: str
    group: str
    version: str
    kind: str
    namespace: str
    obj: Mapping[str, Any] | None
    dry_run: bool
    sub_resource: str
    old: Any = None


def _str_field(m: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    v = m.get(key)
    if v.__class__ is str:
        return v
    if v is None and not required:
        return ""
    raise ReviewError(f"{where}.{key}: expected a string, got {type(v).__name__}")


def parse_request(review: Any) -> Request:
    if review.__class__ is not dict:
        raise ReviewError("expected a JSON object: an AdmissionReview")
    kind, api = review.get("kind"), review.get("apiVersion")
    if kind != "AdmissionReview":
        raise ReviewError(f"kind {kind!r}: expected AdmissionReview")
    if api != API_VERSION:
        raise ReviewError(f"apiVersion {api!r}: only {API_VERSION} is served")
    req = review.get("request")
    if req.__class__ is not dict:
        raise ReviewError("request: expected an object")
    uid = _str_field(req, "uid", "request")
    if not uid:
        raise ReviewError("request.uid: must not be empty")
    gvk = req.get("kind")
    if gvk.__class__ is not dict:
        raise ReviewError("request.kind: expected an object with group, version and kind")
    obj = req.get("object")
    if obj is not None and obj.__class__ is not dict:
        raise ReviewError("request.object: expected an object")
    dry = req.get("dryRun")
    if dry is not None and dry.__class__ is not bool:
        raise ReviewError("request.dryRun: expected true or false")
    op, ns, sub = req.get("operation"), req.get("namespace"), req.get("subResource")
    group, version, kind = gvk.get("group"), gvk.get("version"), gvk.get("kind")
    if (
        op.__class__ is str
        and version.__class__ is str
        and kind.__class__ is str
        and (group is None or group.__class__ is str)
        and (ns is None or ns.__class__ is str)
        and (sub is None or sub.__class__ is str)
    ):
        # Every field well formed (the usual case): no per-field checks.
        return Request(
            uid,
            op,
            group or "",
            version,
            kind,
            ns or "",
            obj,
            bool(dry),
            sub or "",
            req.get("oldObject"),
        )
    return Request(
        uid,
        _str_field(req, "operation", "request"),
        _str_field(gvk, "group", "request.kind", required=False),
        _str_field(gvk, "version", "request.kind"),
        _str_field(gvk, "kind", "request.kind"),
        _str_field(req, "namespace", "request", required=False),
        obj,
        bool(dry),
        _str_field(req, "subResource", "request", required=False),
        req.get("oldObject"),
    )
