"""The answers admission gives: allowed unchanged, denied with a status, or allowed
with the JSON patch of its edits and its warnings."""

from __future__ import annotations

import binascii
from collections.abc import Sequence
from typing import Any

import orjson

from webhook.admission.patch import Editor
from webhook.admission.review import API_VERSION, AdmitResult, Request
from webhook.podgroup_intent import OwnerHint, PodGroupIntent

__all__ = ["JobRule", "allow", "cap", "deny", "finish", "review_of"]

# Warnings longer than this may be cut by the API server.
_WARNING_MAX = 250


# The Job spec fields that put the disruption rule first (podFailurePolicy, and
# podReplacementPolicy where needed; None: unchanged), warnings (webhook.admission.disruption).
JobRule = tuple[dict[str, Any] | None, list[str]]


def review_of(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def allow(req: Request, kind: str, outcome: str, reason: str = "") -> AdmitResult:
    return AdmitResult(
        review_of({"uid": req.uid, "allowed": True}),
        req.uid,
        req.operation,
        kind,
        outcome,
        dry_run=req.dry_run,
        reason=reason,
    )


def deny(req: Request, kind: str, code: int, reason: str, message: str) -> AdmitResult:
    response = {
        "uid": req.uid,
        "allowed": False,
        "status": {"code": code, "reason": reason, "message": message},
    }
    return AdmitResult(
        review_of(response),
        req.uid,
        req.operation,
        kind,
        "denied",
        dry_run=req.dry_run,
        reason=message,
    )


def cap(text: str) -> str:
    return text if len(text) <= _WARNING_MAX else text[: _WARNING_MAX - 3] + "..."


def finish(
    req: Request,
    kind: str,
    ed: Editor,
    warnings: Sequence[str],
    intents: Sequence[PodGroupIntent] = (),
    hints: Sequence[OwnerHint] = (),
    job_rule: JobRule | None = None,
) -> AdmitResult:
    ops = ed.ops()
    if job_rule is not None and job_rule[0] is not None:
        # Their own operations: the Editor's diff is not needed for fields set whole
        # ("add" replaces a value that is there).
        for key, value in job_rule[0].items():
            ops.append({"op": "add", "path": f"/spec/{key}", "value": value})
    response: dict[str, Any] = {"uid": req.uid, "allowed": True}
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = binascii.b2a_base64(orjson.dumps(ops), newline=False).decode()
    if warnings:
        response["warnings"] = list(warnings)
    return AdmitResult(
        review_of(response),
        req.uid,
        req.operation,
        kind,
        "patched" if ops else "unchanged",
        ops,
        tuple(warnings),
        () if req.dry_run else tuple(intents),
        () if req.dry_run else tuple(hints),
        req.dry_run,
    )
