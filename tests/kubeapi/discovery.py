"""Discovery, as kube-apiserver serves it: ``/version``, ``/api``, ``/api/v1``, ``/apis``,
``/apis/{group}``, ``/apis/{group}/{version}`` -- listing exactly the kinds this server
serves at the Kubernetes release it plays (:func:`.resources.served`), with their verbs,
short names, categories and the subresources it answers, and the custom resources of
the CustomResourceDefinitions stored (their names from the CRD).

Followed from kubernetes v1.28.7 ``staging/src/k8s.io/apiserver/pkg/endpoints/discovery``
(``root.go``: APIGroupList; ``group.go``: APIGroup; ``version.go``: APIResourceList;
``legacy.go``: APIVersions for ``/api``) and ``pkg/registry/*/rest/storage_*.go`` for
which verbs and subresources each resource has; short names and categories from each
resource's ``ShortNames()``/``Categories()`` in ``pkg/registry``. ``/version`` follows
``staging/src/k8s.io/apimachinery/pkg/version/types.go``.

``/api`` and ``/apis`` answer aggregated discovery (an APIGroupDiscoveryList of
``apidiscovery.k8s.io`` v2beta1, or v2 from 1.30) to a client that asks for it first in
its Accept header, as kubectl does; others get the legacy documents (plain
``application/json``), which kubectl also reads when the answer is not aggregated
(client-go ``discovery/discovery_client.go``, ``downloadAPIs``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.kubeapi.resources import ResourceType, served
from tests.kubeapi.store import ApiStore
from tests.kubeapi.versions import Release

Json = dict[str, Any]

__all__ = [
    "aggregated_content_type",
    "aggregated_list",
    "aggregated_version",
    "api_group",
    "api_group_list",
    "api_resource_list",
    "api_versions",
    "version_info",
]

_ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_STATUS_VERBS = ("get", "patch", "update")


@dataclass(frozen=True, slots=True)
class _Names:
    """How discovery names a built-in resource (``pkg/registry/.../storage``)."""

    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = _ALL_VERBS


_BUILTIN_NAMES: dict[tuple[str, str], _Names] = {
    ("", "pods"): _Names(("po",), ("all",)),
    ("", "nodes"): _Names(("no",)),
    ("", "namespaces"): _Names(
        ("ns",), verbs=tuple(v for v in _ALL_VERBS if v != "deletecollection")
    ),
    ("", "events"): _Names(("ev",)),
    ("", "configmaps"): _Names(("cm",)),
    ("", "serviceaccounts"): _Names(("sa",)),
    ("events.k8s.io", "events"): _Names(("ev",)),
    ("batch", "jobs"): _Names((), ("all",)),
    ("batch", "cronjobs"): _Names(("cj",), ("all",)),
    ("apps", "deployments"): _Names(("deploy",), ("all",)),
    ("apps", "statefulsets"): _Names(("sts",), ("all",)),
    ("apps", "replicasets"): _Names(("rs",), ("all",)),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): _Names(
        (), ("api-extensions",)
    ),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): _Names(
        (), ("api-extensions",)
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"): _Names(
        ("crd", "crds"), ("api-extensions",)
    ),
    ("scheduling.k8s.io", "priorityclasses"): _Names(("pc",)),
    ("policy", "poddisruptionbudgets"): _Names(("pdb",)),
    ("authorization.k8s.io", "selfsubjectaccessreviews"): _Names(verbs=("create",)),
}

# Subresources besides status: (resource, subresource, group, version, kind, verbs) --
# the ones this server answers (pods/binding, pods/eviction, serviceaccounts/token).
_SUBRESOURCES: tuple[tuple[str, str, str, str, str, tuple[str, ...]], ...] = (
    ("pods", "binding", "", "", "Binding", ("create",)),
    ("pods", "eviction", "policy", "v1", "Eviction", ("create",)),
    ("serviceaccounts", "token", "authentication.k8s.io", "v1", "TokenRequest", ("create",)),
)

# The order kube-apiserver lists its built-in groups in (``pkg/controlplane``'s
# groupVersionPriority); groups not named here (custom resources) come after, by name.
_GROUP_ORDER = (
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "batch",
    "policy",
    "rbac.authorization.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
)


def version_info(store: ApiStore) -> Json:
    """``/version``: the release this server plays (``.0`` for its patch level)."""
    kube = store.versions.kube
    return {
        "major": str(kube.major),
        "minor": str(kube.minor),
        "gitVersion": f"v{kube.major}.{kube.minor}.0",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.22.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def _served_types(store: ApiStore) -> list[ResourceType]:
    return [rt for rt in store.types.values() if served(rt, store.versions)]


def _group_versions(store: ApiStore) -> dict[str, list[str]]:
    """Group -> its served versions, preferred first (``v1`` before ``v1beta1``...)."""
    out: dict[str, list[str]] = {}
    for rt in _served_types(store):
        versions = out.setdefault(rt.group, [])
        if rt.version not in versions:
            versions.append(rt.version)
    for versions in out.values():
        versions.sort(key=_version_priority)
    return out


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version order (``apimachinery/pkg/version/helpers.go``): GA before
    beta before alpha, higher numbers first."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if m is None:
        return (3, 0, 0)
    level = {"": 0, "beta": 1, "alpha": 2}[m.group(2) or ""]
    return (level, -int(m.group(1)), -int(m.group(3) or 0))


def _ordered_groups(groups: Iterable[str]) -> list[str]:
    known = [g for g in _GROUP_ORDER if g in groups]
    return known + sorted(g for g in groups if g not in _GROUP_ORDER and g)


def api_versions(server_address: str) -> Json:
    """``/api``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_json(group: str, versions: list[str]) -> Json:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(store: ApiStore) -> Json:
    """``/apis``: every named group served, its versions and the preferred one."""
    by_group = _group_versions(store)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_json(g, by_group[g]) for g in _ordered_groups(by_group)],
    }


