"""Minimal CustomResourceDefinitions of the workload kinds corral suspends, as the
apiextensions API returns them: the names and the one served version, with a schema
that declares the suspend switch or (``switch=False``, as training-operator before v1.7
ships ``runPolicy`` without ``suspend``) does not. The published CRDs are hundreds of
kilobytes; only the switch decides anything here."""

from __future__ import annotations

from typing import Any

from gangplace.engine.workloads import SUSPEND_PATHS, WORKLOAD_KINDS

__all__ = ["CRD_TYPE", "workload_crd"]

# (group, version, plural, kind, namespaced) of the apiextensions resource itself.
CRD_TYPE = ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition")

_VERSIONS = {"kubeflow.org": "v1", "jobset.x-k8s.io": "v1alpha2", "ray.io": "v1"}


def _schema(path: tuple[str, ...], switch: bool) -> dict[str, Any]:
    """An object schema declaring the parents of ``path``, and its last part (a boolean)
    only with ``switch``."""
    props: dict[str, Any] = {path[-1]: {"type": "boolean"}} if switch else {}
    node: dict[str, Any] = {"type": "object", "properties": props}
    for part in reversed(path[1:-1]):
        node = {"type": "object", "properties": {part: node}}
    return {"type": "object", "properties": {path[0]: node, "status": {"type": "object"}}}


def workload_crd(kind: str, *, switch: bool = True) -> dict[str, Any]:
    group = WORKLOAD_KINDS[kind]
    plural = kind.lower() + "s"
    version = _VERSIONS[group]
    path = SUSPEND_PATHS.get(kind, ("spec", "suspend"))
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
