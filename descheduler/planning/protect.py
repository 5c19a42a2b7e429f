"""What the descheduler never evicts, and why.

Pod rules: DaemonSet pods (the controller puts them straight back), mirror/static pods
(the API cannot evict them), pods without a controller (nothing would recreate them),
system-critical priorities, excluded namespaces, pods that opt out
(``corral.dev/evictable: "false"``, ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``,
``descheduler.alpha.kubernetes.io/prefer-no-eviction``),
pods with local storage unless allowed, pods that are not running yet or younger than
the minimum age. Gang rules: one protected member protects its whole gang (a gang is
moved whole or not at all), and so do a recent move (cool-down) and a queue that is not
reclaimable. KAI-Scheduler's opt-out from its own consolidation,
``kai.scheduler/safe-to-consolidate: "false"``, is honoured whatever the backend, on a
pod (annotation or label), on its gang's PodGroup or native group, or on a workload
above it (:func:`workload_protection`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from gangplace.engine import PodRecord, Queue, Snapshot
from gangplace.engine.membership import ANNOTATION_EVICTABLE
from gangplace.engine.owners import WorkloadRecord, workload_key
from gangplace.engine.timeparse import TimeFormatError, format_duration, parse_time

from descheduler.config import EvictionRules
from descheduler.planning.gang_views import GangView

__all__ = [
    "ANNOTATION_MIRROR",
    "ANNOTATION_PREFER_NO_EVICTION",
    "ANNOTATION_SAFE_TO_EVICT",
    "KAI_SAFE_TO_CONSOLIDATE",
    "gang_protection",
    "node_protection",
    "pod_protection",
    "workload_protection",
]

ANNOTATION_MIRROR = "kubernetes.io/config.mirror"
ANNOTATION_PREFER_NO_EVICTION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
# The cluster autoscaler's opt-out, which admins already put on pods that must not go.
ANNOTATION_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# KAI-Scheduler's opt-out from consolidation, which admins of GPU clusters put on
# workloads that must not be moved (handout VERSIONS.md, "Others"). kai-scheduler's
# source up to main of 2026-08-07 reads no such key (its consolidation takes only
# preemptible jobs, kai.scheduler/preemptibility), so where KAI reads it is not known:
# corral honours it as an annotation or a label, on a pod, its gang and its workloads.
KAI_SAFE_TO_CONSOLIDATE = "kai.scheduler/safe-to-consolidate"


def _opted_out(keys: Mapping[str, str], key: str) -> bool:
    return keys.get(key, "").strip().lower() == "false"


def pod_protection(pod: PodRecord, rules: EvictionRules, now: datetime) -> str | None:
    """Why ``pod`` must not be evicted, or None when it may be."""
    if pod.owner_kind == "DaemonSet":
        return f"pod {pod.key} belongs to DaemonSet {pod.owner_name}"
    if ANNOTATION_MIRROR in pod.annotations or pod.owner_kind == "Node":
        return f"pod {pod.key} is a static (mirror) pod"
    if not pod.owner_kind:
        return f"pod {pod.key} has no controller to recreate it"
    if pod.priority_class in rules.protected_priority_classes:
        return f"pod {pod.key} has priority class {pod.priority_class}"
    if pod.priority >= rules.protected_priority:
        return f"pod {pod.key} has system-critical priority {pod.priority}"
    if pod.namespace in rules.excluded_namespaces:
        return f"namespace {pod.namespace} is excluded"
    if rules.included_namespaces and pod.namespace not in rules.included_namespaces:
        return f"namespace {pod.namespace} is not included"
    if pod.annotations.get(ANNOTATION_EVICTABLE, "").strip().lower() == "false":
        return f'pod {pod.key} is annotated {ANNOTATION_EVICTABLE}: "false"'
    if pod.annotations.get(ANNOTATION_SAFE_TO_EVICT, "").strip().lower() == "false":
        return f'pod {pod.key} is annotated {ANNOTATION_SAFE_TO_EVICT}: "false"'
    if ANNOTATION_PREFER_NO_EVICTION in pod.annotations:
        return f"pod {pod.key} is annotated {ANNOTATION_PREFER_NO_EVICTION}"
    if _opted_out(pod.annotations, KAI_SAFE_TO_CONSOLIDATE):
        return f'pod {pod.key} is annotated {KAI_SAFE_TO_CONSOLIDATE}: "false"'
    if _opted_out(pod.labels, KAI_SAFE_TO_CONSOLIDATE):
        return f'pod {pod.key} is labelled {KAI_SAFE_TO_CONSOLIDATE}: "false"'
    if pod.local_storage and not rules.evict_local_storage_pods:
        return f"pod {pod.key} has local storage (emptyDir or hostPath)"
    if pod.phase != "Running":
        return f"pod {pod.key} is {pod.phase}, not Running"
    if rules.min_pod_age > 0 and pod.created:
        try:
            age = (now - parse_time(pod.created)).total_seconds()
        except TimeFormatError:
            age = None
        if age is not None and age < rules.min_pod_age:
            return f"pod {pod.key} is younger than {format_duration(rules.min_pod_age)}"
    return None


def gang_protection(
    view: GangView,
    rules: EvictionRules,
    queues: Mapping[str, Queue],
    now: datetime,
) -> str | None:
    """Why no member of ``view`` may be moved, or None."""
    q = queues.get(view.queue)
    if q is not None and not q.reclaimable:
        return f"queue {view.queue} is not reclaimable"
    if view.annotations.get(ANNOTATION_EVICTABLE, "").strip().lower() == "false":
        return f'{view.describe()} is annotated {ANNOTATION_EVICTABLE}: "false"'
    if _opted_out(view.annotations, KAI_SAFE_TO_CONSOLIDATE):
        return f'{view.describe()} is annotated {KAI_SAFE_TO_CONSOLIDATE}: "false"'
    if view.last_moved is not None and rules.cooldown > 0:
        since = (now - view.last_moved).total_seconds()
        if since < rules.cooldown:
            return (
                f"{view.describe()} was moved {format_duration(max(since, 0))} ago "
                f"(cool-down {format_duration(rules.cooldown)})"
            )
    for p in view.pods:
        if p.node_name:
            why = pod_protection(p, rules, now)
            if why is not None:
                return why
    return None


def workload_protection(view: GangView, workloads: Mapping[str, WorkloadRecord]) -> str | None:
    """Why no member of ``view`` may be moved for a workload above its pods (their
    owners, up the chain of the workloads read): KAI-Scheduler's opt-out, or None."""
    seen: set[str] = set()
    for p in view.pods:
        group, kind, name = p.owner_group, p.owner_kind, p.owner_name
        while kind:
            key = workload_key(p.namespace, kind, name)
            w = workloads.get(key)
            if w is None or w.group != group or key in seen:
                break  # not read, or another group's kind of that name
            seen.add(key)
            if _opted_out(w.annotations, KAI_SAFE_TO_CONSOLIDATE):
                return f'{w.describe()} is annotated {KAI_SAFE_TO_CONSOLIDATE}: "false"'
            group, kind, name = w.owner_group, w.owner_kind, w.owner_name
    return None


def node_protection(view: GangView, snap: Snapshot) -> str | None:
    """Why ``view`` stays because of where it runs: a member on a node whose pods hold
    more than it has (:mod:`gangplace.engine.node_checks`), which is left out of moves;
    a gang moves whole, so the whole gang stays."""
    for p in view.placed:
        why = snap.problems.get(p.node)
        if why is not None:
            return (
                f"{view.describe()} runs on node {snap.node_names[p.node]}, left out of "
                f"moves: {why}"
            )
    return None
