"""How the webhook reads a workload kind's pod templates and pod counts.

The kinds themselves are the engine's one registry
(:data:`gangplace.engine.kinds.KINDS`): each gang-forming entry says where a kind keeps
its pod templates and how many pods each template makes. Adding a kind is a registry
entry (or one under ``workloads:`` in the config), never new code. Paths are
dot-separated field names relative to a role object; ``*`` walks every value of a map
(the role is named by the key) or every item of a list (named by ``nameField``); a path
starting with ``$.`` starts at the object's root.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gangplace.engine.kinds import Factor, GangPer, RoleSpec, WorkloadKind, gang_kinds

__all__ = [
    "BUILTIN_KINDS",
    "Factor",
    "GangPer",
    "ResolvedRole",
    "RoleSpec",
    "WorkloadError",
    "WorkloadKind",
    "WorkloadTable",
    "is_set",
    "read_count",
    "resolve_roles",
]

Pointer = tuple[str | int, ...]


class WorkloadError(ValueError):
    """A workload whose replica counts cannot be read; the message names the field."""


# The registry's gang-forming kinds, which the config's ``workloads:`` extend.
BUILTIN_KINDS: tuple[WorkloadKind, ...] = gang_kinds()


class WorkloadTable:
    """Lookup by API group and kind; later entries replace earlier ones."""

    def __init__(self, kinds: Sequence[WorkloadKind]) -> None:
        self._by_kind: dict[tuple[str, str], WorkloadKind] = {}
        for k in kinds:
            self._by_kind[(k.group, k.kind)] = k

    def get(self, group: str, version: str, kind: str) -> WorkloadKind | None:
        entry = self._by_kind.get((group, kind))
        if entry is None or version not in entry.versions:
            return None
        return entry

    def owns(self, api_version: str, kind: str) -> bool:
        """Whether an owner reference (``batch/v1``, ``Job``) names a gang-forming kind."""
        group, _, version = api_version.rpartition("/")
        entry = self._by_kind.get((group, kind))
        return entry is not None and version in entry.versions

    def kinds(self) -> list[WorkloadKind]:
        return list(self._by_kind.values())


# --- resolving a table entry against an object -----------------------------------------


@dataclass(slots=True)
class ResolvedRole:
    """One pod template of a workload: its role name, JSON pointer, and pod count.

    ``format`` is the table's: for ``sparkPod`` the labels, annotations, affinity and
    schedulerName sit on the object at ``pointer`` itself, not under ``metadata`` and
    ``spec``."""

    name: str
    pointer: Pointer
    template: Mapping[str, Any]
    count: int
    format: str = "podTemplate"

    @property
    def meta_at(self) -> Pointer:
        """Where the map holding ``labels`` and ``annotations`` is."""
        return self.pointer if self.format == "sparkPod" else (*self.pointer, "metadata")

    @property
    def spec_at(self) -> Pointer:
        """Where ``schedulerName`` and ``affinity`` are."""
        return self.pointer if self.format == "sparkPod" else (*self.pointer, "spec")

    @property
    def meta(self) -> Mapping[str, Any] | None:
        """The template's map of ``labels`` and ``annotations`` (None: not a map)."""
        m = self.template if self.format == "sparkPod" else self.template.get("metadata")
        return m if isinstance(m, dict) else None

    @property
    def spec(self) -> Any:
        """The template's pod spec (the template itself for ``sparkPod``), as given."""
        return self.template if self.format == "sparkPod" else self.template.get("spec")


def _split(path: str) -> tuple[bool, list[str]]:
    if path.startswith("$."):
        return True, path[2:].split(".")
    return False, path.split(".")


def _walk(
    node: Any, segs: list[str], ptr: Pointer, name: str, name_field: str
) -> Iterator[tuple[Any, Pointer, str]]:
    """Every (value, pointer, role name) the path reaches; missing fields end a branch."""
    if not segs:
        yield node, ptr, name
        return
    head, rest = segs[0], segs[1:]
    if head == "*":
        if isinstance(node, dict):
            for k in node:
                yield from _walk(node[k], rest, (*ptr, str(k)), str(k), name_field)
        elif isinstance(node, list):
            for i, item in enumerate(node):
                label = item.get(name_field) if isinstance(item, dict) else None
                nm = label if isinstance(label, str) and label else str(i)
                yield from _walk(item, rest, (*ptr, i), nm, name_field)
        return
    if isinstance(node, dict) and node.get(head) is not None:
        yield from _walk(node[head], rest, (*ptr, head), name, name_field)


