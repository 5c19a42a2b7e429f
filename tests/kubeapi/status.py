"""The Status objects the in-memory API server answers errors (and some successes) with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Json = dict[str, Any]

__all__ = ["ApiStatusError", "status_body"]


def status_body(
    code: int, reason: str, message: str, details: Json | None = None, success: bool = False
) -> Json:
    body: Json = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if success else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = {k: v for k, v in details.items() if v != ""}
    if success or not reason:
        del body["reason"]  # omitted when empty, as the API server's encoding does
        if not message:
            del body["message"]
    return body


class ApiStatusError(Exception):
    """An error the server answers with a Status body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Json | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = dict(headers or {})

    def body(self) -> Json:
        return status_body(self.code, self.reason, self.message, self.details)
