"""kube-scheduler with the native gang rule (KEP-4671), on the release the API server
plays: pods that name a gang group wait until it can be placed whole, then bind
together; every other pod of its schedulerName is placed one by one.

The rule, from the GangScheduling plugin (kubernetes ``pkg/scheduler/framework/plugins/
gangscheduling/gangscheduling.go`` at v1.35; the docs pages "gang-scheduling" and, for
1.36, "podgroup-scheduling"):

- PreEnqueue: a pod whose group reference names a Workload (1.35) or PodGroup (1.36+)
  that does not exist, or whose group has fewer than ``minCount`` pods yet, does not
  enter the scheduling queue. It stays Pending with no condition and no event: the
  scheduler waits for the group (nothing is denied at admission for it).
- Permit: pods of the group are assumed on nodes and wait (at most 5 minutes) until
  ``minCount`` of them are; then all bind. Here one pass places the ``minCount`` less
  those bound already at once (``place_gang``, all or none), which is what the Permit
  wait amounts to on one snapshot (1.36 places a group atomically on one snapshot).
  Pods beyond ``minCount`` are placed one by one once the group is satisfied.
- a group that does not fit: each pod waiting gets ``PodScheduled=False`` reason
  Unschedulable with kube-scheduler's message, and the PodGroup (1.36+) its condition
  (``PodGroupScheduled`` in v1alpha2, ``PodGroupInitiallyScheduled`` in v1alpha3 and
  v1beta1)
  False/Unschedulable; once placed, True (reason Scheduled).
- ``basic`` groups and pods without a reference: one by one.
- 1.37 CompositePodGroup (v1alpha3, where served) with ``gang{minGroupCount}``: its
  child PodGroups wait until
  that many of them have their own ``minCount`` pods, then those groups are placed
  together, all or none (one level of nesting is modelled).
- all pods of a group share one schedulerName (1.36 docs): a group whose pods name
  different schedulers is not scheduled, and its PodGroup says so.

Nominated pods (``status.nominatedNodeName``) of the scheduler's names are counted as
the kube-scheduler counts them, against pods of their priority or lower, and a pod that
fails loses its nomination (:mod:`tests.controllers.nominated`); a group is placed with
the nominated pods of other groups and pods counted, its own not.

Differences (deterministic on purpose): no Permit timeout (nothing is ever assumed
across passes), no preemption; the ``minCount`` pods required are the first pending ones
by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from gangplace.engine import (
    Gang,
    GangOptions,
    Snapshot,
    TaskRole,
    explain,
    place_gang,
    shape_from_pod,
)

from tests.controllers.common import condition
from tests.controllers.events import EventRecorder, iso
from tests.controllers.nominated import (
    clear_nomination,
    nominated,
    nomination,
    place_with_nominated,
    priority,
)
from tests.controllers.pod_scheduler import kube_unschedulable_message
from tests.controllers.rest import Json, Rest, RestError
from tests.controllers.runner import wall_clock
from tests.controllers.snapshot import TERMINAL, snapshot_of
from tests.kubeapi.native_gangs import composite_version, native_version, pod_group_field
from tests.kubeapi.resources import NATIVE_GROUP
from tests.kubeapi.versions import Versions

__all__ = ["NativeGangScheduler"]

Key = tuple[str, ...]


@dataclass(slots=True)
class _Group:
    key: Key
    namespace: str
    min_count: int | None  # None: basic
    obj: Json | None  # the PodGroup (1.36+)
    parent: str | None = None  # the CompositePodGroup's name (1.37)
    pods: list[Json] = field(default_factory=list)

    @property
    def live(self) -> list[Json]:
        return [
            p
            for p in self.pods
            if (p.get("status") or {}).get("phase") not in TERMINAL
            and not p["metadata"].get("deletionTimestamp")
        ]

    @property
    def bound(self) -> list[Json]:
        return [p for p in self.live if (p.get("spec") or {}).get("nodeName")]

    @property
    def pending(self) -> list[Json]:
        return sorted(
            (p for p in self.live if not (p.get("spec") or {}).get("nodeName")),
            key=lambda p: str(p["metadata"]["name"]),
        )

    @property
    def need(self) -> int:
        return max(0, (self.min_count or 0) - len(self.bound))

    @property
    def complete(self) -> bool:
        """PreEnqueue: the group has its ``minCount`` pods."""
        return len(self.live) >= (self.min_count or 0)


def _order(p: Json) -> tuple[int, str, str]:
    m = p["metadata"]
    return (
        -int((p.get("spec") or {}).get("priority") or 0),
        str(m.get("creationTimestamp", "")),
        str(m["name"]),
    )


class NativeGangScheduler:
    """See the module docstring. ``versions``: the stack the API server plays (which
    dialect the groups are in)."""

    name = "default-scheduler"

    def __init__(
        self,
        rest: Rest,
        versions: Versions,
        *,
        scheduler_names: tuple[str, ...] = ("default-scheduler",),
        clock: Callable[[], datetime] = wall_clock,
    ) -> None:
        self.rest = rest
        self.versions = versions
        self.version = native_version(versions)
        self.field = pod_group_field(versions.kube) if self.version else None
        self.scheduler_names = scheduler_names
        self.clock = clock
        self.events = EventRecorder(rest, "default-scheduler", clock, legacy=False)
        self._nominees: list[Json] = []

    async def close(self) -> None:
        await self.rest.close()

    @property
    def _api(self) -> str:
        return f"{NATIVE_GROUP}/{self.version}"

    @property
    def _scheduled_condition(self) -> str:
        return "PodGroupScheduled" if self.version == "v1alpha2" else "PodGroupInitiallyScheduled"

    # --- the groups ---------------------------------------------------------------------

    async def _groups(
        self, pods: list[Json]
    ) -> tuple[dict[Key, _Group], list[Json], dict[Key, Json]]:
        """The gang groups with their pods, the pods scheduled one by one, and the
        CompositePodGroups by (namespace, name)."""
        groups: dict[Key, _Group] = {}
        composites: dict[Key, Json] = {}
        if self.version == "v1alpha1":
            for w in await self.rest.list(self._api, "workloads"):
                ns = w["metadata"]["namespace"]
                for g in (w.get("spec") or {}).get("podGroups") or ():
                    gang = ((g.get("policy") or {}).get("gang") or {}).get("minCount")
                    wkey: Key = (ns, w["metadata"]["name"], str(g.get("name")))
                    groups[wkey] = _Group(wkey, ns, gang, None)
        elif self.version is not None:
            for pg in await self.rest.list(self._api, "podgroups"):
                ns = pg["metadata"]["namespace"]
                spec = pg.get("spec") or {}
                gang = ((spec.get("schedulingPolicy") or {}).get("gang") or {}).get("minCount")
                pkey: Key = (ns, pg["metadata"]["name"])
                groups[pkey] = _Group(pkey, ns, gang, pg, spec.get("parentCompositePodGroupName"))
            composite = composite_version(self.versions)
            if composite is not None:
                for c in await self.rest.list(f"{NATIVE_GROUP}/{composite}", "compositepodgroups"):
                    composites[(c["metadata"]["namespace"], c["metadata"]["name"])] = c
        alone: list[Json] = []
        for p in pods:
            spec = p.get("spec") or {}
            ref = spec.get(self.field) if self.field else None
            ns = p["metadata"]["namespace"]
            if not isinstance(ref, dict):
                if spec.get("schedulerName", "default-scheduler") in self.scheduler_names:
                    alone.append(p)
                continue
            key: Key
            if self.field == "workloadRef":
                key = (ns, str(ref.get("name")), str(ref.get("podGroup")))
                replica = ref.get("podGroupReplicaKey")
                base = groups.get(key)
                if replica and base is not None:
                    key = (*key, str(replica))
                    groups.setdefault(key, _Group(key, ns, base.min_count, None))
            else:
                key = (ns, str(ref.get("podGroupName")))
            group = groups.get(key)
            if group is None:
                continue  # PreEnqueue: its Workload or PodGroup is not there yet
            group.pods.append(p)
        return groups, alone, composites

    # --- one pass -----------------------------------------------------------------------

    async def step(self) -> bool:
        nodes = await self.rest.list("v1", "nodes")
        pods = await self.rest.list("v1", "pods")
        snap = snapshot_of(nodes, pods)
        self._nominees = nominated(pods, self.scheduler_names)
        groups, alone, composites = await self._groups(pods)
        changed = False
        done: set[Key] = set()
        for key, g in sorted(
            groups.items(), key=lambda kv: min((_order(p) for p in kv[1].pods), default=(0, "", ""))
        ):
            if key in done or not g.pods:
                continue
            names = {
                (p.get("spec") or {}).get("schedulerName", "default-scheduler") for p in g.pods
            }
            if len(names) > 1:
                changed |= await self._group_condition(
                    g, False, "Unschedulable", "pods of one group must share one schedulerName"
                )
                continue
            if names.pop() not in self.scheduler_names:
                continue
            if g.min_count is None:
                alone.extend(g.pending)
                continue
            members = [g]
            parent = composites.get((g.namespace, g.parent)) if g.parent else None
            if parent is not None:
                gang = ((parent.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
                if gang is not None:
                    members = [
                        s
                        for s in groups.values()
                        if s.namespace == g.namespace and s.parent == g.parent
                    ]
                    done.update(s.key for s in members)
                    ready = [s for s in members if s.complete and s.pods]
                    if len(ready) < int(gang.get("minGroupCount", 1)):
                        continue  # PreEnqueue: too few of its groups are complete
                    members = ready
            elif not g.complete:
                continue  # PreEnqueue: fewer than minCount pods
            changed |= await self._place(members, snap, nodes)
        for p in sorted(alone, key=_order):
            if not (p.get("spec") or {}).get("nodeName") and not p["metadata"].get(
                "deletionTimestamp"
            ):
                changed |= await self._place_one(p, snap)
        return changed

    async def _place(self, members: list[_Group], snap: Snapshot, nodes: list[Json]) -> bool:
        required = [p for g in members for p in g.pending[: g.need]]
        extra = [p for g in members for p in g.pending[g.need :]]
        changed = False
        if required:
            by_shape: dict[str, list[Json]] = {}
            for p in required:
                by_shape.setdefault(repr(shape_from_pod(p)), []).append(p)
            roles = tuple(
                TaskRole(f"r{i}", shape_from_pod(ps[0]), len(ps))
                for i, ps in enumerate(by_shape.values())
            )
            ns = members[0].namespace
            gang = Gang("/".join(members[0].key[1:]), roles, len(required), namespace=ns)
            mine = {id(p) for g in members for p in g.pods}
            floor = min(priority(p) for p in required)
            with snap.what_if():
                for q in self._nominees:
                    row = snap.node_index.get(nomination(q), -1)
                    if id(q) not in mine and priority(q) >= floor and row >= 0:
                        snap.place_bound(shape_from_pod(q), row)
                placement = place_gang(
                    snap, gang, options=GangOptions(best_effort=False, dry_run=True, explain=False)
                )
            if not placement.ok:
                message = self._why(snap, required)
                for g in members:
                    changed |= await self._group_condition(g, False, "Unschedulable", message)
                for p in required + extra:
                    changed |= await self._unschedulable(p, message)
                    changed |= await clear_nomination(self.rest, p)
                return changed
            pods_of = list(by_shape.values())
            for a in placement.assignments:
                pod = pods_of[int(a.role[1:])][a.index]
                snap.place(shape_from_pod(pod), a.node, a.gpus)
                changed |= await self._bind(pod, a.node_name)
        for g in members:
            changed |= await self._group_condition(g, True, "Scheduled", "")
        for p in extra:
            changed |= await self._place_one(p, snap)
        return changed

    def _why(self, snap: Snapshot, pods: list[Json]) -> str:
        first = pods[0]
        text = explain(snap, shape_from_pod(first), first["metadata"]["name"])
        return kube_unschedulable_message(text, snap.n_nodes)

    async def _place_one(self, p: Json, snap: Snapshot) -> bool:
        spot = place_with_nominated(snap, p, self._nominees)
        if spot is None:
            cleared = await clear_nomination(self.rest, p)
            return await self._unschedulable(p, self._why(snap, [p])) or cleared
        snap.place(shape_from_pod(p), spot[0], spot[1])
        return await self._bind(p, snap.node_names[spot[0]])

    # --- writes -------------------------------------------------------------------------

    async def _bind(self, p: Json, node: str) -> bool:
        m = p["metadata"]
        try:
            await self.rest.bind(m["namespace"], m["name"], node)
        except RestError as e:
            if e.status in (404, 409):
                return False
            raise
        await self.events.record(
            p,
            "Normal",
            "Scheduled",
            f"Successfully assigned {m['namespace']}/{m['name']} to {node}",
            "Binding",
        )
        return True

    async def _unschedulable(self, p: Json, message: str) -> bool:
        old = condition(p, "PodScheduled")
        if old and old.get("reason") == "Unschedulable" and old.get("message") == message:
            return False
        conds = [
            c
            for c in (p.get("status") or {}).get("conditions") or ()
            if c.get("type") != "PodScheduled"
        ]
        conds.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": iso(self.clock()),
                "reason": "Unschedulable",
                "message": message,
            }
        )
        m = p["metadata"]
        try:
            await self.rest.patch(
                "v1",
                "pods",
                m["namespace"],
                m["name"],
                {"status": {"conditions": conds}},
                subresource="status",
            )
        except RestError as e:
            if e.status == 404:
                return False
            raise
        await self.events.record(p, "Warning", "FailedScheduling", message, "Scheduling")
        return True

    async def _group_condition(self, g: _Group, ok: bool, reason: str, message: str) -> bool:
        """The PodGroup's scheduled condition (metav1.Condition); 1.35 has no PodGroup.
        PodGroupInitiallyScheduled, once True, stays True."""
        if g.obj is None:
            return False
        type_ = self._scheduled_condition
        old = condition(g.obj, type_)
        status = "True" if ok else "False"
        if old and (
            (old.get("status"), old.get("reason"), old.get("message", ""))
            == (status, reason, message)
            or (type_ == "PodGroupInitiallyScheduled" and old.get("status") == "True")
        ):
            return False
        new = {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": iso(self.clock()),
            "observedGeneration": g.obj["metadata"].get("generation", 1),
        }
        conds = [
            c for c in (g.obj.get("status") or {}).get("conditions") or () if c.get("type") != type_
        ]
        m = g.obj["metadata"]
        try:
            g.obj = await self.rest.patch(
                self._api,
                "podgroups",
                m["namespace"],
                m["name"],
                {"status": {"conditions": [*conds, new]}},
                subresource="status",
            )
        except RestError as e:
            if e.status == 404:
                return False
            raise
        return True
