"""RFC 6902 JSON patches built by diffing only the subtrees a mutation touched.

An :class:`Editor` hands out writable copies of the few maps and values admission
changes (a template's annotations, its labels, its schedulerName, its affinity) and
leaves the request object untouched. :meth:`Editor.ops` compares each copy with the
original: new keys become ``add``, changed ones ``replace``; a parent that does not
exist yet (a pod with no ``metadata.annotations``) is added whole, once, so the patch
applies to the object exactly as the API server sent it. Pointers use RFC 6901
escaping (``scheduling.k8s.io~1group-name``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["Editor", "PatchError", "Pointer", "escape", "pointer"]

Pointer = tuple[str | int, ...]
_MISSING = object()


class PatchError(ValueError):
    """The object has a non-object where the patch needs to descend."""


def escape(segment: str | int) -> str:
    """RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``."""
    s = segment if segment.__class__ is str else str(segment)
    if "~" in s:
        s = s.replace("~", "~0")
    if "/" in s:
        s = s.replace("/", "~1")
    return s


# Pointers are made from the code's own paths and keys (a few dozen), so they are kept;
# the bound only guards against a caller that makes them from data.
_POINTERS: dict[Pointer, str] = {}
_POINTERS_MAX = 1024


def pointer(path: Pointer) -> str:
    hit = _POINTERS.get(path)
    if hit is None:
        hit = "/" + "/".join(map(escape, path)) if path else ""
        if len(_POINTERS) >= _POINTERS_MAX:
            _POINTERS.clear()
        _POINTERS[path] = hit
    return hit


def _lookup(root: Any, path: Pointer) -> Any:
    # Pointers come from walking the object itself (list indices only where lists
    # are), so plain indexing is safe; anything missing or of another type is absent.
    node = root
    try:
        for seg in path:
            node = node[seg]
    except (KeyError, IndexError, TypeError):
        return _MISSING
    return node


class Editor:
    """Copy-on-write edits of a JSON object, turned into a JSON patch."""

    __slots__ = ("_edits", "_kinds", "root")

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self._edits: dict[Pointer, Any] = {}
        self._kinds: dict[Pointer, str] = {}

    def get(self, path: Pointer, default: Any = None) -> Any:
        """The value at ``path`` with the edits so far applied."""
        if not self._edits:
            v = _lookup(self.root, path)
            return default if v is _MISSING or v is None else v
        for edited_path, edited in self._edits.items():
            n = len(edited_path)
            if path[:n] == edited_path:
                v = _lookup(edited, path[n:])
                return default if v is _MISSING or v is None else v
        v = _lookup(self.root, path)
        return default if v is _MISSING or v is None else v

    def map(self, path: Pointer) -> dict[str, Any]:
        """A writable copy of the map at ``path`` (``{}`` if absent); its changes are
        patched key by key."""
        edits = self._edits
        if edits:
            hit = edits.get(path)
            if hit is not None:
                return hit  # type: ignore[no-any-return]
            self._check_disjoint(path)
        orig = _lookup(self.root, path)
        if orig is not _MISSING and orig is not None and not isinstance(orig, dict):
            raise PatchError(
                f"{pointer(path) or '/'}: expected an object, found {type(orig).__name__}"
            )
        copy_ = dict(orig) if isinstance(orig, dict) else {}
        edits[path] = copy_
        self._kinds[path] = "map"
        return copy_

    def tree(self, path: Pointer) -> Any:
        """A deep, writable copy of the value at ``path`` (None if absent), patched as a
        whole when it changes; hand the new value to :meth:`set` if it was absent."""
        if path in self._edits:
            return self._edits[path]
        self._check_disjoint(path)
        orig = _lookup(self.root, path)
        value = None if orig is _MISSING else copy.deepcopy(orig)
        self._edits[path] = value
        self._kinds[path] = "value"
        return value

    def set(self, path: Pointer, value: Any) -> None:
        """Set the value at ``path`` (patched as a whole: add, or replace if different)."""
        if self._edits and path not in self._edits:
            self._check_disjoint(path)
        self._edits[path] = value
        self._kinds[path] = "value"

    def _check_disjoint(self, path: Pointer) -> None:
        n = len(path)
        for other in self._edits:
            m = min(n, len(other))
            if other[:m] == path[:m]:
                raise PatchError(f"overlapping edits at {pointer(other)} and {pointer(path)}")

    # --- the patch ----------------------------------------------------------------

    def ops(self) -> list[dict[str, Any]]:
        """The JSON patch (RFC 6902) from the original object to the edited one."""
        out: list[dict[str, Any]] = []
        created: dict[Pointer, dict[str, Any]] = {}  # missing ancestor -> its add op
        kinds = self._kinds
        for path, new in self._edits.items():
            orig = _lookup(self.root, path)
            is_map = kinds[path] == "map"
            if orig is not _MISSING:
                if is_map and isinstance(orig, dict):
                    for k, v in new.items():
                        old = orig.get(k, _MISSING)
                        if old is _MISSING or old != v:
                            ptr = (*path, k)
                            out.append(
                                {
                                    "op": "add" if old is _MISSING else "replace",
                                    "path": _POINTERS.get(ptr) or pointer(ptr),
                                    "value": v,
                                }
                            )
                elif is_map and not new:
                    continue  # a null map that stayed empty
                elif orig != new:
                    op = "add" if orig is None else "replace"
                    out.append({"op": op, "path": pointer(path), "value": new})
                continue
            if is_map and not new:
                continue  # asked for, but nothing put in it
            if new is None:
                continue
            self._add_missing(path, new, out, created)
        return out

    def _add_missing(
        self,
        path: Pointer,
        new: Any,
        out: list[dict[str, Any]],
        created: dict[Pointer, dict[str, Any]],
    ) -> None:
        # The deepest ancestor that exists; everything below it is added in one op.
        k = len(path) - 1
        while k > 0 and _lookup(self.root, path[:k]) in (_MISSING, None):
            k -= 1
        parent = _lookup(self.root, path[:k])
        if not isinstance(parent, dict):
            raise PatchError(
                f"{pointer(path[:k]) or '/'}: expected an object, found {type(parent).__name__}"
            )
        top = path[: k + 1]
        op = created.get(top)
        if op is None:
            value: Any = new
            for seg in reversed(path[k + 1 :]):
                value = {seg: value}
            # ``top`` is absent or null in its parent; ``add`` covers both.
            op = {"op": "add", "path": pointer(top), "value": value}
            created[top] = op
            out.append(op)
            return
        node = op["value"]
        for seg in path[k + 1 : -1]:
            node = node.setdefault(seg, {})
        node[path[-1]] = new
