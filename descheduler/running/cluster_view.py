"""What the planner reads of a live cluster, kept current by informers.

:class:`ClusterView` keeps informers of what the planner reads: nodes and pods as the
engine's compact records (:class:`~gangplace.kube.ClusterCache`), and PodGroups of both
APIs and of the native gang API (its Workloads and PodGroups, in the preferred version
the server serves), Volcano Queues, PodDisruptionBudgets, PriorityClasses and the workloads
that own gangs as their JSON, trimmed, and Kueue's Workloads (their owners only). Each run reads
the CustomResourceDefinitions of the workload kinds with a suspend switch (a GET each),
trimmed to what says whether the switch is served. A run hands that JSON to
:func:`~descheduler.planning.state.state_from_objects`, the parser ``plan --snapshot`` uses on a
dump, so a live plan and an offline plan of the same objects are the same plan. A
PodGroup, Queue or workload API that is not installed is left out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from gangplace.engine.kinds import KINDS, Kinds
from gangplace.engine.native_groups import native_groups_from_json
from gangplace.engine.objects import pdb_from_json, podgroup_from_json, queue_from_json
from gangplace.engine.owners import crd_switch, workload_from_json
from gangplace.kube import TRANSIENT_ERRORS, ApiError, ClusterCache, Informer, KubeClient
from gangplace.kube.resources import (
    COSCHED_PODGROUPS,
    CRDS,
    DESCHEDULER_WORKLOADS,
    KUEUE_WORKLOADS,
    NATIVE_PODGROUPS,
    NATIVE_VERSIONS,
    NATIVE_WORKLOADS,
    NODES,
    PDBS,
    PODGROUP_APIS,
    PODS,
    PRIORITY_CLASSES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    Resource,
    added_kind_calls,
    descheduler_workloads,
)

from descheduler.config import DeschedulerConfig
from descheduler.planning.state import ClusterState, drf_queue, state_from_objects

__all__ = ["ClusterView"]

# The descheduler's cluster side logs under one name, whichever module writes.
log = logging.getLogger(__name__)

Json = dict[str, Any]

_OPTIONAL = (
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    COSCHED_PODGROUPS,
    KUEUE_WORKLOADS,
    *DESCHEDULER_WORKLOADS,
)
# The spec fields of a workload the planner reads (see gangplace.engine.owners).
_WORKLOAD_SPEC = frozenset(
    {
        "suspend",
        "runPolicy",
        "backoffLimit",
        "podFailurePolicy",
        "shutdownAfterJobFinishes",
        "clusterSelector",
    }
)
# The native gang API's resources read (CompositePodGroups are not).
_NATIVE_PLURALS = frozenset({NATIVE_WORKLOADS.plural, NATIVE_PODGROUPS.plural})
# How long the CRDs read for one state serve the next ones (seconds).
CRD_TTL = 60.0


def _switch_crds(kinds: Kinds) -> tuple[Resource, ...]:
    """The CRDs whose schema says whether a suspend takes effect (the registry says
    which: a batch/v1 Job's switch is built in)."""
    return tuple(
        r
        for r in descheduler_workloads(kinds)
        if kinds[(r.group, r.kind)].suspend_path
        and kinds[(r.group, r.kind)].suspend_takes_effect == "servedSchema"
    )


def _trimmed(
    resource: Resource,
    check: Callable[[Json], object],
    workloads: tuple[Resource, ...] = DESCHEDULER_WORKLOADS,
    spec_keys: frozenset[str] = _WORKLOAD_SPEC,
) -> Callable[[Json], Json]:
    """The object as a dump would list it (list items may omit kind and apiVersion),
    without managedFields; ``check`` raises ValueError for one the planner cannot read,
    which the informer then leaves out (and reports) rather than failing every run."""

    def convert(obj: Json) -> Json:
        out = dict(obj)
        out["kind"], out["apiVersion"] = resource.kind, resource.api_version
        spec = out.get("spec")
        if resource in workloads and isinstance(spec, dict):
            # a workload's pod templates can be large, and the planner reads none of them
            out["spec"] = {k: v for k, v in spec.items() if k in spec_keys}
        if resource == KUEUE_WORKLOADS:
            # only whose it is matters (its ownerReferences)
            out.pop("spec", None)
            out.pop("status", None)
        meta = dict(out.get("metadata") or {})
        meta.pop("managedFields", None)
        ann = meta.get("annotations")
        if isinstance(ann, dict) and "kubectl.kubernetes.io/last-applied-configuration" in ann:
            ann = dict(ann)
            del ann["kubectl.kubernetes.io/last-applied-configuration"]
            meta["annotations"] = ann
        out["metadata"] = meta
        check(out)
        return out

    return convert


class ClusterView:
    """Informers for the planner's input; :meth:`state` builds one run's state."""

    def __init__(
        self,
        client: KubeClient,
        config: DeschedulerConfig,
        *,
        ledger_namespace: str,
        page_size: int = 500,
        watch_timeout: int = 300,
    ) -> None:
        self.client = client
        self.config = config
        # The registry extended by the config's ``workloads:``: their informers, their
        # CRDs' switches, and the calls (and RBAC, from the same config) to read them.
        self.kinds = config.kinds
        self.workload_apis = descheduler_workloads(self.kinds)
        self._switch_crds = _switch_crds(self.kinds)
        # an added kind's switch may sit under a spec field of its own
        self._spec_keys = _WORKLOAD_SPEC | {
            k.suspend_path[1] for k in self.kinds.values() if len(k.suspend_path) > 1
        }
        client.declare(added_kind_calls(self.kinds))
        self.ledger_namespace = ledger_namespace
        self.cache = ClusterCache(
            client, config.engine, page_size=page_size, watch_timeout=watch_timeout
        )
        self._kw: dict[str, Any] = {"page_size": page_size, "watch_timeout": watch_timeout}
        self.objects: dict[Resource, Informer[Json]] = {}
        self.missing: list[str] = []  # optional APIs not installed
        # switch_crds' last answer and when (loop time): CRDs change with an upgrade, not
        # between the polls of one run
        self._crds: tuple[float, list[Json]] | None = None

    def _checker(self, resource: Resource) -> Callable[[Json], object]:
        cfg = self.config.engine
        if resource in (VOLCANO_PODGROUPS, COSCHED_PODGROUPS):
            return podgroup_from_json
        if resource == VOLCANO_QUEUES:
            return lambda o: drf_queue(queue_from_json(o), cfg)
        if resource == PDBS:
            return pdb_from_json
        if resource in self.workload_apis:
            kinds = self.kinds
            return lambda o: workload_from_json(o, kinds)
        if resource.group == NATIVE_WORKLOADS.group and resource.plural in _NATIVE_PLURALS:
            return native_groups_from_json
        return lambda o: o

    async def _installed(self, resource: Resource) -> bool:
        """Whether an optional API (a CRD) is served: a one-item list, 404 when not. Any
        other failure counts as served: its informer retries, and says why if it never
        syncs."""
        try:
            await self.client.list(resource, limit=1)
        except ApiError as e:
            if e.status == 404:
                return False
            log.warning("probing %s: %s", resource, e)
        except TRANSIENT_ERRORS as e:
            log.warning("probing %s: %s: %s", resource, type(e).__name__, e)
        return True

    async def _served_version(self, resource: Resource) -> Resource | None:
        """``resource`` in the preferred version of the native gang API the server serves
        (``NATIVE_VERSIONS``: v1beta1, v1alpha3, v1alpha2, v1alpha1; None before 1.35, or
        with the API switched off)."""
        for version in NATIVE_VERSIONS:
            r = dataclasses.replace(resource, version=version)
            if await self._installed(r):
                return r
        return None

    async def start(self) -> None:
        resources = [PDBS, PRIORITY_CLASSES]
        for r in (*_OPTIONAL, *(w for w in self.workload_apis if w not in _OPTIONAL)):
            if await self._installed(r):
                resources.append(r)
            else:
                self.missing.append(str(r))
                log.info("API not installed; left out", extra={"fields": {"resource": str(r)}})
        for base in (NATIVE_WORKLOADS, NATIVE_PODGROUPS):
            served = await self._served_version(base)
            if served is not None:
                resources.append(served)
            else:
                self.missing.append(str(base))
                log.info(
                    "native gang API not served; left out",
                    extra={"fields": {"resource": str(base)}},
                )
        for r in resources:
            self.objects[r] = Informer(
                self.client,
                r,
                _trimmed(r, self._checker(r), self.workload_apis, self._spec_keys),
                name=str(r),
                **self._kw,
            )
        await self.cache.start()
        for inf in self.objects.values():
            inf.start()

    async def stop(self) -> None:
        await self.cache.stop()
        await asyncio.gather(*(inf.stop() for inf in self.objects.values()))

    @property
    def synced(self) -> bool:
        return self.cache.synced and all(i.synced.is_set() for i in self.objects.values())

    async def wait_synced(self, timeout: float | None = None) -> None:
        await self.cache.wait_synced(timeout)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(i.synced.wait() for i in self.objects.values()))
        except TimeoutError:
            late = [str(r) for r, i in self.objects.items() if not i.synced.is_set()]
            raise TimeoutError(f"informers not synced after {timeout}s: {late}") from None

    def podgroup(self, group: str, key: str) -> Json | None:
        inf = self.objects.get(PODGROUP_APIS[group]) if group in PODGROUP_APIS else None
        return inf.get(key) if inf is not None else None

    def any_podgroup(self, key: str) -> tuple[Resource, Json] | None:
        """The PodGroup ``ns/name`` of either API, as the informer has it."""
        for r in PODGROUP_APIS.values():
            inf = self.objects.get(r)
            obj = inf.get(key) if inf is not None else None
            if obj is not None:
                return r, obj
        return None

    def invalid(self) -> dict[str, str]:
        """Objects left out because they cannot be read (nodes and pods among them), by
        ``resource key``."""
        found: list[tuple[Resource, dict[str, str]]] = [
            (NODES, self.cache.nodes.invalid),
            (PODS, self.cache.pods.invalid),
        ]
        found += [(r, inf.invalid) for r, inf in self.objects.items()]
        return {f"{r} {k}": why for r, invalid in found for k, why in invalid.items()}

    async def switch_crds(self) -> list[Json]:
        """The CRDs of the installed workload kinds with a suspend switch, each trimmed
        to its names and whether its storage version declares the switch. One that
        cannot be read is left out: the planner then says the switch could not be
        checked, and does not suspend that kind. Read again after ``CRD_TTL`` seconds."""
        now = asyncio.get_running_loop().time()
        if self._crds is not None and now - self._crds[0] < CRD_TTL:
            return self._crds[1]
        out: list[Json] = []
        for r in self._switch_crds:
            if r in self.objects or not self.objects:
                try:
                    crd = await self.client.get(CRDS, f"{r.plural}.{r.group}")
                except ApiError as e:
                    if e.status != 404:
                        log.warning("reading the CRD of %s: %s", r, e)
                    continue
                except TRANSIENT_ERRORS as e:
                    log.warning("reading the CRD of %s: %s: %s", r, type(e).__name__, e)
                    continue
                hit = crd_switch(crd, self.kinds)
                declared = hit is not None and hit[1]
                out.append(_switch_only(crd, r.kind, declared, self.kinds))
        self._crds = (now, out)
        return out

    async def state(self, now: datetime, ledger: Json | None = None) -> ClusterState:
        snap = await self.cache.snapshot_async()
        objects: list[Json] = [o for inf in self.objects.values() for o in inf.values()]
        objects.extend(await self.switch_crds())
        if ledger is not None:
            objects.append(ledger)
        return state_from_objects(snap, now, objects, self.kinds)


def _switch_only(crd: Json, kind: str, declared: bool, kinds: Kinds = KINDS) -> Json:
    """A CRD cut down to what :func:`~gangplace.engine.owners.crd_switch` reads: the
    schema of its storage version keeps the switch only if it was declared."""
    path = kinds[(str((crd.get("spec") or {}).get("group") or ""), kind)].suspend_path
    node: Json = {
        "type": "object",
        "properties": {path[-1]: {"type": "boolean"}} if declared else {},
    }
    for part in reversed(path[:-1]):
        node = {"type": "object", "properties": {part: node}}
    spec = crd.get("spec") or {}
    stored: Json = next((v for v in spec.get("versions") or () if v.get("storage")), {})
    return {
        "apiVersion": CRDS.api_version,
        "kind": CRDS.kind,
        "metadata": {"name": (crd.get("metadata") or {}).get("name", "")},
        "spec": {
            "group": spec.get("group"),
            "names": {"kind": kind},
            "versions": [
                {
                    "name": stored.get("name", ""),
                    "served": stored.get("served", True),
                    "storage": True,
                    "schema": {"openAPIV3Schema": node},
                }
            ],
        },
    }
