"""Watches of the in-memory API server: the change history they resume from, what each
watcher sees of a change, and opening and closing them.

:class:`Watching` is a part of :class:`~tests.kubeapi.store.ApiStore`: it reads the
store's ``history``, ``watches``, ``rv`` and ``compacted_rv``, and its selectors
(:class:`~tests.kubeapi.listing.Listing`). The store's commit appends to the history and
fans each change out to the watchers.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from gangplace.engine.selectors import FieldSelector, LabelSelector, field_value

from tests.kubeapi.resources import ResourceType
from tests.kubeapi.status import ApiStatusError

Json = dict[str, Any]

__all__ = ["Change", "Watch", "Watching"]


@dataclass(slots=True)
class Change:
    rv: int
    rt: ResourceType
    type: str  # ADDED, MODIFIED, DELETED
    obj: Json
    old: Json | None


@dataclass(eq=False, slots=True)
class Watch:
    rt: ResourceType
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    queue: asyncio.Queue[tuple[str, Json] | None] = field(default_factory=asyncio.Queue)

    def matches(self, obj: Json) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        return self.labels.matches(meta.get("labels")) and self.fields.matches(
            lambda f: field_value(obj, f)
        )

    def event_for(self, ch: Change) -> tuple[str, Json] | None:
        """The event this watcher sees for a change: a change that moves an object into or
        out of the selection is an ADDED or DELETED, as the API server sends it."""
        new_match = self.matches(ch.obj)
        if ch.type == "ADDED":
            return ("ADDED", ch.obj) if new_match else None
        if ch.type == "DELETED":
            return ("DELETED", ch.obj) if new_match else None
        old_match = ch.old is not None and self.matches(ch.old)
        if new_match:
            return ("MODIFIED" if old_match else "ADDED", ch.obj)
        return ("DELETED", ch.obj) if old_match else None


class Watching:
    """Watches on the store (a part of :class:`~tests.kubeapi.store.ApiStore`)."""

    history: deque[Change]
    watches: set[Watch]
    rv: int
    compacted_rv: int

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
    ) -> Watch:
        """Register a watcher, with its first events already queued: every matching object
        as ADDED when ``resource_version`` is unset or "0", else the changes after it.
        410 Expired when those changes are no longer in the history."""
        labels, fields = self._selectors(rt, label_selector, field_selector)
        w = Watch(rt, namespace, labels, fields)
        if resource_version in (None, "", "0"):
            for obj in self._select(rt, namespace, labels, fields):
                w.queue.put_nowait(("ADDED", obj))
        else:
            try:
                since = int(str(resource_version))
            except ValueError:
                raise ApiStatusError(
                    400, "BadRequest", f"invalid resourceVersion {resource_version!r}"
                ) from None
            if since < self.compacted_rv:
                raise ApiStatusError(
                    410, "Expired", f"too old resource version: {since} ({self.compacted_rv})"
                )
            for ch in self.history:
                if ch.rv > since and ch.rt.gvr == rt.gvr:
                    ev = w.event_for(ch)
                    if ev:
                        w.queue.put_nowait(ev)
        self.watches.add(w)
        return w

    def unwatch(self, w: Watch) -> None:
        self.watches.discard(w)

    def close_watches(self) -> int:
        """End every open watch stream (cleanly); how many there were."""
        n = len(self.watches)
        for w in list(self.watches):
            w.queue.put_nowait(None)
        self.watches.clear()
        return n

    def compact(self) -> None:
        """Drop the whole history: every resourceVersion before now becomes too old."""
        self.history.clear()
        self.compacted_rv = self.rv