def api_group(store: ApiStore, group: str) -> Json | None:
    """``/apis/{group}`` (None: not served)."""
    versions = _group_versions(store).get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_json(group, versions)}


def _crd_names(store: ApiStore, rt: ResourceType) -> Mapping[str, Any]:
    crds = store.types.get(("apiextensions.k8s.io", "v1", "customresourcedefinitions"))
    crd = store.find(crds, "", rt.qualified) if crds is not None else None
    names = ((crd or {}).get("spec") or {}).get("names")
    return names if isinstance(names, Mapping) else {}


def _resource(store: ApiStore, rt: ResourceType) -> Json:
    if rt.builtin:
        names = _BUILTIN_NAMES.get((rt.group, rt.plural), _Names())
        short, categories, verbs = names.short_names, names.categories, names.verbs
    else:
        crd = _crd_names(store, rt)
        short = tuple(crd.get("shortNames") or ())
        categories = tuple(crd.get("categories") or ())
        verbs = _ALL_VERBS
    out: Json = {
        "name": rt.plural,
        "singularName": rt.kind.lower(),
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(verbs),
    }
    if short:
        out["shortNames"] = list(short)
    if categories:
        out["categories"] = list(categories)
    return out


def _subresources(rt: ResourceType) -> list[Json]:
    out: list[Json] = []
    for plural, sub, group, version, kind, verbs in _SUBRESOURCES:
        if rt.builtin and rt.group == "" and rt.plural == plural:
            entry: Json = {"name": f"{plural}/{sub}", "singularName": "", "namespaced": True}
            if group:
                entry["group"], entry["version"] = group, version
            entry.update({"kind": kind, "verbs": list(verbs)})
            out.append(entry)
    if rt.status_subresource:
        out.append(
            {
                "name": f"{rt.plural}/status",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(_STATUS_VERBS),
            }
        )
    return out


