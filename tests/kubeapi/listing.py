"""Lists of the in-memory API server: label and field selectors, pages with continue
tokens (a consistent snapshot), and lists at an exact resourceVersion from the history.

:class:`Listing` is a part of :class:`~tests.kubeapi.store.ApiStore`: it reads the
store's ``objects``, ``history``, ``rv`` and ``compacted_rv`` and keeps the open paged
lists.
"""

from __future__ import annotations

import base64
import itertools
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

import orjson
from gangplace.engine.selectors import FieldSelector, LabelSelector, SelectorError

from tests.kubeapi.resources import ResourceType
from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.watches import Change, Watch

Json = dict[str, Any]
Key = tuple[str, str]

__all__ = ["Continuation", "Listing"]


@dataclass(slots=True)
class Continuation:
    """An open paged list: its resourceVersion and every item of it."""

    rv: int
    items: list[Json]


class Listing:
    """Lists on the store (a part of :class:`~tests.kubeapi.store.ApiStore`)."""

    objects: dict[tuple[str, str, str], dict[Key, Json]]
    history: deque[Change]
    rv: int
    compacted_rv: int
    _continues: OrderedDict[str, Continuation]
    _continue_ids: itertools.count[int]

    def _selectors(
        self, rt: ResourceType, label_selector: str | None, field_selector: str | None
    ) -> tuple[LabelSelector, FieldSelector]:
        try:
            labels = LabelSelector.parse(label_selector)
            fields = FieldSelector.parse(field_selector)
        except SelectorError as e:
            raise ApiStatusError(400, "BadRequest", str(e)) from None
        allowed = rt.field_labels | {"metadata.name", "metadata.namespace"}
        for f in fields.fields:
            if f not in allowed:
                raise ApiStatusError(
                    400,
                    "BadRequest",
                    f"field label not supported: {f} (supported for {rt.qualified}: "
                    f"{', '.join(sorted(allowed))})",
                )
        return labels, fields

    def _select(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> list[Json]:
        w = Watch(rt, namespace, labels, fields)
        objs = self.objects[rt.gvr]
        return [objs[k] for k in sorted(objs) if w.matches(objs[k])]

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> Json:
        """A List object, one page of it when ``limit`` is set (pages of one list are a
        consistent snapshot, as the API server guarantees)."""
        if continue_token:
            cont_id, pos = self._decode_continue(continue_token)
            cont = self._continues.get(cont_id)
            if cont is None:
                raise ApiStatusError(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.",
                )
            self._continues.move_to_end(cont_id)
            return self._page(rt, cont.items, pos, limit, cont.rv, cont_id)
        labels, fields = self._selectors(rt, label_selector, field_selector)
        rv = self.rv
        if resource_version not in (None, "", "0"):
            try:
                wanted = int(str(resource_version))
            except ValueError:
                raise ApiStatusError(
                    400, "BadRequest", f"invalid resourceVersion {resource_version!r}"
                ) from None
            if wanted > self.rv:
                raise ApiStatusError(
                    504,
                    "Timeout",
                    f"Too large resource version: {wanted}, current: {self.rv}",
                    headers={"Retry-After": "1"},
                )
            if resource_version_match == "Exact":
                if wanted < self.compacted_rv:
                    raise ApiStatusError(
                        410, "Expired", "The resourceVersion for the provided list is too old."
                    )
                items = self._as_of(rt, wanted, namespace, labels, fields)
                return self._page(rt, items, 0, limit, wanted, None)
        items = self._select(rt, namespace, labels, fields)
        return self._page(rt, items, 0, limit, rv, None)

    def _as_of(
        self,
        rt: ResourceType,
        rv: int,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> list[Json]:
        """The objects as they were at resourceVersion ``rv``: undo later changes."""
        state = dict(self.objects[rt.gvr])
        for ch in reversed(self.history):
            if ch.rv <= rv:
                break
            if ch.rt.gvr != rt.gvr:
                continue
            meta = ch.obj.get("metadata") or {}
            key = (meta.get("namespace", "") if rt.namespaced else "", meta["name"])
            if ch.type == "ADDED":
                state.pop(key, None)
            elif ch.old is not None:
                state[key] = ch.old
        w = Watch(rt, namespace, labels, fields)
        return [state[k] for k in sorted(state) if w.matches(state[k])]

    def _page(
        self,
        rt: ResourceType,
        items: list[Json],
        pos: int,
        limit: int,
        rv: int,
        cont_id: str | None,
    ) -> Json:
        meta: Json = {"resourceVersion": str(rv)}
        end = len(items) if not limit else min(len(items), pos + limit)
        if end < len(items):
            if cont_id is None:
                cont_id = str(next(self._continue_ids))
                self._continues[cont_id] = Continuation(rv, items)
                while len(self._continues) > 64:
                    self._continues.popitem(last=False)
            meta["continue"] = base64.urlsafe_b64encode(
                orjson.dumps({"id": cont_id, "pos": end, "rv": rv})
            ).decode()
            meta["remainingItemCount"] = len(items) - end
        elif cont_id is not None:
            self._continues.pop(cont_id, None)
        page = items[pos:end]
        if rt.builtin:
            page = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in page]
        return {
            "kind": f"{rt.kind}List",
            "apiVersion": rt.api_version,
            "metadata": meta,
            "items": page,
        }

    def _decode_continue(self, token: str) -> tuple[str, int]:
        try:
            raw = orjson.loads(base64.urlsafe_b64decode(token.encode()))
            return str(raw["id"]), int(raw["pos"])
        except (ValueError, KeyError, TypeError):
            raise ApiStatusError(
                400, "BadRequest", f"continue key is not valid: {token!r}"
            ) from None

    def expire_continues(self) -> None:
        """Forget every open paged list (the next page of each is 410 Expired)."""
        self._continues.clear()
