"""CustomResourceDefinitions as apiextensions-apiserver keeps them: the defaults and
status it gives a stored CRD, the checks it makes first, and the structural pruning of
unknown fields from the custom resources it serves.

Followed from kubernetes v1.28.7 ``staging/src/k8s.io/apiextensions-apiserver``:
``pkg/apis/apiextensions/v1/defaults.go`` (singular, listKind, conversion),
``pkg/apis/apiextensions/validation/validation.go`` (the name, one storage version),
``pkg/controller/status/naming_controller.go`` and
``pkg/controller/establish/establishing_controller.go`` (the NamesAccepted and
Established conditions, their reasons and messages) and
``pkg/apiserver/schema/pruning/algorithm.go`` (:func:`prune`). The same files are
unchanged in what is modelled here through v1.32.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tests.kubeapi.resources import now_iso
from tests.kubeapi.status import ApiStatusError

Json = dict[str, Any]

__all__ = [
    "CRD_GROUP",
    "crd_defaults",
    "crd_status",
    "prune",
    "schema_of",
    "validate_crd",
]

CRD_GROUP = "apiextensions.k8s.io"


def prune(schema: Mapping[str, Any] | None, obj: Json, *, root: bool = True) -> list[str]:
    """Drop from ``obj``, in place, every field its ``openAPIV3Schema`` does not declare,
    as the API server does to a custom resource on create and update; the paths of the
    fields dropped are returned (``spec.runPolicy.suspend``), as the server's
    ``fieldValidation`` reports them.

    An object keeps the ``properties`` it declares (each pruned by its own schema); with
    ``additionalProperties`` every value is kept and pruned by that schema; with
    ``x-kubernetes-preserve-unknown-fields: true`` unknown fields stay (known ones are
    still pruned); anything else goes. Array items are pruned by ``items``. At the root
    (and in an ``x-kubernetes-embedded-resource``) ``apiVersion``, ``kind`` and
    ``metadata`` always stay. ``schema`` None (a CRD without one) prunes nothing."""
    if schema is None:
        return []
    pruned: list[str] = []
    _prune(obj, schema, "", pruned, root)
    return sorted(pruned)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _prune(x: Any, s: Mapping[str, Any] | None, path: str, out: list[str], root: bool) -> None:
    if s is not None and s.get("x-kubernetes-preserve-unknown-fields"):
        _keep_unknown(x, s, path, out)
        return
    if isinstance(x, dict):
        embedded = root or bool(s and s.get("x-kubernetes-embedded-resource"))
        props = (s or {}).get("properties") or {}
        extra = (s or {}).get("additionalProperties")
        for k in list(x):
            if embedded and k in ("apiVersion", "kind", "metadata"):
                continue
            if k in props:
                _prune(x[k], props[k], _join(path, k), out, False)
            elif isinstance(extra, Mapping):
                _prune(x[k], extra, _join(path, k), out, False)
            elif extra is True:
                continue
            else:
                out.append(_join(path, k))
                del x[k]
    elif isinstance(x, list):
        items = (s or {}).get("items")
        for i, v in enumerate(x):
            _prune(v, items if isinstance(items, Mapping) else None, f"{path}[{i}]", out, False)


def _keep_unknown(x: Any, s: Mapping[str, Any], path: str, out: list[str]) -> None:
    """``x-kubernetes-preserve-unknown-fields``: declared fields are pruned by their
    schemas, the rest kept as they are."""
    if isinstance(x, dict):
        props = s.get("properties") or {}
        extra = s.get("additionalProperties")
        embedded = bool(s.get("x-kubernetes-embedded-resource"))
        for k, v in x.items():
            if embedded and k in ("apiVersion", "kind", "metadata"):
                continue
            if k in props:
                _prune(v, props[k], _join(path, k), out, False)
            elif isinstance(extra, Mapping):
                _prune(v, extra, _join(path, k), out, False)
    elif isinstance(x, list):
        items = s.get("items")
        if isinstance(items, Mapping):
            for i, v in enumerate(x):
                _keep_unknown(v, items, f"{path}[{i}]", out)


def schema_of(crd: Mapping[str, Any], version: str) -> Mapping[str, Any] | None:
    """The ``openAPIV3Schema`` of one version of a CRD (None: it has none)."""
    for v in (crd.get("spec") or {}).get("versions") or ():
        if isinstance(v, Mapping) and v.get("name") == version:
            schema = (v.get("schema") or {}).get("openAPIV3Schema")
            return schema if isinstance(schema, Mapping) else None
    return None


def crd_defaults(crd: Json) -> Json:
    """A CRD with the v1 defaults the API server fills in (what a GET shows)."""
    out = copy.deepcopy(crd)
    spec = out.setdefault("spec", {})
    names = spec.setdefault("names", {})
    if isinstance(names, dict) and isinstance(names.get("kind"), str):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})
    return out


def _invalid(name: str, errors: list[tuple[str, str]]) -> ApiStatusError:
    message = "; ".join(f"{f}: {m}" for f, m in errors)
    if len(errors) > 1:
        message = f"[{message.replace('; ', ', ')}]"
    return ApiStatusError(
        422,
        "Invalid",
        f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid: {message}',
        {
            "name": name,
            "group": CRD_GROUP,
            "kind": "CustomResourceDefinition",
            "causes": [
                {"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in errors
            ],
        },
    )


def validate_crd(crd: Json) -> None:
    """The checks a user meets first (422 Invalid, the API server's wording): the name is
    ``PLURAL.GROUP``, names and scope are given, one version is the storage version."""
    name = str((crd.get("metadata") or {}).get("name", ""))
    spec: Json = crd["spec"] if isinstance(crd.get("spec"), dict) else {}
    names: Json = spec["names"] if isinstance(spec.get("names"), dict) else {}
    errors: list[tuple[str, str]] = []
    group, plural = spec.get("group"), names.get("plural")
    if not group:
        errors.append(("spec.group", "Required value"))
    if not plural:
        errors.append(("spec.names.plural", "Required value"))
    if not names.get("kind"):
        errors.append(("spec.names.kind", "Required value"))
    if group and plural and name != f"{plural}.{group}":
        errors.append(
            ("metadata.name", f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group')
        )
    if spec.get("scope") not in ("Cluster", "Namespaced"):
        errors.append(
            (
                "spec.scope",
                f'Unsupported value: "{spec.get("scope") or ""}": supported values: '
                '"Cluster", "Namespaced"',
            )
        )
    versions = [v for v in spec.get("versions") or () if isinstance(v, dict)]
    if not versions:
        errors.append(("spec.versions", "Invalid value: null: must have exactly one version"))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        errors.append(
            (
                "spec.versions",
                "Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must have "
                "exactly one version marked as storage version",
            )
        )
    if errors:
        raise _invalid(name, errors)


def crd_status(crd: Json, old: Json | None = None) -> Json:
    """The status the naming and establishing controllers give a CRD at once: its names
    accepted, NamesAccepted and Established true, the storage version in storedVersions
    (kept from ``old`` on an update, as versions once stored stay listed)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    storage = next((v["name"] for v in spec.get("versions") or () if v.get("storage")), None)
    stored = list(((old or {}).get("status") or {}).get("storedVersions") or [])
    if storage and storage not in stored:
        stored.append(storage)
    previous = {c.get("type"): c for c in ((old or {}).get("status") or {}).get("conditions") or ()}
    now = now_iso()

    def condition(kind: str, reason: str, message: str) -> Json:
        since = previous.get(kind, {}).get("lastTransitionTime", now)
        return {
            "type": kind,
            "status": "True",
            "lastTransitionTime": since,
            "reason": reason,
            "message": message,
        }

    return {
        "acceptedNames": copy.deepcopy(names),
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition(
                "Established", "InitialNamesAccepted", "the initial names have been accepted"
            ),
        ],
        "storedVersions": stored,
    }
