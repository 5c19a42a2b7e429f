"""Which gang a running or waiting pod belongs to, in any scheduler's dialect.

The webhook writes gang membership in the keys of the configured backend; the
descheduler and the admin tools read it back from pods whatever the backend. This is
the one table of those keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gangplace.engine.node_pod_records import PodRecord

__all__ = [
    "ANNOTATION_EVICTABLE",
    "ANNOTATION_GANG",
    "ANNOTATION_GANG_TIMEOUT",
    "ANNOTATION_MIN_AVAILABLE",
    "ANNOTATION_QUEUE",
    "ANNOTATION_SKIP",
    "COSCHED_POD_GROUP_LABEL",
    "DIALECTS",
    "KAI_MIN_MEMBER",
    "KAI_POD_GROUP",
    "KAI_QUEUE_LABEL",
    "KUEUE_POD_GROUP_LABEL",
    "KUEUE_QUEUE_LABEL",
    "KUEUE_TOTAL_COUNT",
    "LABEL_GANG_SCHEDULING",
    "NATIVE_GANG",
    "OWN_SCHEDULERS",
    "SCHEDULER_NAMES",
    "VOLCANO_GROUP_NAME",
    "VOLCANO_QUEUE_NAME",
    "VOLCANO_SLA_WAITING_TIME",
    "YUNIKORN_APP_ID",
    "YUNIKORN_APP_ID_LABEL",
    "YUNIKORN_POLICY",
    "YUNIKORN_QUEUE",
    "YUNIKORN_QUEUE_LABEL",
    "YUNIKORN_TASK_GROUPS",
    "YUNIKORN_TASK_GROUP_NAME",
    "GangMembers",
    "Membership",
    "group_pods",
    "membership",
    "read_membership",
    "yunikorn_app_id",
]

# corral's own keys (docs/annotations.md).
ANNOTATION_GANG = "corral.dev/gang"
ANNOTATION_MIN_AVAILABLE = "corral.dev/min-available"
ANNOTATION_QUEUE = "corral.dev/queue"
ANNOTATION_GANG_TIMEOUT = "corral.dev/gang-timeout"
ANNOTATION_SKIP = "corral.dev/skip"
ANNOTATION_EVICTABLE = "corral.dev/evictable"
LABEL_GANG_SCHEDULING = "corral.dev/gang-scheduling"

# Volcano.
VOLCANO_GROUP_NAME = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE_NAME = "scheduling.volcano.sh/queue-name"
VOLCANO_SLA_WAITING_TIME = "volcano.sh/sla-waiting-time"
# scheduler-plugins coscheduling.
COSCHED_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# YuniKorn.
YUNIKORN_APP_ID_LABEL = "applicationId"
YUNIKORN_APP_ID = "yunikorn.apache.org/app-id"
YUNIKORN_QUEUE_LABEL = "queue"
YUNIKORN_QUEUE = "yunikorn.apache.org/queue"
YUNIKORN_POLICY = "yunikorn.apache.org/schedulingPolicyParameters"
YUNIKORN_TASK_GROUP_NAME = "yunikorn.apache.org/task-group-name"
YUNIKORN_TASK_GROUPS = "yunikorn.apache.org/task-groups"
# Kueue pod groups.
KUEUE_POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# KAI-Scheduler: its pod grouper names a pod's PodGroup in an annotation and reads the
# queue and the gang's minimum from the top owner (pkg/podgrouper, v0.9).
KAI_POD_GROUP = "pod-group-name"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_MIN_MEMBER = "kai.scheduler/batch-min-member"
# The native gang API (scheduling.k8s.io Workload/PodGroup): corral's note of the gang
# on each pod it puts in one (the pod's own field names the group,
# webhook/admission/backends/kubernetes.py).
NATIVE_GANG = "corral.dev/native-gang"


@dataclass(frozen=True, slots=True)
class Membership:
    """What a pod says of its gang. ``min_available`` is None when only the gang
    object (a PodGroup) knows it."""

    gang: str
    dialect: str
    min_available: int | None = None
    queue: str | None = None
    timeout: str | None = None
    key: str = ""  # the label or annotation that names the gang


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _yunikorn_min(annotations: Mapping[str, str]) -> int | None:
    raw = annotations.get(YUNIKORN_TASK_GROUPS)
    if not raw:
        return None
    try:
        groups = json.loads(raw)
        return sum(int(g.get("minMember", 0)) for g in groups if isinstance(g, dict)) or None
    except (ValueError, TypeError, AttributeError):
        return None


# The dialects a pod's keys are read in, in the order :func:`membership` tries them.
DIALECTS = ("volcano", "coscheduling", "kueue", "yunikorn", "kai", "kubernetes", "corral")

# The scheduler that places each dialect's gangs, as a pod's schedulerName names it when
# nobody says otherwise (the webhook writes it; the descheduler reads it). Kueue's pods and
# native gangs keep the kube-scheduler (not listed); scheduler-plugins' coscheduling is a
# build of the kube-scheduler, with its queue and its nominator.
SCHEDULER_NAMES: dict[str, str] = {
    "volcano": "volcano",
    "coscheduling": "scheduler-plugins-scheduler",
    "yunikorn": "yunikorn",
    "kai": "kai-scheduler",
}
# The dialects whose scheduler is not a kube-scheduler build (its own cache and queue).
OWN_SCHEDULERS: frozenset[str] = frozenset({"volcano", "yunikorn", "kai"})


def yunikorn_app_id(
    labels: Mapping[str, str], annotations: Mapping[str, str]
) -> tuple[str, str] | None:
    """A pod's YuniKorn application and the key it is read from, in the order
    yunikorn-k8shim v1.5+ reads it (pkg/common/utils/utils.go, GetApplicationIDFromPod):
    the label ``yunikorn.apache.org/app-id``, the annotation of that name, the label
    ``applicationId``. (k8shim reads Spark's ``spark-app-selector`` last; corral reads a
    Spark pod by Spark's own keys, webhook/admission/spark.py, and never takes it for a gang.)"""
    for where, key in (
        (labels, YUNIKORN_APP_ID),
        (annotations, YUNIKORN_APP_ID),
        (labels, YUNIKORN_APP_ID_LABEL),
    ):
        if value := where.get(key):
            return value, key
    return None


def read_membership(
    dialect: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    *,
    application: bool = False,
) -> Membership | None:
    """The gang a pod's (or a pod template's) keys put it in, read in one dialect (one of
    :data:`DIALECTS`); None when they put it in none. The one reader of membership: the
    webhook reads its backend's dialect, the descheduler and the plugin every one.

    A YuniKorn application is a gang only when it declares task groups; with
    ``application`` its application counts without them (the webhook keeps a pod's
    application and adds the task groups, never renames it)."""
    a, lab = annotations, labels
    timeout = a.get(ANNOTATION_GANG_TIMEOUT)
    if dialect == "volcano":
        if name := a.get(VOLCANO_GROUP_NAME):
            queue = a.get(VOLCANO_QUEUE_NAME) or a.get(ANNOTATION_QUEUE)
            min_available = _int(a.get(ANNOTATION_MIN_AVAILABLE))
            return Membership(name, "volcano", min_available, queue, timeout, VOLCANO_GROUP_NAME)
    elif dialect == "coscheduling":
        if name := lab.get(COSCHED_POD_GROUP_LABEL):
            queue = a.get(ANNOTATION_QUEUE)
            min_available = _int(a.get(ANNOTATION_MIN_AVAILABLE))
            return Membership(
                name, "coscheduling", min_available, queue, timeout, COSCHED_POD_GROUP_LABEL
            )
    elif dialect == "kueue":
        if name := lab.get(KUEUE_POD_GROUP_LABEL):
            queue = lab.get(KUEUE_QUEUE_LABEL)
            total = _int(a.get(KUEUE_TOTAL_COUNT))
            return Membership(name, "kueue", total, queue, timeout, KUEUE_POD_GROUP_LABEL)
    elif dialect == "yunikorn":
        app = yunikorn_app_id(lab, a)
        gang = bool(a.get(YUNIKORN_TASK_GROUP_NAME) or a.get(YUNIKORN_TASK_GROUPS))
        if app and (gang or application):
            queue = lab.get(YUNIKORN_QUEUE_LABEL) or a.get(YUNIKORN_QUEUE)
            return Membership(app[0], "yunikorn", _yunikorn_min(a), queue, timeout, app[1])
    elif dialect == "kai":
        if name := a.get(KAI_POD_GROUP):
            queue = lab.get(KAI_QUEUE_LABEL)
            min_member = _int(a.get(KAI_MIN_MEMBER))
            return Membership(name, "kai", min_member, queue, timeout, KAI_POD_GROUP)
    elif dialect == "kubernetes":
        if name := a.get(NATIVE_GANG):
            queue = a.get(ANNOTATION_QUEUE)
            min_available = _int(a.get(ANNOTATION_MIN_AVAILABLE))
            return Membership(name, "kubernetes", min_available, queue, timeout, NATIVE_GANG)
    elif dialect == "corral":
        if name := a.get(ANNOTATION_GANG):
            queue = a.get(ANNOTATION_QUEUE)
            return Membership(name, "corral", _int(a.get(ANNOTATION_MIN_AVAILABLE)), queue, timeout)
    else:
        raise ValueError(f"dialect {dialect!r}: expected one of {', '.join(DIALECTS)}")
    return None


def membership(pod: PodRecord) -> Membership | None:
    """The gang ``pod`` belongs to, read from whichever dialect it carries. A pod that
    names a group of the native gang API (its spec, read into ``native_gang``) is of
    that gang whatever keys it also carries: the scheduler places it by that group. Its
    minCount is the group object's (:mod:`gangplace.engine.native_groups`)."""
    if pod.native_gang:
        timeout = pod.annotations.get(ANNOTATION_GANG_TIMEOUT)
        queue = pod.annotations.get(ANNOTATION_QUEUE)
        return Membership(pod.native_gang, "kubernetes", None, queue, timeout)
    for dialect in DIALECTS:
        m = read_membership(dialect, pod.labels, pod.annotations)
        if m is not None:
            return m
    return None


@dataclass(slots=True)
class GangMembers:
    """The pods of one gang found in a snapshot."""

    namespace: str
    name: str
    dialect: str
    pods: list[PodRecord] = field(default_factory=list)
    min_available: int | None = None
    queue: str | None = None
    timeout: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def running(self) -> list[PodRecord]:
        return [p for p in self.pods if p.bound]

    @property
    def waiting(self) -> list[PodRecord]:
        return [p for p in self.pods if not p.bound]


def group_pods(pods: Iterable[PodRecord]) -> dict[str, GangMembers]:
    """Pods grouped by gang (``namespace/name``); pods without gang keys are left out."""
    out: dict[str, GangMembers] = {}
    for p in pods:
        m = membership(p)
        if m is None:
            continue
        key = f"{p.namespace}/{m.gang}"
        g = out.get(key)
        if g is None:
            g = out[key] = GangMembers(p.namespace, m.gang, m.dialect)
        g.pods.append(p)
        if m.min_available is not None:
            g.min_available = m.min_available
        g.queue = g.queue or m.queue
        g.timeout = g.timeout or m.timeout
    return out
