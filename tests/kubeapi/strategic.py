"""Strategic merge patch for the built-in kinds, as the API server applies it.

Unlike a JSON merge patch, a list with a merge key (``conditions`` by ``type``,
``containers`` by ``name``...) is merged item by item, so a kubelet's status patch carrying
one condition keeps the others; ``finalizers`` merge as a set. The directives the clients
send are understood: ``$patch: delete|replace`` on an item or map,
``$deleteFromPrimitiveList/<key>``, ``$retainKeys``, ``$setElementOrder/<key>`` (the order
of the merged list). Lists without a merge key are replaced, as with the real server.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["MERGE_KEYS", "StrategicPatchError", "strategic_merge"]

# Field name -> merge key, for the lists of core/v1, batch/v1 and policy/v1 that a
# strategic merge patch merges rather than replaces (their patchMergeKey tags).
MERGE_KEYS: dict[str, str] = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "ephemeralContainerStatuses": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "env": "name",
    "ports": "containerPort",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "podIPs": "ip",
    "hostIPs": "ip",
    "addresses": "type",
    "taints": "key",
    "resourceClaims": "name",
    "readinessGates": "conditionType",
    "topologySpreadConstraints": "topologyKey",
}
# Primitive lists merged as sets.
SET_LISTS = frozenset({"finalizers"})


class StrategicPatchError(ValueError):
    """A patch the API server refuses (400)."""


def strategic_merge(target: Any, patch: Any) -> Any:
    """``target`` with ``patch`` applied; neither is changed."""
    if not isinstance(patch, dict):
        raise StrategicPatchError("a strategic merge patch must be a JSON object")
    return _merge_map(copy.deepcopy(target) if isinstance(target, dict) else {}, patch)


def _merge_map(out: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if not isinstance(value, list):
                raise StrategicPatchError(f"{key} must be a list")
            out[field] = [v for v in out.get(field) or () if v not in value]
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            base = out.get(key)
            out[key] = _merge_map(base if isinstance(base, dict) else {}, value)
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = _merge_list(key, out[key], value)
        elif isinstance(value, list):
            out[key] = [
                {k: v for k, v in i.items() if k != "$patch"} if isinstance(i, dict) else i
                for i in value
                if not (isinstance(i, dict) and i.get("$patch") == "delete")
            ]
        else:
            out[key] = value
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") and isinstance(value, list):
            field = key.split("/", 1)[1]
            if isinstance(out.get(field), list):
                out[field] = _ordered(field, out[field], value)
    if isinstance(retain, list):
        for key in list(out):
            if key not in retain:
                del out[key]
    return out


def _merge_list(field: str, base: list[Any], patch: list[Any]) -> list[Any]:
    if field in SET_LISTS:
        return base + [v for v in patch if v not in base]
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(i, dict) for i in patch):
        if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
            return [i for i in patch if not (isinstance(i, dict) and "$patch" in i)]
        return copy.deepcopy(patch)
    if any(i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if "$patch" not in i]
    out = [copy.deepcopy(i) for i in base]
    for item in patch:
        if key not in item:
            raise StrategicPatchError(f"an item of {field} has no merge key {key!r}: {item}")
        at = next(
            (n for n, cur in enumerate(out) if isinstance(cur, dict) and cur.get(key) == item[key]),
            None,
        )
        if item.get("$patch") == "delete":
            if at is not None:
                del out[at]
            continue
        if at is None:
            out.append(_merge_map({}, item))
        else:
            out[at] = _merge_map(out[at], item)
    return out


def _ordered(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    """``items`` in the order a ``$setElementOrder`` directive gives; the rest after."""
    key = MERGE_KEYS.get(field)

    def ident(x: Any) -> Any:
        return x.get(key) if key and isinstance(x, dict) else x

    wanted = [ident(o) for o in order]
    rank = {json_key(w): n for n, w in enumerate(wanted)}
    return sorted(items, key=lambda x: rank.get(json_key(ident(x)), len(rank) + items.index(x)))


def json_key(x: Any) -> str:
    return repr(x)
