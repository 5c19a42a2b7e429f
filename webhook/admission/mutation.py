"""The edits admission makes to an object, through an :class:`~webhook.admission.patch.Editor`:
the backend's keys on a metadata map, the scheduler's name, the node-pool pin; and the
pod (or template) as it will be after them, for the engine to read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from webhook.admission.backends.dialect import Keys
from webhook.admission.patch import Editor, PatchError, Pointer
from webhook.admission.roles import ResolvedRole
from webhook.admission.spark import pod_view

if TYPE_CHECKING:
    from webhook.config import NodePool

__all__ = [
    "apply_keys",
    "dotted",
    "foreign_scheduler",
    "pin_to_pool",
    "set_scheduler",
    "view",
]


def dotted(ptr: Pointer) -> str:
    return ".".join(str(p) for p in ptr)


def apply_keys(ed: Editor, meta_at: Pointer, keys: Keys, *, fill_only: bool) -> None:
    """Write ``keys`` on the metadata at ``meta_at``; touch a map only if it changes."""
    if keys.labels:
        _apply_map(ed, (*meta_at, "labels"), keys.labels, fill_only)
    if keys.annotations:
        _apply_map(ed, (*meta_at, "annotations"), keys.annotations, fill_only)


def _apply_map(ed: Editor, path: Pointer, wanted: dict[str, str], fill_only: bool) -> None:
    current = ed.get(path) or {}
    if not isinstance(current, dict):
        raise PatchError(f"{'.'.join(map(str, path))}: expected a map of strings")
    if fill_only:
        changes = {k: v for k, v in wanted.items() if k not in current}
    else:
        changes = {k: v for k, v in wanted.items() if current.get(k) != v}
    if changes:
        ed.map(path).update(changes)


# What the API server writes when a pod names no scheduler: ours to replace.
_DEFAULT_SCHEDULER = "default-scheduler"


def foreign_scheduler(spec: Any, ours: str | None) -> str | None:
    """The scheduler a pod (template) chose itself, if it is neither the default nor
    ours: such a pod is left alone rather than taken from the scheduler it asked for."""
    if ours is None or not isinstance(spec, dict):
        return None
    name = spec.get("schedulerName")
    if isinstance(name, str) and name not in ("", _DEFAULT_SCHEDULER, ours):
        return name
    return None


def set_scheduler(ed: Editor, spec_at: Pointer, name: str | None) -> None:
    if name is None:
        return
    path = (*spec_at, "schedulerName")
    if ed.get(path) != name:
        ed.set(path, name)


def pin_to_pool(ed: Editor, spec_at: Pointer, pool: NodePool | None) -> None:
    """Required node affinity to the pool label, ANDed into every term (terms are
    ORed, so each must carry it)."""
    if pool is None:
        return
    req = {"key": pool.key, "operator": "In", "values": [pool.value]}
    path = (*spec_at, "affinity")
    current = ed.get(path)
    terms = _terms(current)
    if terms and all(
        isinstance(t, dict) and req in (t.get("matchExpressions") or ()) for t in terms
    ):
        return
    new = ed.tree(path)
    if not isinstance(new, dict):
        new = {}
    where = ".".join(str(p) for p in path)
    node = new
    for field_ in ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        node = node.setdefault(field_, {})
        if not isinstance(node, dict):
            raise PatchError(f"{where}.{field_}: expected an object")
        where = f"{where}.{field_}"
    new_terms = node.setdefault("nodeSelectorTerms", [])
    if not isinstance(new_terms, list) or not all(isinstance(t, dict) for t in new_terms):
        raise PatchError(f"{where}.nodeSelectorTerms: expected a list of objects")
    if not new_terms:
        new_terms.append({"matchExpressions": [req]})
    for t in new_terms:
        exprs = t.setdefault("matchExpressions", [])
        if not isinstance(exprs, list):
            raise PatchError(f"{where}.nodeSelectorTerms: matchExpressions must be a list")
        if req not in exprs:
            exprs.append(req)
    ed.set(path, new)


def _terms(affinity: Any) -> list[Any]:
    try:
        terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
    except (KeyError, TypeError):
        return []
    return terms if isinstance(terms, list) else []


def view(ed: Editor, role: ResolvedRole) -> dict[str, Any]:
    """A pod (or template) as it will be after the edits, for the engine to read.
    A spec or metadata that is not an object reads as empty (the patch will refuse it)."""
    base = role.pointer
    if role.format == "sparkPod":
        desc = ed.get(base)
        desc = dict(desc) if isinstance(desc, dict) else {}
        affinity = ed.get((*base, "affinity"))
        if affinity is not None:
            desc["affinity"] = affinity
        app = ed.get(base[:-1])
        return pod_view(desc, app if isinstance(app, dict) else {}, dotted(base))
    spec = ed.get((*base, "spec"))
    if not isinstance(spec, dict):
        spec = {}
    affinity = ed.get((*base, "spec", "affinity"))
    if affinity is not spec.get("affinity"):
        spec = {**spec, "affinity": affinity}
    meta = ed.get((*base, "metadata"))
    return {"metadata": meta if isinstance(meta, dict) else {}, "spec": spec}
