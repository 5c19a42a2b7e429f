"""Who makes which API call, and the least-privilege RBAC rules that follow from it.

:data:`~gangplace.kube.resources.API_CALLS` lists every call the code may make;
:data:`ATTRIBUTION` says which component makes each one: the ``webhook``, the
``descheduler`` (both run under ServiceAccounts of their own), ``kubectl-corral``
(the admin's plugin, which runs with the user's own credentials, read-only), or
``kubectl-corral-demo`` (``kubectl corral demo``, which writes in namespaces of its own
with the user's credentials; nothing in the manifests grants it anything).

A grant may be limited to the component's own namespace (a Role rather than a
ClusterRole), to named objects (``resourceNames``) and to one install choice (the
backend, how certificates are managed, how the descheduler runs), so that an install
that does not use something is not allowed to do it.

:func:`rbac_objects` renders the Roles, ClusterRoles and bindings for one component and
one choice; ``make manifests`` (``scripts/gen_manifests.py``) writes them under
``manifests/``, and a test fails when a call is attributed to nobody, when an attribution
names a call that is not declared, or when the manifests differ from what this module
renders. Nothing here is ``*``: every verb, resource and API group is named.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qs

from gangplace.engine.kinds import KINDS, Kinds
from gangplace.kube.resources import (
    API_CALLS,
    CONFIGMAPS,
    COSCHED_PODGROUPS,
    CRDS,
    DESCHEDULER_WORKLOADS,
    EVENTS,
    JOBS,
    KUEUE_WORKLOADS,
    LEASES,
    MUTATING_WEBHOOKS,
    NAMESPACES,
    NATIVE_COMPOSITES,
    NATIVE_PODGROUPS,
    NATIVE_WORKLOADS,
    NODES,
    PDBS,
    PODS,
    PRIORITY_CLASSES,
    SECRETS,
    SUSPENDABLE_WORKLOADS,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOADS,
    ApiCall,
    Resource,
    added_kind_calls,
)

__all__ = [
    "ATTRIBUTION",
    "CHOICES",
    "COMPONENTS",
    "DEMO",
    "DESCHEDULER",
    "DESCHEDULER_LEASE",
    "DESCHEDULER_LEDGER",
    "KUBECTL",
    "NAMESPACE",
    "RBAC_API",
    "SERVICE_ACCOUNTS",
    "WEBHOOK",
    "WEBHOOK_CONFIGURATION",
    "WEBHOOK_TLS_SECRET",
    "CallKey",
    "Grant",
    "allowed",
    "attribution",
    "attribution_problems",
    "calls_of",
    "permits",
    "rbac_objects",
    "request_call",
    "request_target",
    "role_name",
    "rules",
    "viewer_role",
]

WEBHOOK: Final = "webhook"
DESCHEDULER: Final = "descheduler"
KUBECTL: Final = "kubectl-corral"
DEMO: Final = "kubectl-corral-demo"
COMPONENTS: Final = (WEBHOOK, DESCHEDULER, KUBECTL, DEMO)

# Where corral runs, and the names of the objects its components touch by name. The
# manifests use these names, and pass them to the components on the command line.
NAMESPACE: Final = "corral-system"
SERVICE_ACCOUNTS: Final = {WEBHOOK: "corral-webhook", DESCHEDULER: "corral-descheduler"}
WEBHOOK_CONFIGURATION: Final = "corral-webhook"
WEBHOOK_TLS_SECRET: Final = "corral-webhook-tls"
DESCHEDULER_LEASE: Final = "corral-descheduler"
# The descheduler's move ledger: cool-downs of units that have no PodGroup.
DESCHEDULER_LEDGER: Final = "corral-descheduler-moves"

# The install choices a grant may depend on, each with its values; the first is the
# default install (``kubectl apply -k manifests/``).
CHOICES: Final[Mapping[str, tuple[str, ...]]] = {
    "backend": ("volcano", "coscheduling", "yunikorn", "kueue", "kubernetes", "kai"),
    "certs": ("self-signed", "cert-manager"),
    "descheduler": ("cronjob", "deployment"),
}

RBAC_API: Final = "rbac.authorization.k8s.io"
_RBAC_VERSION: Final = f"{RBAC_API}/v1"

# (verb, group, resource, subresource), as ApiCall names a call.
CallKey = tuple[str, str, str, str]

# Verbs whose requests carry an object name, so that resourceNames can limit them.
# create, list, watch (without a name field selector) and deletecollection have none.
_NAMED_VERBS: Final = frozenset({"get", "update", "patch", "delete"})


@dataclass(frozen=True, slots=True)
class Grant:
    """One component allowed one call. ``own_namespace``: only in the component's
    namespace (a Role). ``resource_names``: only on these objects (ignored for verbs
    whose requests name no object: create, list, watch). ``when``: only in installs
    that made this choice, e.g. ``("certs", "self-signed")``."""

    component: str
    own_namespace: bool = False
    resource_names: tuple[str, ...] = ()
    when: tuple[str, str] | None = None


def _key(verb: str, r: Resource, sub: str = "") -> CallKey:
    return (verb, r.group, r.plural, sub)


_W, _D, _K = Grant(WEBHOOK), Grant(DESCHEDULER), Grant(KUBECTL)
_DEMO = Grant(DEMO)
# The backends whose gangs have a PodGroup object, which the webhook makes.
_PODGROUP_BACKENDS: tuple[tuple[str, Resource], ...] = (
    ("volcano", VOLCANO_PODGROUPS),
    ("coscheduling", COSCHED_PODGROUPS),
)
# The backends whose gangs have objects the webhook makes (the native gang API's Workload
# and PodGroup besides the PodGroups above): their owners' uids are read.
_PODGROUP_WEBHOOK: tuple[Grant, ...] = tuple(
    Grant(WEBHOOK, when=("backend", backend))
    for backend in (*(b for b, _ in _PODGROUP_BACKENDS), "kubernetes")
)

# (verbs, resource, subresource, grants): every grant applies to every verb of its row.
_ROWS: tuple[tuple[tuple[str, ...], Resource, str, tuple[Grant, ...]], ...] = (
    # The engine's snapshot: every component places gangs on nodes and pods.
    (("list", "watch"), NODES, "", (_W, _D)),
    (("list", "watch"), PODS, "", (_W, _D)),
    (("list",), NODES, "", (_K,)),
    (("list",), PODS, "", (_K,)),
    # Namespace labels: the webhook's opt-in label and queue map; the plugin shows
    # whether a pod's namespace is opted in.
    (("list", "watch"), NAMESPACES, "", (_W,)),
    (("list",), NAMESPACES, "", (_K,)),
    # What decides who may move and who waits: the descheduler's planner inputs, which
    # the plugin reads too for `frag --plan` and the gang listing.
    (("list", "watch"), PRIORITY_CLASSES, "", (_D,)),
    (("list", "watch"), PDBS, "", (_D,)),
    (("list", "watch"), VOLCANO_PODGROUPS, "", (_D,)),
    (("list", "watch"), VOLCANO_QUEUES, "", (_D,)),
    (("list", "watch"), COSCHED_PODGROUPS, "", (_D,)),
    (("list", "watch"), NATIVE_WORKLOADS, "", (_D,)),
    (("list", "watch"), NATIVE_PODGROUPS, "", (_D,)),
    (("list",), PRIORITY_CLASSES, "", (_K,)),
    (("list",), PDBS, "", (_K,)),
    (("list",), VOLCANO_PODGROUPS, "", (_K,)),
    (("list",), VOLCANO_QUEUES, "", (_K,)),
    (("list",), COSCHED_PODGROUPS, "", (_K,)),
    (("list",), NATIVE_WORKLOADS, "", (_K,)),
    (("list",), NATIVE_PODGROUPS, "", (_K,)),
    # The owners that decide how a gang moves; suspending and resuming those with a
    # switch, and removing (then making again) the PodGroup of a suspended workload.
    *((("list", "watch"), r, "", (_D,)) for r in DESCHEDULER_WORKLOADS),
    *((("list",), r, "", (_K,)) for r in DESCHEDULER_WORKLOADS),
    *((("patch",), r, "", (_D,)) for r in SUSPENDABLE_WORKLOADS),
    (("create", "delete"), VOLCANO_PODGROUPS, "", (_D,)),
    (("create", "delete"), COSCHED_PODGROUPS, "", (_D,)),
    # Whether a suspend takes effect: the served CRD declares the switch, Kueue does not
    # manage the job; and, after a suspend, whether its pods went (else it is undone).
    (("get",), CRDS, "", (_D,)),
    (("list", "watch"), KUEUE_WORKLOADS, "", (_D,)),
    (("get",), PODS, "", (_D,)),
    # Evicting whole gangs, and saying so on each pod and each gang.
    (("create",), PODS, "eviction", (_D,)),
    # Holding a capacity room through the kube-scheduler (capacity_room.nominate): only
    # with the backends whose gangs it places (descheduler.planning.nominate).
    (
        ("patch",),
        PODS,
        "status",
        tuple(
            Grant(DESCHEDULER, when=("backend", b)) for b in ("coscheduling", "kueue", "kubernetes")
        ),
    ),
    (("create",), EVENTS, "", (_D,)),
    # Remembering moves across runs: corral.dev/last-moved and corral.dev/room-made on
    # PodGroups, and the ledger ConfigMap for units that have none.
    (("patch",), VOLCANO_PODGROUPS, "", (_D,)),
    (("patch",), COSCHED_PODGROUPS, "", (_D,)),
    (
        ("get", "create", "update"),
        CONFIGMAPS,
        "",
        (Grant(DESCHEDULER, own_namespace=True, resource_names=(DESCHEDULER_LEDGER,)),),
    ),
    # The webhook's PodGroups, with the backends that have them: made for each admitted
    # gang, looked at when one exists already (409), joined by each pod of a bare-pod
    # gang as one more owner, removed when a person suspends its workload; and the
    # owners whose uid their ownerReferences need.
    *(
        (
            ("create", "get", "patch", "delete"),
            res,
            "",
            (Grant(WEBHOOK, when=("backend", backend)),),
        )
        for backend, res in _PODGROUP_BACKENDS
    ),
    *((("get",), res, "", _PODGROUP_WEBHOOK) for res in (PODS, *WORKLOADS)),
    # The native gang API's objects (backend kubernetes): made for each admitted gang,
    # looked at when one exists already, joined by each pod of a bare-pod gang.
    *(
        (
            ("create", "get", "patch"),
            res,
            "",
            (Grant(WEBHOOK, when=("backend", "kubernetes")),),
        )
        for res in (NATIVE_WORKLOADS, NATIVE_PODGROUPS, NATIVE_COMPOSITES)
    ),
    # The fields of Volcano's served PodGroup schema (its CRD), read once at start.
    (("get",), CRDS, "", (Grant(WEBHOOK, when=("backend", "volcano")),)),
    # --self-signed: the CA and certificate in one Secret of the webhook's namespace,
    # and the CA in the caBundle of its own MutatingWebhookConfiguration.
    (
        ("get", "create", "update"),
        SECRETS,
        "",
        (
            Grant(
                WEBHOOK,
                own_namespace=True,
                resource_names=(WEBHOOK_TLS_SECRET,),
                when=("certs", "self-signed"),
            ),
        ),
    ),
    (
        ("get", "patch"),
        MUTATING_WEBHOOKS,
        "",
        (
            Grant(
                WEBHOOK,
                resource_names=(WEBHOOK_CONFIGURATION,),
                when=("certs", "self-signed"),
            ),
        ),
    ),
    # kubectl corral demo: its namespaces and Jobs, what it reads to show the story, a
    # taint on a node while it places a Job, pretend GPUs with --add-gpus; it runs the
    # descheduler's calls too, as the descheduler (with the user's credentials).
    (("create", "delete"), NAMESPACES, "", (_DEMO,)),
    (("create", "delete"), JOBS, "", (_DEMO,)),
    (("get", "patch"), NODES, "", (_DEMO,)),
    (("patch",), NODES, "status", (_DEMO,)),
    (("list",), NODES, "", (_DEMO,)),
    (("list",), PODS, "", (_DEMO,)),
    (("list",), VOLCANO_PODGROUPS, "", (_DEMO,)),
    (("list",), VOLCANO_QUEUES, "", (_DEMO,)),
    (("get",), MUTATING_WEBHOOKS, "", (_DEMO,)),
    # Leader election: one Lease in corral's own namespace, for the leader-elected
    # Deployment only (the CronJob runs `run --once`, which elects no leader).
    (
        ("get", "create", "update"),
        LEASES,
        "",
        (
            Grant(
                DESCHEDULER,
                own_namespace=True,
                resource_names=(DESCHEDULER_LEASE,),
                when=("descheduler", "deployment"),
            ),
        ),
    ),
)


def _build(
    rows: Iterable[tuple[tuple[str, ...], Resource, str, tuple[Grant, ...]]],
) -> dict[CallKey, tuple[Grant, ...]]:
    out: dict[CallKey, tuple[Grant, ...]] = {}
    for verbs, r, sub, grants in rows:
        for verb in verbs:
            key = _key(verb, r, sub)
            out[key] = (*out.get(key, ()), *grants)
    return out


ATTRIBUTION: Final[Mapping[CallKey, tuple[Grant, ...]]] = _build(_ROWS)


def attribution(kinds: Kinds = KINDS) -> Mapping[CallKey, tuple[Grant, ...]]:
    """:data:`ATTRIBUTION` with the calls on the kinds a config adds to the registry
    (:func:`~gangplace.kube.resources.added_kind_calls`), granted to the descheduler as
    the built-in kinds' are: list and watch, and patch of one with a suspend switch."""
    extra = added_kind_calls(kinds)
    if not extra:
        return ATTRIBUTION
    out = dict(ATTRIBUTION)
    for c in extra:
        key = calls_of(c)
        out[key] = (*out.get(key, ()), _D)
    return out