def _get(root: Any, base: Any, path: str) -> tuple[bool, Any]:
    from_root, segs = _split(path)
    node = root if from_root else base
    for s in segs:
        if not isinstance(node, dict) or node.get(s) is None:
            return False, None
        node = node[s]
    return True, node


def _factor(root: Any, role_obj: Any, f: Factor, where: str) -> int:
    values: list[int] = []
    for p in f.paths:
        guard = f.when.get(p)
        if guard is not None and _get(root, role_obj, guard) != (True, True):
            continue
        present, v = _get(root, role_obj, p)
        if not present:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            shown = p[2:] if p.startswith("$.") else f"{where}.{p}"
            raise WorkloadError(f"{shown}: {v!r} is not a whole number of pods (>= 0)")
        values.append(v)
        if f.mode == "first":
            break
    if not values:
        n = f.default + f.offset
    else:
        n = (max(values) if f.mode == "max" else min(values)) + f.offset
    return max(n, 0)


def read_count(obj: Mapping[str, Any], path: str) -> int | None:
    """A whole number at ``path`` from the root (None when unset). Raises WorkloadError
    naming the field when it is not one."""
    present, v = _get(obj, obj, path)
    if not present:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise WorkloadError(f"{path}: {v!r} is not a whole number of pods (>= 0)")
    return v


def is_set(obj: Mapping[str, Any], path: str) -> bool:
    """Whether ``path`` (from the root) holds something other than null or empty."""
    present, v = _get(obj, obj, path)
    return present and v not in ("", {}, [])


def _dotted(ptr: Pointer) -> str:
    return ".".join(str(p) for p in ptr)


def resolve_roles(kind: WorkloadKind, obj: Mapping[str, Any]) -> list[ResolvedRole]:
    """The pod templates of ``obj`` with their pod counts, in table order.

    Two roles that land on the same template (a LeaderWorkerSet without a leader
    template) merge into one whose count is the sum. Raises WorkloadError on a count
    that is not a whole number.
    """
    out: dict[Pointer, ResolvedRole] = {}
    for spec in kind.roles:
        # ``at`` always starts at the object's root.
        segs = spec.at.removeprefix("$.").split(".")
        for role_obj, ptr, walked_name in _walk(obj, segs, (), spec.name, spec.name_field):
            name = (spec.name or walked_name).lower()
            tmpl_ptr: Pointer | None = None
            tmpl: Any = None
            own = True
            for i, tpath in enumerate((spec.template, spec.fallback_template)):
                if tpath is None:
                    continue
                present, value = _get(obj, role_obj, tpath)
                if present and isinstance(value, dict):
                    tmpl_ptr = (*ptr, *tpath.split("."))
                    tmpl, own = value, i == 0
                    break
            if tmpl_ptr is None:
                continue
            count = 1
            for f in spec.count:
                count *= _factor(obj, role_obj, f, _dotted(ptr))
            prev = out.get(tmpl_ptr)
            if prev is None:
                out[tmpl_ptr] = ResolvedRole(name, tmpl_ptr, tmpl, count, spec.format)
            else:
                keep = prev.name if not own else name
                out[tmpl_ptr] = ResolvedRole(keep, tmpl_ptr, tmpl, prev.count + count, spec.format)
    roles = list(out.values())
    # Role names must be unique (YuniKorn task groups, engine roles); suffix duplicates.
    seen: dict[str, int] = {}
    unique: list[ResolvedRole] = []
    for r in roles:
        n = seen.get(r.name, 0)
        seen[r.name] = n + 1
        unique.append(
            r if n == 0 else ResolvedRole(f"{r.name}-{n}", r.pointer, r.template, r.count, r.format)
        )
    return unique
