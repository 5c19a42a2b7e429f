"""The answer admission gives, made in one place from a :mod:`decision
<webhook.admission.decision>`: allowed unchanged, denied with a status, or allowed with
the JSON patch of its edits and its warnings."""

from __future__ import annotations

import binascii
from typing import Any

import orjson

from webhook.admission.decision import Decision, Denied, Patched, Unchanged
from webhook.admission.patch import PatchError
from webhook.admission.review import API_VERSION, AdmitResult, Request

__all__ = ["answer"]

_STATUS_REASONS = {400: "BadRequest", 403: "Forbidden"}


def _review_of(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def answer(req: Request, kind: str, decision: Decision) -> AdmitResult:
    """The AdmissionReview answering ``req`` with ``decision``; ``kind`` labels the metrics."""
    ops: list[dict[str, Any]] = []
    if isinstance(decision, Patched):
        try:
            ops = decision.edits.ops() if decision.edits is not None else []
        except PatchError as e:  # an edit where the object has no place for it
            decision = Denied(400, str(e))
    if isinstance(decision, Unchanged):
        return AdmitResult(
            _review_of({"uid": req.uid, "allowed": True}),
            req.uid,
            req.operation,
            kind,
            decision.outcome,
            dry_run=req.dry_run,
            reason=decision.reason,
        )
    if isinstance(decision, Denied):
        status = {
            "code": decision.code,
            "reason": _STATUS_REASONS[decision.code],
            "message": decision.message,
        }
        return AdmitResult(
            _review_of({"uid": req.uid, "allowed": False, "status": status}),
            req.uid,
            req.operation,
            kind,
            "denied",
            dry_run=req.dry_run,
            reason=decision.message,
        )
    if decision.job_rule is not None and decision.job_rule[0] is not None:
        # Their own operations: the Editor's diff is not needed for fields set whole
        # ("add" replaces a value that is there).
        for key, value in decision.job_rule[0].items():
            ops.append({"op": "add", "path": f"/spec/{key}", "value": value})
    response: dict[str, Any] = {"uid": req.uid, "allowed": True}
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = binascii.b2a_base64(orjson.dumps(ops), newline=False).decode()
    warnings = decision.warnings
    if warnings:
        response["warnings"] = list(warnings)
    return AdmitResult(
        _review_of(response),
        req.uid,
        req.operation,
        kind,
        "patched" if ops else "unchanged",
        ops,
        tuple(warnings),
        () if req.dry_run else tuple(decision.intents),
        () if req.dry_run else tuple(decision.hints),
        req.dry_run,
    )
