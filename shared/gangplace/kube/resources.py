"""The Kubernetes resources corral reads and writes, their REST paths, and the one list
of every API call the layer makes.

:data:`API_CALLS` is the single source of truth for what the layer may do: the client
(:mod:`gangplace.kube.client`) refuses a call that is not on it, so the RBAC rules that a
later check derives from this list cannot fall behind the code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from gangplace.engine import native_versions
from gangplace.engine.kinds import KINDS, Kinds, WorkloadKind, read_kinds, suspendable_kinds

__all__ = [
    "API_CALLS",
    "COMPOSITE_VERSIONS",
    "CONFIGMAPS",
    "COSCHED_PODGROUPS",
    "CRDS",
    "DESCHEDULER_WORKLOADS",
    "EVENTS",
    "GANG_OBJECT_APIS",
    "JOBS",
    "KUEUE_WORKLOADS",
    "LEASES",
    "MUTATING_WEBHOOKS",
    "NAMESPACES",
    "NATIVE_COMPOSITES",
    "NATIVE_PODGROUPS",
    "NATIVE_VERSIONS",
    "NATIVE_WORKLOADS",
    "NODES",
    "NON_TERMINAL_PODS",
    "PDBS",
    "PODGROUP_APIS",
    "PODS",
    "PRIORITY_CLASSES",
    "RESOURCES",
    "SECRETS",
    "SUSPENDABLE_WORKLOADS",
    "VOLCANO_PODGROUPS",
    "VOLCANO_QUEUES",
    "WORKLOADS",
    "ApiCall",
    "Resource",
    "UndeclaredApiCall",
    "added_kind_calls",
    "check_call",
    "declared_calls",
    "descheduler_workloads",
    "pods_on_node",
    "suspendable_workloads",
    "workload_resource",
]


@dataclass(frozen=True, slots=True)
class Resource:
    """One REST resource: ``group`` is ``""`` for the core group."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str = ""
    ) -> str:
        """The REST path. A namespaced resource without ``namespace`` is the collection
        across all namespaces (list and watch only)."""
        if not self.namespaced and namespace:
            raise ValueError(f"{self.plural} is cluster-scoped; got namespace {namespace!r}")
        if subresource and not name:
            raise ValueError(f"subresource {subresource!r} of {self.plural} needs a name")
        parts = [self.prefix]
        if self.namespaced and namespace:
            parts.append(f"/namespaces/{quote(namespace, safe='')}")
        parts.append(f"/{self.plural}")
        if name:
            parts.append(f"/{quote(name, safe='')}")
        if subresource:
            parts.append(f"/{subresource}")
        return "".join(parts)

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)
PRIORITY_CLASSES = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
VOLCANO_PODGROUPS = Resource(
    "scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", namespaced=True
)
VOLCANO_QUEUES = Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", namespaced=False)
# The native gang API (KEP-4671): v1alpha1 in 1.35, v1alpha2 in 1.36, v1alpha3 and v1beta1
# in 1.37 (CompositePodGroup at v1alpha3 only). The version here is only a default: every
# reader and writer takes the one gangplace.engine.native_versions prefers among those
# served.
NATIVE_WORKLOADS = Resource(
    "scheduling.k8s.io", "v1beta1", "workloads", "Workload", namespaced=True
)
NATIVE_PODGROUPS = Resource(
    "scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup", namespaced=True
)
NATIVE_COMPOSITES = Resource(
    "scheduling.k8s.io", "v1alpha3", "compositepodgroups", "CompositePodGroup", namespaced=True
)
# The versions of the native gang API, preferred first: a reader takes the first served.
NATIVE_VERSIONS = native_versions.NATIVE_VERSIONS
COMPOSITE_VERSIONS = native_versions.COMPOSITE_VERSIONS
COSCHED_PODGROUPS = Resource(
    "scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", namespaced=True
)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
# The served schemas of the workload kinds: whether a suspend switch exists at all.
CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
# Kueue's Workloads: a job one stands for is Kueue's, never suspended by corral.
KUEUE_WORKLOADS = Resource("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", namespaced=True)
MUTATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)

