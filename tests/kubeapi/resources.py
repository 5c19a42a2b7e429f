"""The kinds the in-memory API server serves, and how it stamps and copies the objects
it stores."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from tests.kubeapi.versions import NATIVE_API_WINDOWS, Release, Versions

__all__ = [
    "BUILTIN_TYPES",
    "CUSTOM_TYPES",
    "NATIVE_GROUP",
    "NATIVE_TYPES",
    "SERVED_FROM",
    "TERMINAL_PHASES",
    "ResourceType",
    "copy_json",
    "now_iso",
    "served",
]

TERMINAL_PHASES = ("Succeeded", "Failed")  # a pod in one of these is finished
_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.schedulerName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)
_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)


def now_iso(offset: float = 0.0) -> str:
    t = datetime.now(UTC).timestamp() + offset
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def copy_json(obj: Any) -> Any:
    """A deep copy of plain JSON."""
    return orjson.loads(orjson.dumps(obj))


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = True
    builtin: bool = True  # list items of built-in types carry no kind/apiVersion
    field_labels: frozenset[str] = frozenset()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def gvr(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)

    @property
    def qualified(self) -> str:
        """``pods`` or ``leases.coordination.k8s.io``, as messages name a resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "pods", "Pod", True, field_labels=_POD_FIELDS),
    ResourceType("", "v1", "nodes", "Node", False, field_labels=frozenset({"spec.unschedulable"})),
    ResourceType(
        "", "v1", "namespaces", "Namespace", False, field_labels=frozenset({"status.phase"})
    ),
    ResourceType("", "v1", "events", "Event", True, False, field_labels=_EVENT_FIELDS),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, False),
    ResourceType("", "v1", "secrets", "Secret", True, False),
    ResourceType("batch", "v1", "jobs", "Job", True),
    ResourceType("batch", "v1", "cronjobs", "CronJob", True),
    ResourceType("apps", "v1", "deployments", "Deployment", True),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
        False,
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
        False,
    ),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, False),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, False),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, False),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, False),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", True, False),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, False),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, False),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, False
    ),
    # Virtual: created and answered, never stored.
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        False,
    ),
)

# The custom resources corral uses, as their CustomResourceDefinitions declare them (a
# test checks this table against the published CRDs).
CUSTOM_TYPES: tuple[ResourceType, ...] = (
    ResourceType(
        "scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True, False, builtin=False
    ),
    ResourceType("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False, True, builtin=False),
    ResourceType(
        "scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", True, True, builtin=False
    ),
)

# The native gang API (KEP-4671), built in but served only by the releases that have it
# and only when the cluster switched it on (``Versions.native_gangs``, and on 1.37 the
# versions ``Versions.native_apis`` names): kubernetes/api ``scheduling/`` at v0.35.0
# (v1alpha1: Workload), v0.36.0 (v1alpha2: Workload, PodGroup), v0.37.0-beta.0 (v1alpha3:
# Workload, PodGroup, CompositePodGroup) and the released 1.37.0 OpenAPI (v1beta1:
# Workload, PodGroup; no CompositePodGroup). Release windows:
# ``versions.NATIVE_API_WINDOWS``. On 1.37 v1alpha3 and v1beta1 are two views of one
# stored object in the real server; here each version keeps its own objects (corral and
# the controller models all use the version preferred, v1beta1 where served). Shapes and
# rules: :mod:`.native_gangs`.
NATIVE_GROUP = "scheduling.k8s.io"
NATIVE_TYPES: tuple[ResourceType, ...] = (
    ResourceType(NATIVE_GROUP, "v1alpha1", "workloads", "Workload", True, False),
    ResourceType(NATIVE_GROUP, "v1alpha2", "workloads", "Workload", True, False),
    ResourceType(NATIVE_GROUP, "v1alpha2", "podgroups", "PodGroup", True, True),
    ResourceType(NATIVE_GROUP, "v1alpha3", "workloads", "Workload", True, False),
    ResourceType(NATIVE_GROUP, "v1alpha3", "podgroups", "PodGroup", True, True),
    ResourceType(NATIVE_GROUP, "v1alpha3", "compositepodgroups", "CompositePodGroup", True, True),
    ResourceType(NATIVE_GROUP, "v1beta1", "workloads", "Workload", True, False),
    ResourceType(NATIVE_GROUP, "v1beta1", "podgroups", "PodGroup", True, True),
)

# Built-in resources not served by every Kubernetes release of the support matrix
# (1.28-1.37): (group, version, plural) -> (first release, last release or None). The one
# place a release adds or removes a group: discovery, OpenAPI and request routing all ask
# :func:`served`.
VOLCANO_GROUP = "scheduling.volcano.sh"
KAI_GROUP = "scheduling.run.ai"
SERVED_FROM: dict[tuple[str, str, str], tuple[Release, Release | None]] = {
    rt.gvr: NATIVE_API_WINDOWS[rt.version] for rt in NATIVE_TYPES
}
_NATIVE_GVRS = frozenset(rt.gvr for rt in NATIVE_TYPES)


def served(rt: ResourceType, versions: Versions) -> bool:
    """Whether the stack ``versions`` serves ``rt``: Volcano's kinds only with Volcano,
    KAI's only with KAI, the native gang API only when switched on, other custom
    resources while registered."""
    if rt.group == VOLCANO_GROUP:
        return versions.volcano is not None
    if rt.group == KAI_GROUP:
        return versions.kai
    if rt.gvr in _NATIVE_GVRS:
        return versions.native_api_on(rt.version)
    span = SERVED_FROM.get(rt.gvr) if rt.builtin else None
    if span is None:
        return True
    first, last = span
    return versions.kube >= first and (last is None or versions.kube <= last)