def api_resource_list(store: ApiStore, group: str, version: str) -> Json | None:
    """``/api/v1`` or ``/apis/{group}/{version}`` (None: not served)."""
    types = [rt for rt in _served_types(store) if (rt.group, rt.version) == (group, version)]
    if not types:
        return None
    resources: list[Json] = []
    for rt in sorted(types, key=lambda t: t.plural):
        resources.append(_resource(store, rt))
        resources.extend(_subresources(rt))
    resources.sort(key=lambda r: str(r["name"]))
    out: Json = {"kind": "APIResourceList"}
    if group:
        out["apiVersion"] = "v1"
    out["groupVersion"] = f"{group}/{version}" if group else version
    out["resources"] = resources
    return out


# --- aggregated discovery ---------------------------------------------------------------

# apidiscovery.k8s.io versions by release: v2beta1 from 1.26 (beta, on by default from
# 1.27), v2 from 1.30 (GA; KEP-3352). v2beta1 was meant to go in 1.33, yet the
# apiserver library still carries its types at 0.34, so it is kept at every release.
_AGGREGATED_SINCE = {"v2": Release(1, 30), "v2beta1": Release(1, 27)}
_AGGREGATED = "application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"


def aggregated_version(store: ApiStore, accept: str) -> str | None:
    """The apidiscovery version to answer ``/api`` or ``/apis`` with: the first the
    client accepts (in its order) that this release serves; None for the legacy form
    (``staging/src/k8s.io/apiserver/pkg/endpoints/discovery/aggregated/negotiation.go``)."""
    for part in accept.split(","):
        if part.split(";")[0].strip() in ("application/json", "*/*") and ";" not in part:
            return None  # the legacy form comes first in the client's order
        params = dict(p.strip().split("=", 1) for p in part.split(";")[1:] if "=" in p)
        if params.get("g") != "apidiscovery.k8s.io" or params.get("as") != "APIGroupDiscoveryList":
            continue
        since = _AGGREGATED_SINCE.get(params.get("v", ""))
        if since is not None and store.versions.kube >= since:
            return params["v"]
    return None


def aggregated_content_type(version: str) -> str:
    return _AGGREGATED.format(v=version)


def _gvk_json(group: str, version: str, kind: str) -> Json:
    return {"group": group, "version": version, "kind": kind}


def _aggregated_resource(store: ApiStore, rt: ResourceType) -> Json:
    legacy = _resource(store, rt)
    out: Json = {
        "resource": rt.plural,
        "responseKind": _gvk_json(rt.group, rt.version, rt.kind),
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": legacy["singularName"],
        "verbs": legacy["verbs"],
    }
    for key in ("shortNames", "categories"):
        if key in legacy:
            out[key] = legacy[key]
    subs = []
    for sub in _subresources(rt):
        subs.append(
            {
                "subresource": str(sub["name"]).split("/", 1)[1],
                "responseKind": _gvk_json(
                    str(sub.get("group", rt.group)),
                    str(sub.get("version", rt.version)),
                    sub["kind"],
                ),
                "verbs": sub["verbs"],
            }
        )
    if subs:
        out["subresources"] = subs
    return out


def aggregated_list(store: ApiStore, version: str, *, core: bool) -> Json:
    """``/api`` (``core``) or ``/apis`` as an APIGroupDiscoveryList: every group with its
    versions, preferred first, and their resources."""
    by_group = _group_versions(store)
    groups = [""] if core else _ordered_groups(by_group)
    items = []
    for group in groups:
        versions = []
        for v in by_group.get(group, []):
            types = [rt for rt in _served_types(store) if (rt.group, rt.version) == (group, v)]
            resources = [
                _aggregated_resource(store, rt) for rt in sorted(types, key=lambda t: t.plural)
            ]
            versions.append({"version": v, "resources": resources, "freshness": "Current"})
        meta: Json = {"creationTimestamp": None}
        if group:
            meta["name"] = group
        items.append({"metadata": meta, "versions": versions})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{version}",
        "metadata": {},
        "items": items,
    }
