"""Small helpers the controller models share: owner references, conditions, status
patches that drop fields, finalizer removal."""

from __future__ import annotations

from typing import Any

from tests.controllers.rest import Json, Rest, RestError

__all__ = [
    "controller_uid",
    "drop_finalizer",
    "is_ready",
    "owner_ref",
    "set_condition",
    "status_patch",
]


def controller_uid(obj: Json) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid", ""))
    return ""


def owner_ref(owner: Json) -> Json:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def condition(obj: Json, type_: str) -> Json | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return dict(c)
    return None


def is_ready(pod: Json) -> bool:
    c = condition(pod, "Ready")
    return c is not None and c.get("status") == "True"


def set_condition(conditions: list[Json], new: Json) -> list[Json]:
    """Replace the condition of ``new['type']`` (keeping its lastTransitionTime when
    the status did not change), or append it."""
    out = []
    found = False
    for c in conditions:
        if c.get("type") == new["type"]:
            found = True
            if c.get("status") == new.get("status") and "lastTransitionTime" in c:
                new = {**new, "lastTransitionTime": c["lastTransitionTime"]}
            out.append(new)
        else:
            out.append(c)
    if not found:
        out.append(new)
    return out


def status_patch(old: Json, new: Json) -> Json:
    """A merge patch that turns status ``old`` into ``new`` (null drops a field)."""
    patch: dict[str, Any] = {k: new[k] for k in new if old.get(k) != new[k]}
    for k in old:
        if k not in new:
            patch[k] = None
    return patch


async def drop_finalizer(
    rest: Rest, api_version: str, plural: str, obj: Json, finalizer: str
) -> bool:
    """Remove one finalizer, guarded by the object's resourceVersion; False if the
    object changed or went meanwhile (the next pass sees the new state)."""
    meta = obj["metadata"]
    fins = list(meta.get("finalizers") or ())
    if finalizer not in fins:
        return False
    fins.remove(finalizer)
    try:
        await rest.patch(
            api_version,
            plural,
            meta.get("namespace", ""),
            meta["name"],
            {"metadata": {"finalizers": fins or None, "resourceVersion": meta["resourceVersion"]}},
        )
    except RestError as e:
        if e.status in (404, 409):
            return False
        raise
    return True
