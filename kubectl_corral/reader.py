"""Reading the cluster for ``kubectl corral``: lists only, each one a call attributed to
kubectl-corral in :mod:`gangplace.kube.rbac`, and the descheduler's view built from
them (the same planner state ``corral-descheduler`` builds)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gangplace.engine import EngineConfig, NodeRecord, PodRecord, PodShape, Snapshot
from gangplace.engine.dump_checks import dump_warnings
from gangplace.engine.node_pod_records import SnapshotError, node_from_json, pod_from_json
from gangplace.kube import REQUEST_ERRORS, ApiError, KubeClient, rbac
from gangplace.kube.resources import (
    COSCHED_PODGROUPS,
    DESCHEDULER_WORKLOADS,
    NAMESPACES,
    NATIVE_PODGROUPS,
    NATIVE_VERSIONS,
    NATIVE_WORKLOADS,
    NODES,
    NON_TERMINAL_PODS,
    PDBS,
    PODS,
    PRIORITY_CLASSES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    Resource,
)

from descheduler.api import ClusterState, StateError, state_from_objects

__all__ = ["PluginError", "Reader", "Reading", "state_of"]

Json = dict[str, Any]
PAGE = 500

# Read beside nodes and pods: what decides who waits (PodGroups) and, for the planner,
# who may move and how (Queues, PDBs, PriorityClasses, the pods' workloads).
GANG_OBJECTS = (VOLCANO_PODGROUPS, COSCHED_PODGROUPS)
PLANNER_OBJECTS = (VOLCANO_QUEUES, PDBS, PRIORITY_CLASSES, *DESCHEDULER_WORKLOADS)
# Custom resources a cluster may not serve.
_OPTIONAL = frozenset({VOLCANO_QUEUES, *DESCHEDULER_WORKLOADS}) - {
    r for r in DESCHEDULER_WORKLOADS if r.group == "batch"
}


class PluginError(RuntimeError):
    """Something the user must fix or know; the message says what."""


@dataclass(slots=True)
class Reading:
    nodes: list[Json] = field(default_factory=list)
    pods: list[Json] = field(default_factory=list)
    others: list[Json] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _describe(r: Resource) -> str:
    return str(r)


class Reader:
    """Lists through a :class:`KubeClient`, refusing any call not attributed to
    kubectl-corral (it is read-only by construction, not by care)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        optional: bool = False,
    ) -> list[Json] | None:
        """Every item, page by page, with ``kind`` and ``apiVersion`` set. None when
        ``optional`` and the API is not served (its CRD is not installed)."""
        if not rbac.allowed(rbac.KUBECTL, "list", resource):
            raise PluginError(f"kubectl-corral does not list {resource}: not in its attribution")
        items: list[Json] = []
        token: str | None = None
        while True:
            try:
                page = await self.client.list(
                    resource,
                    namespace=namespace,
                    field_selector=field_selector,
                    limit=PAGE,
                    continue_token=token,
                )
            except ApiError as e:
                if optional and e.status == 404:
                    return None
                raise _explain(e, resource, namespace) from None
            except REQUEST_ERRORS as e:
                raise PluginError(f"cannot reach the API server: {e}") from None
            for obj in page.get("items") or ():
                if isinstance(obj, dict):
                    obj.setdefault("kind", resource.kind)
                    obj.setdefault("apiVersion", resource.api_version)
                    items.append(obj)
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    async def one(self, resource: Resource, name: str, namespace: str | None = None) -> Json | None:
        """One object by name (a list with a ``metadata.name`` field selector), or None."""
        found = await self.list(
            resource, namespace=namespace, field_selector=f"metadata.name={name}"
        )
        return found[0] if found else None

    async def cluster(self, *, namespace: str | None = None, planner: bool = False) -> Reading:
        """Nodes, the pods that hold or want capacity (all namespaces: capacity is
        shared), the PodGroups of ``namespace`` (None: all), and with ``planner`` the
        Queues, PDBs and PriorityClasses the descheduler reads."""
        out = Reading()
        out.nodes = await self.list(NODES) or []
        out.pods = await self.list(PODS, field_selector=NON_TERMINAL_PODS) or []
        for r in GANG_OBJECTS:
            found = await self.list(r, namespace=namespace, optional=True)
            if found is None:
                out.notes.append(f"{r.api_version} PodGroups: not served by this cluster")
            else:
                out.others += found
        for base in (NATIVE_WORKLOADS, NATIVE_PODGROUPS):
            out.others += await self._native(base, namespace)
        if planner:
            for r in PLANNER_OBJECTS:
                found = await self.list(r, optional=r in _OPTIONAL)
                out.others += found or []
        return out

    async def _native(self, base: Resource, namespace: str | None) -> Sequence[Json]:
        """The native gang API's objects of ``base``'s kind in the preferred version served
        (``NATIVE_VERSIONS``: v1beta1, v1alpha3, v1alpha2, v1alpha1; none before 1.35, or
        with the API off: most clusters, so no note)."""
        for version in NATIVE_VERSIONS:
            r = dataclasses.replace(base, version=version)
            found = await self.list(r, namespace=namespace, optional=True)
            if found is not None:
                return found
        return []

    async def namespace_labels(self, name: str) -> tuple[dict[str, str] | None, str]:
        """A namespace's labels, or None and why they could not be read."""
        try:
            ns = await self.one(NAMESPACES, name)
        except PluginError as e:
            return None, str(e)
        if ns is None:
            return None, f"namespace {name} not found"
        return dict((ns.get("metadata") or {}).get("labels") or {}), ""


def _explain(e: ApiError, r: Resource, namespace: str | None) -> PluginError:
    where = f" in namespace {namespace}" if namespace else " (all namespaces)"
    if e.status in (401, 403):
        return PluginError(
            f"cannot list {_describe(r)}{where}: {e.status} {e.reason}: {e.message}. "
            "kubectl corral needs read access to nodes, pods and PodGroups; "
            "docs/kubectl-corral.md has a ClusterRole to bind"
        )
    return PluginError(f"cannot list {_describe(r)}{where}: {e}")


def state_of(reading: Reading, config: EngineConfig, now: datetime) -> ClusterState:
    """The descheduler's planner state. Objects the engine cannot read are left out,
    each with a note, so one odd pod does not hide the rest of the cluster."""
    shapes: dict[PodShape, PodShape] = {}
    nodes: list[NodeRecord] = []
    for n in reading.nodes:
        try:
            nodes.append(node_from_json(n, config))
        except SnapshotError as e:
            reading.notes.append(f"skipped: {e}")
    pods: list[PodRecord] = []
    for p in reading.pods:
        try:
            pods.append(pod_from_json(p, config, shapes))
        except SnapshotError as e:
            reading.notes.append(f"skipped: {e}")
    snap = Snapshot(nodes, pods, config)
    reading.notes.extend(dump_warnings(snap, live=True))
    good: list[Mapping[str, Any]] = []
    empty = Snapshot([], [], config)
    for obj in reading.others:
        try:
            state_from_objects(empty, now, [obj])
        except StateError as e:
            reading.notes.append(f"skipped: {e}")
            continue
        good.append(obj)
    return state_from_objects(snap, now, good)