# The PodGroup resources by API group: what a write or a mark addresses, by the group a
# record or an intent names.
PODGROUP_APIS: Mapping[str, Resource] = {
    VOLCANO_PODGROUPS.group: VOLCANO_PODGROUPS,
    COSCHED_PODGROUPS.group: COSCHED_PODGROUPS,
}

# Every object a backend writes for a gang (the PodGroups above and the native gang
# API's), by API group and plural: what an intent of the webhook addresses.
GANG_OBJECT_APIS: Mapping[tuple[str, str], Resource] = {
    (r.group, r.plural): r
    for r in (*PODGROUP_APIS.values(), NATIVE_WORKLOADS, NATIVE_PODGROUPS, NATIVE_COMPOSITES)
}


def _resource(k: WorkloadKind) -> Resource:
    return Resource(k.group, k.version, k.plural, k.kind, namespaced=True)


# The workload kinds, from the engine's one registry (gangplace.engine.kinds.KINDS).
# The webhook reads one it makes gangs of (to learn its uid) when none of its pods or
# child workloads named it first; the version is the one a path is built with when the
# caller has no other.
WORKLOADS: tuple[Resource, ...] = tuple(_resource(k) for k in KINDS.values() if k.makes_gangs)
# The batch/v1 Jobs `kubectl corral demo` makes (its story's workloads).
JOBS = _resource(KINDS[("batch", "Job")])
# The workloads the descheduler reads (the owners that decide how a gang may move) and,
# for those with a suspend switch, suspends and resumes.
DESCHEDULER_WORKLOADS: tuple[Resource, ...] = tuple(_resource(k) for k in read_kinds())
SUSPENDABLE_WORKLOADS: tuple[Resource, ...] = tuple(_resource(k) for k in suspendable_kinds())
# (the same two of a registry a config extends: descheduler_workloads, suspendable_workloads)


def workload_resource(group: str, kind: str, kinds: Kinds = KINDS) -> Resource:
    """The REST resource of a registered workload kind (what a suspend patches, what an
    Event names). KeyError for a kind the registry does not hold."""
    return _resource(kinds[(group, kind)])


def descheduler_workloads(kinds: Kinds = KINDS) -> tuple[Resource, ...]:
    """The workloads the descheduler reads, of a registry (one the config extends)."""
    return tuple(_resource(k) for k in read_kinds(kinds))


def suspendable_workloads(kinds: Kinds = KINDS) -> tuple[Resource, ...]:
    """The workloads the descheduler may suspend, of a registry."""
    return tuple(_resource(k) for k in suspendable_kinds(kinds))


def added_kind_calls(kinds: Kinds) -> tuple[ApiCall, ...]:
    """The calls on the kinds ``kinds`` holds beyond the built-in registry (a config's
    ``workloads:``): what the descheduler's built-ins of the same standing get (list and
    watch of a kind it reads, patch of one it may suspend; the webhook reads no added
    kind, see webhook.podgroups.calls). A client declares them (``KubeClient.declare``);
    the RBAC of ``make manifests`` grants them."""
    added = [r for key, r in kinds.items() if key not in KINDS]
    out: list[ApiCall] = []
    for k in added:
        r = _resource(k)
        if k.read:
            out.extend(_watched(r, "descheduler informer: a workload kind the config adds"))
        if k.read and k.suspend_path:
            out.append(ApiCall("patch", r.group, r.plural, why="descheduler: suspend a workload"))
    return tuple(out)


RESOURCES: tuple[Resource, ...] = (
    NODES,
    PODS,
    NAMESPACES,
    EVENTS,
    PDBS,
    PRIORITY_CLASSES,
    LEASES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    COSCHED_PODGROUPS,
    CONFIGMAPS,
    SECRETS,
    MUTATING_WEBHOOKS,
    *WORKLOADS,
)

# Pods that hold resources: the descheduler and the webhook never need finished pods.
NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"


def pods_on_node(node: str) -> str:
    """Field selector for the pods bound to one node."""
    return f"spec.nodeName={node}"


