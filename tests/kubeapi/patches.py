"""The three kinds of PATCH the in-memory API server applies: JSON merge patch (RFC 7386),
strategic merge patch (built-in kinds only) and JSON patch (RFC 6902)."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import jsonpointer

from tests.kubeapi.resources import ResourceType
from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.strategic import StrategicPatchError, strategic_merge

__all__ = ["apply_patch", "merge_patch"]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def apply_patch(rt: ResourceType, base: Any, content_type: str, patch: Any) -> Any:
    """``base`` patched by ``patch`` of ``content_type``; a Status error names what was
    wrong with it. ``base`` may be changed: pass a copy."""
    if content_type == "application/strategic-merge-patch+json":
        if not rt.builtin:
            raise ApiStatusError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml",
            )
        try:
            body = strategic_merge(base, patch)
        except StrategicPatchError as e:
            raise ApiStatusError(400, "BadRequest", str(e)) from None
    elif content_type == "application/merge-patch+json":
        if not isinstance(patch, dict):
            raise ApiStatusError(400, "BadRequest", "a merge patch must be a JSON object")
        body = merge_patch(base, patch)
    elif content_type == "application/json-patch+json":
        if not isinstance(patch, list):
            raise ApiStatusError(400, "BadRequest", "a JSON patch must be a JSON array")
        try:
            body = jsonpatch.JsonPatch(patch).apply(base)
        except jsonpatch.JsonPatchTestFailed as e:
            raise ApiStatusError(422, "Invalid", f"the JSON patch test failed: {e}") from None
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
            raise ApiStatusError(422, "Invalid", f"the JSON patch cannot be applied: {e}") from None
    else:
        raise ApiStatusError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types "
            f"include: application/json-patch+json, application/merge-patch+json, "
            f"application/strategic-merge-patch+json (got {content_type!r})",
        )
    return body