def calls_of(call: ApiCall) -> CallKey:
    return (call.verb, call.group, call.resource, call.subresource)


def _fmt(key: CallKey) -> str:
    verb, group, res, sub = key
    name = f"{res}.{group}" if group else res
    return f"{verb} {name}{'/' + sub if sub else ''}"


def attribution_problems(
    calls: Sequence[ApiCall] = API_CALLS,
    attribution: Mapping[CallKey, Sequence[Grant]] = ATTRIBUTION,
) -> list[str]:
    """Everything wrong between the declared calls and their attribution, as sentences
    that say what to change (empty when all is well)."""
    problems: list[str] = []
    declared = {calls_of(c) for c in calls}
    for c in calls:
        if not attribution.get(calls_of(c)):
            problems.append(
                f"{_fmt(calls_of(c))} ({c.why or 'no reason given'}) is declared in API_CALLS "
                "but attributed to no component: add it to gangplace.kube.rbac._ROWS, then "
                "run `make manifests`"
            )
    for key, grants in attribution.items():
        if key not in declared:
            problems.append(
                f"{_fmt(key)} is attributed in gangplace.kube.rbac but not declared in "
                "API_CALLS: remove it, or declare the call"
            )
        for g in grants:
            if g.component not in COMPONENTS:
                problems.append(f"{_fmt(key)}: unknown component {g.component!r}")
            if g.when is not None and g.when[1] not in CHOICES.get(g.when[0], ()):
                problems.append(f"{_fmt(key)}: unknown choice {g.when[0]}={g.when[1]}")
            if g.component == KUBECTL and key[0] not in ("get", "list"):
                problems.append(f"{_fmt(key)}: kubectl-corral is read-only (get and list)")
            if g.own_namespace and g.component == KUBECTL:
                problems.append(f"{_fmt(key)}: kubectl-corral has no namespace of its own")
    return problems


