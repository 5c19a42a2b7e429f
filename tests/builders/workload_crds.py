"""Minimal CustomResourceDefinitions of the workload kinds corral suspends, as the
apiextensions API returns them: the names and the one served version, with a schema
that declares the suspend switch or (``switch=False``, as training-operator before v1.7
ships ``runPolicy`` without ``suspend``) does not. The published CRDs are hundreds of
kilobytes; only the switch decides anything here."""

from __future__ import annotations

from typing import Any

from gangplace.engine.kinds import KINDS

__all__ = ["CRD_TYPE", "workload_crd"]

# (group, version, plural, kind, namespaced) of the apiextensions resource itself.
CRD_TYPE = ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition")


# What runPolicy holds beside ``suspend`` in the training operator's CRDs: an old CRD
# declares these and not the switch, so the API server prunes only the switch.
_RUN_POLICY = (
    "cleanPodPolicy",
    "ttlSecondsAfterFinished",
    "activeDeadlineSeconds",
    "backoffLimit",
    "schedulingPolicy",
    "managedBy",
)
_OPEN: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _schema(path: tuple[str, ...], switch: bool) -> dict[str, Any]:
    """An object schema that keeps every field (``x-kubernetes-preserve-unknown-fields``,
    so the in-memory server's structural pruning leaves the objects whole) but, without
    ``switch``, the switch itself: under ``runPolicy`` its parent is declared field by
    field, as the training operator's CRD before v1.7 declares it, so the switch is
    pruned; a switch in ``spec`` is only left undeclared."""
    if switch:
        parent: dict[str, Any] = {**_OPEN, "properties": {path[-1]: {"type": "boolean"}}}
    elif path[-2] == "runPolicy":
        parent = {"type": "object", "properties": {k: dict(_OPEN) for k in _RUN_POLICY}}
    else:
        # a switch in spec itself: spec keeps its fields, the switch is only undeclared
        parent = dict(_OPEN)
    node = parent
    for part in reversed(path[1:-1]):
        node = {**_OPEN, "properties": {part: node}}
    return {**_OPEN, "properties": {path[0]: node, "status": dict(_OPEN)}}


def workload_crd(kind: str, *, switch: bool = True) -> dict[str, Any]:
    """The CRD of the registered kind the descheduler reads by this name."""
    (record,) = (k for k in KINDS.values() if k.kind == kind and k.read and k.group != "batch")
    group, plural, version = record.group, record.plural, record.version
    path = record.suspend_path or ("spec", "suspend")
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": _schema(path, switch)},
                    "subresources": {"status": {}},
                }
            ],
        },
    }
