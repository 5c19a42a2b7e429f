"""The Events the descheduler writes about a gang it moves or skips, and the object
each one is about: the gang's workload (a suspend move), else its PodGroup, else its
first pod, so that ``kubectl describe`` of what the user owns shows it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangplace.engine.kinds import KINDS, Kinds
from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.owners import WorkloadRecord
from gangplace.kube import KubeClient, event_body, post_event
from gangplace.kube.resources import PODGROUP_APIS, workload_resource

from descheduler.planning.state import ClusterState
from descheduler.running.runner_port import GangEvent

__all__ = ["involved_object", "post_gang_event", "workload_ref"]

Json = dict[str, Any]


def workload_ref(w: WorkloadRecord, kinds: Kinds = KINDS) -> Json:
    """An Event's involvedObject naming a workload (of a kind in ``kinds``)."""
    return {
        "apiVersion": workload_resource(w.group, w.kind, kinds).api_version,
        "kind": w.kind,
        "namespace": w.namespace,
        "name": w.name,
        "uid": w.uid,
    }


def involved_object(
    event: GangEvent, state: ClusterState | None, pods: Mapping[str, PodRecord]
) -> Json:
    """What ``event`` is about, with the uid ``state`` and ``pods`` know (empty if not);
    its name is empty when the event names no pod either."""
    w = state.workloads.get(event.workloads[0]) if state is not None and event.workloads else None
    if w is not None:
        return workload_ref(w, state.kinds if state is not None else KINDS)
    api = event.podgroup_api or ""
    if event.podgroup and api in PODGROUP_APIS:
        r = PODGROUP_APIS[api]
        pg = state.podgroups.get(f"{event.namespace}/{event.podgroup}") if state else None
        return {
            "apiVersion": r.api_version,
            "kind": r.kind,
            "namespace": event.namespace,
            "name": event.podgroup,
            "uid": pg.uid if pg is not None else "",
        }
    name = event.pods[0] if event.pods else ""
    rec = pods.get(f"{event.namespace}/{name}")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": event.namespace,
        "name": name,
        "uid": rec.uid if rec is not None else "",
    }


async def post_gang_event(
    client: KubeClient, involved: Json, type_: str, reason: str, message: str, component: str
) -> str:
    """Write one Event on ``involved``; why it was not written, or '' (an Event that
    cannot be written never fails the move it reports on)."""
    body = event_body(
        involved,
        reason=reason,
        message=message,
        type_=type_,
        action="Deschedule",
        component=component,
    )
    return await post_event(client, body)
