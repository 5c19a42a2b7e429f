"""Builders of the native gang API's objects in each release's dialect (shapes:
:mod:`.native_gangs`): the Workload (and PodGroups, and a CompositePodGroup on 1.37) for a
workload of one or more gangs, and the pod's reference to its group.

:func:`gang_objects` is what a writer of native gangs creates for one workload (the
objects and the order they go in), and :func:`refer` what it sets on each pod's CREATE;
tests create them with :func:`create_gang_objects`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.kubeapi.native_gangs import composite_version, native_version
from tests.kubeapi.resources import NATIVE_GROUP
from tests.kubeapi.versions import Versions

Json = dict[str, Any]

__all__ = ["Group", "create_gang_objects", "gang_objects", "group_name", "refer"]


@dataclass(frozen=True, slots=True)
class Group:
    """One gang of a workload: its template name and minCount (0: basic, no gang)."""

    name: str
    min_count: int


def group_name(workload: str, group: str) -> str:
    """The PodGroup of ``group`` of ``workload`` (1.36+): ``<workload>-<group>``."""
    return f"{workload}-{group}"


def _policy(min_count: int) -> Json:
    return {"gang": {"minCount": min_count}} if min_count > 0 else {"basic": {}}


def _meta(name: str, owner: Json | None) -> Json:
    meta: Json = {"name": name}
    if owner is not None:
        om = owner["metadata"]
        meta["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": om["name"],
                "uid": om["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return meta


def _controller_ref(owner: Json | None) -> Json:
    if owner is None:
        return {}
    group = str(owner["apiVersion"]).rpartition("/")[0]
    ref = {"kind": owner["kind"], "name": owner["metadata"]["name"]}
    return {"controllerRef": {"apiGroup": group, **ref} if group else ref}


def gang_objects(
    versions: Versions,
    name: str,
    groups: Sequence[Group],
    *,
    owner: Json | None = None,
    composite_min_groups: int | None = None,
) -> list[tuple[str, str, Json]]:
    """``(apiVersion, plural, object)`` to create, in order, for a workload ``name`` made
    of ``groups``, owned by ``owner`` (an object with apiVersion, kind, name and uid).
    ``composite_min_groups``: on 1.37 with v1alpha3 served, put the groups under one
    CompositePodGroup that needs that many of them (all or nothing across groups).
    Workload and PodGroups are in the preferred version (v1beta1 where served), the
    CompositePodGroup in v1alpha3. Empty where the stack has no native gang API."""
    version = native_version(versions)
    if version is None:
        return []
    api = f"{NATIVE_GROUP}/{version}"
    if version == "v1alpha1":
        spec = {
            **_controller_ref(owner),
            "podGroups": [{"name": g.name, "policy": _policy(g.min_count)} for g in groups],
        }
        return [(api, "workloads", {"metadata": _meta(name, owner), "spec": spec})]
    templates = [{"name": g.name, "schedulingPolicy": _policy(g.min_count)} for g in groups]
    out: list[tuple[str, str, Json]] = []
    if version == "v1alpha2":
        out.append(
            (
                api,
                "workloads",
                {
                    "metadata": _meta(name, owner),
                    "spec": {**_controller_ref(owner), "podGroupTemplates": templates},
                },
            )
        )
        for g in groups:
            spec = {
                "podGroupTemplateRef": {
                    "workload": {"workloadName": name, "podGroupTemplateName": g.name}
                },
                "schedulingPolicy": _policy(g.min_count),
            }
            out.append(
                (
                    api,
                    "podgroups",
                    {"metadata": _meta(group_name(name, g.name), owner), "spec": spec},
                )
            )
        return out
    parent: str | None = None
    composite = composite_version(versions)
    if composite_min_groups is not None and composite is None:
        raise ValueError(f"{versions} serves no CompositePodGroup (scheduling.k8s.io/v1alpha3)")
    if composite_min_groups is not None:
        parent = f"{name}-all"
        spec_w: Json = {
            **_controller_ref(owner),
            "compositePodGroupTemplates": [
                {
                    "name": "all",
                    "schedulingPolicy": {"gang": {"minGroupCount": composite_min_groups}},
                    "podGroupTemplates": templates,
                }
            ],
        }
    else:
        spec_w = {**_controller_ref(owner), "podGroupTemplates": templates}
    out.append((api, "workloads", {"metadata": _meta(name, owner), "spec": spec_w}))
    if parent is not None:
        out.append(
            (
                f"{NATIVE_GROUP}/{composite}",
                "compositepodgroups",
                {
                    "metadata": _meta(parent, owner),
                    "spec": {
                        "workloadRef": {"workloadName": name, "templateName": "all"},
                        "schedulingPolicy": {"gang": {"minGroupCount": composite_min_groups}},
                    },
                },
            )
        )
    for g in groups:
        spec = {
            "workloadRef": {"workloadName": name, "templateName": g.name},
            "schedulingPolicy": _policy(g.min_count),
            "disruptionMode": {"all": {}} if g.min_count > 0 else {"single": {}},
        }
        if parent is not None:
            spec["parentCompositePodGroupName"] = parent
        out.append(
            (api, "podgroups", {"metadata": _meta(group_name(name, g.name), owner), "spec": spec})
        )
    return out


def refer(versions: Versions, pod: Json, workload: str, group: str, replica_key: str = "") -> Json:
    """``pod`` with its reference to group ``group`` of ``workload`` in the stack's
    dialect (unchanged where there is none)."""
    version = native_version(versions)
    spec = pod.setdefault("spec", {})
    if version == "v1alpha1":
        ref = {"name": workload, "podGroup": group}
        if replica_key:
            ref["podGroupReplicaKey"] = replica_key
        spec["workloadRef"] = ref
    elif version is not None:
        spec["schedulingGroup"] = {"podGroupName": group_name(workload, group)}
    return pod


async def create_gang_objects(
    rest: Any, namespace: str, objects: list[tuple[str, str, Json]]
) -> None:
    """Create :func:`gang_objects` through ``rest`` (a :class:`tests.controllers.Rest`)."""
    for api_version, plural, obj in objects:
        await rest.create(api_version, plural, namespace, obj)