@dataclass(frozen=True, slots=True)
class ApiCall:
    """One kind of request, in RBAC terms: ``verb`` on ``group``/``resource``[/``sub``]."""

    verb: str  # get, list, watch, create, update, patch, delete
    group: str
    resource: str
    subresource: str = ""
    why: str = ""

    @property
    def rule(self) -> tuple[str, str, str]:
        """(verb, group, resource[/subresource]) as an RBAC rule names it."""
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return (self.verb, self.group, res)


def _watched(r: Resource, why: str) -> tuple[ApiCall, ApiCall]:
    return (
        ApiCall("list", r.group, r.plural, why=why),
        ApiCall("watch", r.group, r.plural, why=why),
    )


API_CALLS: tuple[ApiCall, ...] = (
    *_watched(NODES, "informer: nodes for the engine snapshot"),
    *_watched(PODS, "informer: pods for the engine snapshot"),
    *_watched(NAMESPACES, "informer: namespace labels (opt-in, queue map)"),
    *_watched(PRIORITY_CLASSES, "informer: priority values"),
    *_watched(PDBS, "informer and evictor: disruption budgets before evicting a gang"),
    *_watched(VOLCANO_PODGROUPS, "informer: Volcano gangs"),
    *_watched(VOLCANO_QUEUES, "informer: Volcano queues"),
    *_watched(COSCHED_PODGROUPS, "informer: scheduler-plugins gangs"),
    *_watched(
        NATIVE_WORKLOADS,
        "descheduler informer: native gangs (1.35: the Workload holds the groups' minCount)",
    ),
    *_watched(
        NATIVE_PODGROUPS,
        "descheduler informer: native gangs (1.36+: minCount and disruptionMode)",
    ),
    *(
        call
        for r in DESCHEDULER_WORKLOADS
        for call in _watched(r, "descheduler informer: the owners that decide how a gang moves")
    ),
    ApiCall(
        "get",
        CRDS.group,
        CRDS.plural,
        why="descheduler: whether the served CRD of a workload kind declares its suspend "
        "switch (a switch it lacks is pruned and ignored)",
    ),
    *_watched(KUEUE_WORKLOADS, "descheduler informer: jobs Kueue manages are not suspended"),
    ApiCall(
        "get",
        "",
        "pods",
        why="webhook: the uid of a bare pod that owns its gang; descheduler: whether the "
        "pods of a suspended gang went (else the suspend is rolled back)",
    ),
    *(
        ApiCall(
            "patch",
            r.group,
            r.plural,
            why="descheduler: suspend a workload to move its gang (spec.suspend and "
            "corral.dev/suspended-by), and resume it",
        )
        for r in SUSPENDABLE_WORKLOADS
    ),
    *(
        ApiCall(
            verb,
            r.group,
            r.plural,
            why="descheduler: the PodGroup of a workload it suspends is removed, and made "
            "again on resume",
        )
        for r in (VOLCANO_PODGROUPS, COSCHED_PODGROUPS)
        for verb in ("create",)
    ),
    *(
        ApiCall(
            "delete",
            r.group,
            r.plural,
            why="descheduler: the PodGroup of a workload it suspends is removed (made again "
            "on resume); webhook: the PodGroup it made for a workload a person suspends",
        )
        for r in (VOLCANO_PODGROUPS, COSCHED_PODGROUPS)
    ),
    ApiCall("create", "", "pods", "eviction", why="evictor: policy/v1 Eviction"),
    ApiCall(
        "patch",
        "",
        "pods",
        "status",
        why="descheduler (capacity_room.nominate): hold a capacity room through the "
        "kube-scheduler, status.nominatedNodeName on the waiting gang's pods",
    ),
    ApiCall(
        "create",
        "",
        "events",
        why="evictor: an Event on each evicted pod; descheduler: an Event on each moved "
        "gang (its PodGroup, else its first pod)",
    ),
    ApiCall("get", LEASES.group, LEASES.plural, why="leader election"),
    ApiCall("create", LEASES.group, LEASES.plural, why="leader election"),
    ApiCall("update", LEASES.group, LEASES.plural, why="leader election"),
    *(
        ApiCall(
            "patch",
            r.group,
            r.plural,
            why="descheduler: corral.dev/last-moved (cool-down) on a moved gang's PodGroup "
            "and corral.dev/room-made on the waiting gang's, before evicting; webhook: a "
            "bare-pod gang's PodGroup is owned by all its pods, and a scaled workload's "
            "PodGroup follows its new minMember",
        )
        for r in (VOLCANO_PODGROUPS, COSCHED_PODGROUPS)
    ),
    *(
        ApiCall(
            verb,
            CONFIGMAPS.group,
            CONFIGMAPS.plural,
            why="descheduler: its move ledger (one ConfigMap in its own namespace): "
            "cool-downs of gangs and pods that have no PodGroup to carry them",
        )
        for verb in ("get", "create", "update")
    ),
    *(
        ApiCall(verb, r.group, r.plural, why=why)
        for r in (VOLCANO_PODGROUPS, COSCHED_PODGROUPS)
        for verb, why in (
            ("create", "webhook: the PodGroup of each admitted gang"),
            ("get", "webhook: whose is the PodGroup that exists already (409)"),
        )
    ),
    *(
        ApiCall(
            "get",
            r.group,
            r.plural,
            why="webhook: the uid of a gang's workload; the PodGroup of one whose pods come "
            "without it (not while it is suspended)",
        )
        for r in WORKLOADS
    ),
    *(
        ApiCall(verb, r.group, r.plural, why=why)
        for r in (NATIVE_WORKLOADS, NATIVE_PODGROUPS, NATIVE_COMPOSITES)
        for verb, why in (
            ("create", "webhook (backend kubernetes): the native gang objects of each gang"),
            ("get", "webhook (backend kubernetes): whose is the gang object that exists (409)"),
            (
                "patch",
                "webhook (backend kubernetes): a bare-pod gang's objects are owned by all its pods",
            ),
        )
    ),
    ApiCall("get", "", "secrets", why="webhook --self-signed: its CA and certificate"),
    ApiCall("create", "", "secrets", why="webhook --self-signed: its CA and certificate"),
    ApiCall("update", "", "secrets", why="webhook --self-signed: renewal"),
    ApiCall(
        "get",
        MUTATING_WEBHOOKS.group,
        MUTATING_WEBHOOKS.plural,
        why="webhook --self-signed: its own configuration's caBundle",
    ),
    ApiCall(
        "patch",
        MUTATING_WEBHOOKS.group,
        MUTATING_WEBHOOKS.plural,
        why="webhook --self-signed: its own configuration's caBundle",
    ),
    # kubectl corral demo, with the user's own credentials (nothing in the manifests)
    *(
        ApiCall(verb, "", "namespaces", why="kubectl corral demo: its two namespaces")
        for verb in ("create", "delete")
    ),
    *(
        ApiCall(verb, "batch", "jobs", why="kubectl corral demo: the story's Jobs")
        for verb in ("create", "delete")
    ),
    ApiCall("get", "", "nodes", why="kubectl corral demo: a node's taints"),
    ApiCall(
        "patch", "", "nodes", why="kubectl corral demo: a NoSchedule taint while placing a Job"
    ),
    ApiCall(
        "patch",
        "",
        "nodes",
        "status",
        why="kubectl corral demo --add-gpus: pretend GPUs (an extended resource) on a GPU-less "
        "cluster",
    ),
)

_DECLARED = frozenset((c.verb, c.group, c.resource, c.subresource) for c in API_CALLS)


def declared_calls(extra: tuple[ApiCall, ...] = ()) -> frozenset[tuple[str, str, str, str]]:
    """The (verb, group, resource, subresource) of :data:`API_CALLS` and ``extra``."""
    if not extra:
        return _DECLARED
    return _DECLARED | {(c.verb, c.group, c.resource, c.subresource) for c in extra}


class UndeclaredApiCall(RuntimeError):
    """The code tried a call that :data:`API_CALLS` does not list (a programming error:
    add it to the list, and to the RBAC rules)."""


def check_call(
    verb: str,
    resource: Resource,
    subresource: str = "",
    declared: frozenset[tuple[str, str, str, str]] = _DECLARED,
) -> None:
    if (verb, resource.group, resource.plural, subresource) not in declared:
        sub = f"/{subresource}" if subresource else ""
        raise UndeclaredApiCall(
            f"{verb} {resource}{sub} is not declared in gangplace.kube.resources.API_CALLS"
        )
