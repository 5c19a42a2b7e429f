"""The planner's input: the engine's snapshot plus the objects that decide who may be
moved and who is waiting, and the time ("now") the plan is made for. Built from a
``kubectl get nodes,pods,pdb,podgroups,queues,priorityclasses,jobs -A -o json`` List."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gangplace.engine import EngineConfig, Queue, Snapshot, SnapshotError
from gangplace.engine.kinds import KINDS, Kinds
from gangplace.engine.native_groups import NativeGroupRecord, is_native, native_groups_from_json
from gangplace.engine.objects import (
    PdbRecord,
    PodGroupRecord,
    RecordError,
    pdb_from_json,
    podgroup_from_json,
    priority_class_from_json,
    queue_from_json,
)
from gangplace.engine.owners import (
    WorkloadRecord,
    crd_switch,
    kueue_owned_uids,
    read_kind,
    with_cluster_facts,
    workload_from_json,
)

from descheduler.planning.state.ledger import MOVE_LEDGER, MoveLedger, ledger_from_json
from descheduler.planning.state.shares import drf_queue

__all__ = ["ClusterState", "StateError", "state_from_list", "state_from_objects"]

# An object in the List that cannot be read; the message names it. The engine's record
# parsers raise it, and so do the state builder and the ledger's parser.
StateError = RecordError


@dataclass(slots=True)
class ClusterState:
    """Plain data; the planner reads it and never changes it (it works on a fork of
    the snapshot and reverts). ``now`` is an aware UTC datetime given by the caller."""

    snapshot: Snapshot
    now: datetime
    podgroups: dict[str, PodGroupRecord] = field(default_factory=dict)
    # The groups of the native gang API (scheduling.k8s.io), by ``ns/name``.
    native_groups: dict[str, NativeGroupRecord] = field(default_factory=dict)
    pdbs: list[PdbRecord] = field(default_factory=list)
    queues: dict[str, Queue] = field(default_factory=dict)
    priority_classes: dict[str, int] = field(default_factory=dict)
    ledger: MoveLedger = field(default_factory=MoveLedger)
    # The pods' owners with a say in how a gang may move, by ``ns/Kind/name``.
    workloads: dict[str, WorkloadRecord] = field(default_factory=dict)
    # By workload kind: whether the served CRD declares its suspend switch; None when no
    # CustomResourceDefinition was among the objects (a dump without them).
    crd_switches: dict[str, bool] | None = None
    # uids of the jobs a Kueue Workload stands for.
    kueue_owned: frozenset[str] = frozenset()
    # The registry of kinds the state was read with: the built-in one, extended by the
    # config's ``workloads:`` (how an owner moves, where its switch is).
    kinds: Kinds = field(default_factory=lambda: KINDS)


def _resolve_priorities(snap: Snapshot, classes: Mapping[str, int]) -> None:
    # The API server sets spec.priority at admission; dumps written by hand may not.
    for p in snap.pods:
        if p.priority == 0 and p.priority_class in classes:
            p.priority = classes[p.priority_class]


def state_from_objects(
    snapshot: Snapshot,
    now: datetime,
    objects: Iterable[Mapping[str, Any]] = (),
    kinds: Kinds = KINDS,
) -> ClusterState:
    """A state from a snapshot and the other objects (PodGroups, the native gang API's
    Workloads and PodGroups, Queues, PDBs, PriorityClasses, the workloads of the kinds
    the registry has it read (:func:`~gangplace.engine.owners.read_kind`), the
    CustomResourceDefinitions of those kinds and Kueue's Workloads (which decide whether
    a suspend takes effect), and the descheduler's move ledger ConfigMap; anything else
    is ignored). ``kinds``: the registry to read workloads with (the config's)."""
    if now.tzinfo is None:
        raise StateError("now must be an aware datetime (UTC)")
    cfg = snapshot.config
    state = ClusterState(snapshot=snapshot, now=now, kinds=kinds)
    for obj in objects:
        kind = obj.get("kind")
        if is_native(obj):
            for ng in native_groups_from_json(obj):
                state.native_groups[ng.key] = ng
        elif kind == "PodGroup":
            pg = podgroup_from_json(obj)
            state.podgroups[pg.key] = pg
        elif kind == "Queue":
            q = drf_queue(queue_from_json(obj), cfg)
            state.queues[q.name] = q
        elif kind == "PodDisruptionBudget":
            state.pdbs.append(pdb_from_json(obj))
        elif kind == "PriorityClass":
            pc = priority_class_from_json(obj)
            state.priority_classes[pc.name] = pc.value
        elif read_kind(obj, kinds) is not None:
            w = workload_from_json(obj, kinds)
            state.workloads[w.key] = w
        elif kind == "ConfigMap" and (obj.get("metadata") or {}).get("name") == MOVE_LEDGER:
            state.ledger = ledger_from_json(obj)
        elif kind == "CustomResourceDefinition":
            if state.crd_switches is None:
                state.crd_switches = {}
            hit = crd_switch(obj, kinds)
            if hit is not None:
                state.crd_switches[hit[0]] = hit[1]
        elif kind == "Workload":
            state.kueue_owned |= kueue_owned_uids(obj)
    state.workloads = {
        k: with_cluster_facts(w, state.crd_switches, state.kueue_owned, kinds)
        for k, w in state.workloads.items()
    }
    _resolve_priorities(snapshot, state.priority_classes)
    return state


def state_from_list(
    doc: Mapping[str, Any],
    now: datetime,
    config: EngineConfig | None = None,
    kinds: Kinds = KINDS,
) -> ClusterState:
    """From a Kubernetes List: Nodes and Pods go to the engine's snapshot, the rest to
    the state (its workloads by ``kinds``). Raises StateError naming the object that
    cannot be read."""
    items = doc.get("items")
    if not isinstance(items, list):
        raise StateError("expected a Kubernetes List with an 'items' array")
    bad = next((i for i, x in enumerate(items) if not isinstance(x, dict)), None)
    if bad is not None:
        raise StateError(f"items[{bad}] is not an object")
    for i, x in enumerate(items):
        if "metadata" not in x or x["metadata"] is None:
            raise StateError(f"items[{i}] ({x.get('kind') or 'no kind'}) has no metadata")
        if not isinstance(x["metadata"], dict):
            raise StateError(
                f"items[{i}] ({x.get('kind') or 'no kind'}): metadata is not an object"
            )
    try:
        snap = Snapshot.from_list(doc, config)
    except SnapshotError as e:
        raise StateError(str(e)) from None
    others = [x for x in items if x.get("kind") not in ("Node", "Pod")]
    return state_from_objects(snap, now, others, kinds)
