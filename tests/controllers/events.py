"""Events as controllers record them: core/v1 Events named ``<object>.<hex>``, with a
repeated (object, type, reason, message, component) counted up on one Event, as
client-go's recorder aggregates them."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime

from tests.controllers.rest import Json, Rest, RestError

__all__ = ["EventRecorder", "iso"]


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Writes Events for one component. ``legacy`` Events carry ``source.component``
    (the Job controller, Volcano); the kube-scheduler's carry ``reportingComponent``,
    ``action`` and ``eventTime`` instead, as the recordings show."""

    _ids = itertools.count(0x18EDAC0000000000)

    def __init__(
        self,
        rest: Rest,
        component: str,
        clock: Callable[[], datetime],
        *,
        legacy: bool = True,
        reporting_component: str = "",
    ) -> None:
        self.rest = rest
        self.component = component
        self.clock = clock
        self.legacy = legacy
        self.reporting_component = reporting_component
        self._seen: dict[tuple[str, str, str, str, str], tuple[str, int]] = {}

    async def record(
        self, obj: Json, type_: str, reason: str, message: str, action: str = ""
    ) -> None:
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        key = (ns, meta.get("uid", meta["name"]), type_, reason, message)
        now = iso(self.clock())
        seen = self._seen.get(key)
        if seen is not None:
            name, count = seen
            try:
                await self.rest.patch(
                    "v1", "events", ns, name, {"count": count + 1, "lastTimestamp": now}
                )
                self._seen[key] = (name, count + 1)
                return
            except RestError as e:
                if e.status != 404:
                    raise
        name = f"{meta['name']}.{next(self._ids):x}"
        event: Json = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {
                "kind": obj.get("kind", ""),
                "namespace": ns,
                "name": meta["name"],
                "uid": meta.get("uid", ""),
                "apiVersion": obj.get("apiVersion", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "reportingInstance": "",
        }
        if self.legacy:
            event |= {
                "source": {"component": self.component},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
                "eventTime": None,
                "reportingComponent": self.reporting_component,
            }
        else:
            event |= {
                "source": {},
                "firstTimestamp": None,
                "lastTimestamp": None,
                "eventTime": self.clock().strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "action": action,
                "reportingComponent": self.component,
                "reportingInstance": f"{self.component}-model",
            }
        await self.rest.create("v1", "events", ns, event)
        self._seen[key] = (name, 1)