def allowed(component: str, verb: str, resource: Resource, subresource: str = "") -> bool:
    """Whether ``component`` is attributed this call (in any install)."""
    grants = ATTRIBUTION.get(_key(verb, resource, subresource), ())
    return any(g.component == component for g in grants)


# --- rendering --------------------------------------------------------------------------


def role_name(component: str, when: tuple[str, str] | None = None) -> str:
    """``corral-webhook``; ``corral-webhook-self-signed`` for the grants of one choice."""
    base = f"corral-{component.removeprefix('corral-')}"
    return base if when is None else f"{base}-{when[1]}"


def _grants(
    component: str, own_namespace: bool, when: tuple[str, str] | None, kinds: Kinds = KINDS
) -> list[tuple[CallKey, Grant]]:
    declared = {calls_of(c) for c in (*API_CALLS, *added_kind_calls(kinds))}
    return [
        (key, g)
        for key, grants in attribution(kinds).items()
        if key in declared
        for g in grants
        if g.component == component and g.own_namespace == own_namespace and g.when == when
    ]


def rules(
    component: str,
    *,
    own_namespace: bool = False,
    when: tuple[str, str] | None = None,
    kinds: Kinds = KINDS,
) -> list[dict[str, Any]]:
    """The PolicyRules for one component, scope and choice: one rule per API group and
    set of object names, merging resources that are granted the same verbs. Sorted, so
    the output never changes unless the attribution does. ``kinds``: the registry a
    config extends (its added kinds get the built-ins' grants)."""
    # (group, resource, names) -> verbs
    per_resource: dict[tuple[str, str, tuple[str, ...]], set[str]] = {}
    for (verb, group, res, sub), g in _grants(component, own_namespace, when, kinds):
        resource = f"{res}/{sub}" if sub else res
        names = tuple(sorted(g.resource_names)) if verb in _NAMED_VERBS else ()
        per_resource.setdefault((group, resource, names), set()).add(verb)
    merged: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for (group, resource, names), granted in per_resource.items():
        merged.setdefault((group, names, tuple(sorted(granted))), []).append(resource)
    out: list[dict[str, Any]] = []
    for (group, names, verbs), resources in sorted(merged.items()):
        rule: dict[str, Any] = {"apiGroups": [group], "resources": sorted(resources)}
        if names:
            rule["resourceNames"] = list(names)
        rule["verbs"] = list(verbs)
        out.append(rule)
    return out


