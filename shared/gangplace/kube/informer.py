"""List-then-watch informers that keep compact records, not whole objects.

An :class:`Informer` lists a resource page by page (so 100,000 pods never sit in memory
as JSON at once), converts each object to a compact record, then watches from the list's
resourceVersion. It follows bookmarks, relists when the server answers 410 Gone (the
resourceVersion fell out of the server's history), and reconnects with jittered backoff
on any other error. A relist replaces the store in one assignment, so readers see the
old or the new state, never a mix; keys are ``namespace/name`` (or ``name``), so an
object can never be held twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gangplace.kube.backoff import Backoff
from gangplace.kube.client import REQUEST_ERRORS, ApiError, KubeClient
from gangplace.kube.resources import Resource, UndeclaredApiCall
from gangplace.kube.task import BackgroundTask

__all__ = ["Informer", "InformerStats", "Listener", "object_key"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Json = dict[str, Any]
# (event type, key, old record or None, new record or None); event type is one of
# ADDED, MODIFIED, DELETED.
Listener = Callable[[str, str, Any, Any], None]


class _Expired(Exception):
    """The watch's resourceVersion is too old: relist."""


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace"), meta.get("name") or ""
    return f"{ns}/{name}" if ns else str(name)


@dataclass(slots=True)
class InformerStats:
    lists: int = 0
    list_restarts: int = 0  # a continue token expired mid-list
    watches: int = 0
    expired: int = 0  # relists caused by 410 Gone
    errors: int = 0
    events: int = 0
    bookmarks: int = 0
    last_error: str = ""


