"""core/v1 Events: what corral tells the people who watch their objects.

One body builder for every Event corral writes (on an evicted pod, on a moved gang's
PodGroup), so they carry the same source, reporting component and size limits.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gangplace.kube.client import REQUEST_ERRORS, KubeClient
from gangplace.kube.resources import EVENTS

__all__ = ["MAX_EVENT_MESSAGE", "event_body", "post_event"]

MAX_EVENT_MESSAGE = 1024
_INSTANCE = socket.gethostname()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(
    involved: Mapping[str, Any],
    *,
    reason: str,
    message: str,
    type_: str = "Normal",
    action: str = "",
    component: str = "corral-descheduler",
    instance: str = "",
) -> dict[str, Any]:
    """An Event about ``involved`` (apiVersion, kind, namespace, name[, uid]), named
    after it with a unique suffix, in its namespace."""
    name = str(involved["name"])
    namespace = str(involved["namespace"])
    suffix = f".{time.time_ns():x}"
    now = _now()
    host = instance or _INSTANCE
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name[: 253 - len(suffix)] + suffix, "namespace": namespace},
        "involvedObject": {k: v for k, v in involved.items() if v},
        "reason": reason,
        "message": message[:MAX_EVENT_MESSAGE],
        "type": type_,
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": component, "host": host},
        "reportingComponent": component,
        "reportingInstance": host,
    }
    if action:
        body["action"] = action
    return body


async def post_event(client: KubeClient, body: Mapping[str, Any]) -> str:
    """Create the Event; the error text, or '' when it was written (an Event that cannot
    be written never fails what it reports on)."""
    try:
        await client.create(EVENTS, body, namespace=str(body["metadata"]["namespace"]))
    except REQUEST_ERRORS as e:
        return f"{type(e).__name__}: {e}"
    return ""