def _labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/part-of": "corral", "app.kubernetes.io/component": component}


def rbac_objects(
    component: str,
    when: tuple[str, str] | None = None,
    namespace: str = NAMESPACE,
    kinds: Kinds = KINDS,
) -> list[dict[str, Any]]:
    """The ClusterRole and Role (each with its binding to the component's
    ServiceAccount) for ``component``'s grants of choice ``when`` (None: the grants
    every install needs). Empty when there are none."""
    if component not in SERVICE_ACCOUNTS:
        raise ValueError(f"{component} has no ServiceAccount (it runs as the user)")
    name = role_name(component, when)
    subject = {
        "kind": "ServiceAccount",
        "name": SERVICE_ACCOUNTS[component],
        "namespace": namespace,
    }
    out: list[dict[str, Any]] = []
    for own_ns in (False, True):
        rs = rules(component, own_namespace=own_ns, when=when, kinds=kinds)
        if not rs:
            continue
        kind = "Role" if own_ns else "ClusterRole"
        meta: dict[str, Any] = {"name": name}
        if own_ns:
            meta["namespace"] = namespace
        meta["labels"] = _labels(component)
        out.append({"apiVersion": _RBAC_VERSION, "kind": kind, "metadata": meta, "rules": rs})
        out.append(
            {
                "apiVersion": _RBAC_VERSION,
                "kind": f"{kind}Binding",
                "metadata": dict(meta),
                "roleRef": {"apiGroup": RBAC_API, "kind": kind, "name": name},
                "subjects": [subject],
            }
        )
    return out