class Informer(BackgroundTask, Generic[T]):
    """One resource, kept in :attr:`store` as records made by ``convert``.

    ``convert`` may raise ``ValueError`` for an object it cannot read; that object is left
    out of the store and its message kept in :attr:`invalid` (it is not retried until it
    changes). Start with :meth:`start`; :attr:`synced` is set after the first full list.
    """

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        convert: Callable[[Json], T],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        backoff: Backoff | None = None,
        name: str | None = None,
    ) -> None:
        if page_size < 1 or watch_timeout < 1:
            raise ValueError("informer: page_size and watch_timeout must be >= 1")
        self.client = client
        self.resource = resource
        self.convert = convert
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.backoff = backoff or Backoff(initial=0.2, maximum=30.0)
        self.name = name or str(resource)
        self.task_name = f"informer {self.name}"
        self.synced = asyncio.Event()
        self.stats = InformerStats()
        self.invalid: dict[str, str] = {}
        self.generation = 0
        self.resource_version = ""
        self._store: dict[str, T] = {}
        self._listeners: list[Listener] = []
        self._rng = random.Random()

    # --- reading ----------------------------------------------------------------------

    @property
    def store(self) -> Mapping[str, T]:
        """The current records by key (read only; replaced whole on a relist)."""
        return self._store

    def get(self, key: str) -> T | None:
        return self._store.get(key)

    def keys(self) -> KeysView[str]:
        return self._store.keys()

    def values(self) -> ValuesView[T]:
        return self._store.values()

    def items(self) -> ItemsView[str, T]:
        return self._store.items()

    def __len__(self) -> int:
        return len(self._store)

    def __iter__(self) -> Iterator[str]:
        return iter(self._store)

    def add_listener(self, listener: Listener) -> None:
        """Called synchronously on every change, after the store is updated."""
        self._listeners.append(listener)

    # --- running ----------------------------------------------------------------------

    async def wait_synced(self, timeout: float | None = None) -> None:
        async with asyncio.timeout(timeout):
            await self.synced.wait()

    async def run(self) -> None:
        """List and watch until cancelled."""
        while True:
            try:
                if not self.resource_version:
                    await self._list()
                started = time.monotonic()
                got = await self._watch()
                # A stream that ends at once without a single event is a server in trouble,
                # not a timeout: do not reconnect in a tight loop.
                if got or time.monotonic() - started > 1.0:
                    self.backoff.reset()
                else:
                    await asyncio.sleep(self.backoff.next())
            except _Expired:
                self.stats.expired += 1
                log.info(
                    "%s: resourceVersion %s expired; relisting", self.name, self.resource_version
                )
                self.resource_version = ""
            except asyncio.CancelledError:
                raise
            except UndeclaredApiCall:
                raise
            except Exception as e:  # any failure: count it, back off, carry on
                self.stats.errors += 1
                self.stats.last_error = f"{type(e).__name__}: {e}"
                delay = self.backoff.next()
                expected = isinstance(e, REQUEST_ERRORS)
                level = logging.WARNING if expected else logging.ERROR
                log.log(
                    level,
                    "%s: %s; retrying in %.1fs",
                    self.name,
                    self.stats.last_error,
                    delay,
                    exc_info=level == logging.ERROR,
                )
                await asyncio.sleep(delay)

    # --- list -------------------------------------------------------------------------

    async def _list(self) -> None:
        """A full list, page by page, into a new store that replaces the old one."""
        self.stats.lists += 1
        new: dict[str, T] = {}
        invalid: dict[str, str] = {}
        token: str | None = None
        rv = ""
        while True:
            try:
                page = await self.client.list(
                    self.resource,
                    namespace=self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    limit=self.page_size,
                    continue_token=token,
                )
            except ApiError as e:
                if e.status == 410 and token:
                    # The continue token expired: start again from a fresh snapshot.
                    self.stats.list_restarts += 1
                    new, invalid, token, rv = {}, {}, None, ""
                    continue
                raise
            meta = page.get("metadata") or {}
            if not rv:
                rv = str(meta.get("resourceVersion") or "")
            for obj in page.get("items") or ():
                key = object_key(obj)
                try:
                    new[key] = self.convert(obj)
                except ValueError as e:
                    invalid[key] = str(e)
            token = meta.get("continue") or None
            if not token:
                break
        if not rv:
            raise ApiError(200, "BadResponse", f"list of {self.resource} without a resourceVersion")
        old, self._store = self._store, new
        self.invalid = invalid
        self.resource_version = rv
        self.generation += 1
        if self._listeners:
            self._notify_relist(old, new)
        self.synced.set()

    def _notify_relist(self, old: dict[str, T], new: dict[str, T]) -> None:
        for key, rec in old.items():
            if key not in new:
                self._notify("DELETED", key, rec, None)
        for key, rec in new.items():
            prev = old.get(key)
            if prev is None:
                self._notify("ADDED", key, None, rec)
            elif prev != rec:
                self._notify("MODIFIED", key, prev, rec)

    # --- watch ------------------------------------------------------------------------

    async def _watch(self) -> bool:
        """Apply watch events until the stream ends; True if any event came."""
        self.stats.watches += 1
        got = False
        # Spread reconnects of many informers over time, as the API server expects.
        timeout = self._rng.randint(self.watch_timeout, 2 * self.watch_timeout)
        try:
            stream = self.client.watch(
                self.resource,
                resource_version=self.resource_version,
                namespace=self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                timeout_seconds=timeout,
            )
            async with contextlib.aclosing(stream):  # the connection closes with the loop
                async for event in stream:
                    got = True
                    self._apply(event)
        except ApiError as e:
            if e.status == 410:
                raise _Expired() from None
            raise
        return got

    def _apply(self, event: Json) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise ApiError(200, "BadResponse", f"watch event {kind} without an object")
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise _Expired()
            raise ApiError(
                code or 500, str(obj.get("reason") or "Error"), str(obj.get("message") or obj)
            )
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
        elif kind in ("ADDED", "MODIFIED"):
            self.stats.events += 1
            key = object_key(obj)
            old = self._store.get(key)
            try:
                rec = self.convert(obj)
            except ValueError as e:
                self.invalid[key] = str(e)
                if old is not None:
                    del self._store[key]
                    self.generation += 1
                    self._notify("DELETED", key, old, None)
            else:
                self.invalid.pop(key, None)
                self._store[key] = rec
                self.generation += 1
                self._notify("MODIFIED" if old is not None else "ADDED", key, old, rec)
        elif kind == "DELETED":
            self.stats.events += 1
            key = object_key(obj)
            self.invalid.pop(key, None)
            old = self._store.pop(key, None)
            if old is not None:
                self.generation += 1
                self._notify("DELETED", key, old, None)
        else:
            log.warning("%s: ignoring watch event of unknown type %r", self.name, kind)
        if rv:
            self.resource_version = rv

    def _notify(self, kind: str, key: str, old: T | None, new: T | None) -> None:
        for listener in self._listeners:
            try:
                listener(kind, key, old, new)
            except Exception:
                log.exception("%s: listener failed on %s %s", self.name, kind, key)