def viewer_role(name: str = "corral-viewer") -> dict[str, Any]:
    """A ClusterRole with what ``kubectl corral`` reads, for an admin to bind to the
    people who use it (it runs with their credentials)."""
    return {
        "apiVersion": _RBAC_VERSION,
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": _labels(KUBECTL)},
        "rules": rules(KUBECTL),
    }


# --- requests as RBAC sees them ---------------------------------------------------------

_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<rest>.+)$"
)
_METHOD_VERBS: Final = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def request_call(method: str, path: str, query: str | Mapping[str, str] = "") -> CallKey:
    """The (verb, group, resource, subresource) an API request is authorized as, the way
    the API server reads a request (``/api/v1/namespaces/x`` is the namespace x)."""
    return request_target(method, path, query)[0]


def request_target(
    method: str, path: str, query: str | Mapping[str, str] = ""
) -> tuple[CallKey, str | None, str]:
    """:func:`request_call`, and the namespace (None: cluster scope or all namespaces)
    and object name (``""``: a collection) the request is authorized on."""
    m = _PATH.match(path.split("?", 1)[0])
    if m is None:
        raise ValueError(f"not a resource path: {path}")
    group = m["group"] or ""
    rest = m["rest"].split("/")
    if not all(rest):
        raise ValueError(f"not a resource path: {path}")
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = "/".join(rest[2:])
    q = parse_qs(query) if isinstance(query, str) else {k: [v] for k, v in query.items()}
    method = method.upper()
    watch = q.get("watch", [""])[0] in ("true", "1")
    if method == "GET":
        verb = "get" if name else ("watch" if watch else "list")
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    elif method in _METHOD_VERBS:
        verb = _METHOD_VERBS[method]
    else:
        raise ValueError(f"no RBAC verb for {method} {path}")
    return (verb, group, resource, sub), m["ns"], name


def permits(
    roles: Iterable[Mapping[str, Any]],
    call: CallKey,
    namespace: str | None = None,
    name: str = "",
) -> bool:
    """Whether ``roles`` (ClusterRoles, and Roles that count in their own namespace
    only) allow ``call`` on an object named ``name`` in ``namespace`` (None: cluster
    scope, or across all namespaces), as the RBAC authorizer decides it."""
    verb, group, res, sub = call
    resource = f"{res}/{sub}" if sub else res
    for role in roles:
        if role.get("kind") == "Role" and role["metadata"].get("namespace") != namespace:
            continue
        if role.get("kind") not in ("Role", "ClusterRole"):
            continue
        for rule in role.get("rules") or ():
            names = rule.get("resourceNames") or ()
            if (
                group in rule.get("apiGroups", ())
                and resource in rule.get("resources", ())
                and verb in rule.get("verbs", ())
                and (not names or name in names)
            ):
                return True
    return False
