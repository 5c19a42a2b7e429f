"""The PodGroup reconciler's calls to the API server, through the kube layer's
:class:`KubeClient` (every call declared in :data:`gangplace.kube.API_CALLS`).

:class:`PodGroupApi` gives the :class:`~webhook.podgroups.reconciler.PodGroupReconciler`
its ``create``, ``resolve_owner``, ``existing``, ``update`` and ``remove`` functions for
Volcano (``scheduling.volcano.sh/v1beta1``) and scheduler-plugins
(``scheduling.x-k8s.io/v1alpha1``) PodGroups.

Owner uids. The uid of a gang's owner is learnt, first, from the admission of one of
its pods or child workloads (their ``ownerReferences`` name it with its uid: no API
call at all). Only when none came within ``RetryPolicy.hint_wait`` -- a suspended
workload, a LeaderWorkerSet whose pods belong to StatefulSets -- is the owner read: a
GET of a Pod or of one of the built-in workload kinds (:data:`gangplace.kube.resources.
WORKLOADS`). Kinds added in the config are not read (RBAC is derived from a fixed list):
for them only hints tell, and an intent whose owner was not named in time waits, parked,
for the first of its pods.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gangplace.kube import ApiError, KubeClient
from gangplace.kube.resources import GANG_OBJECT_APIS, PODS, WORKLOADS, Resource

from webhook.admission.keys import MANAGED_BY
from webhook.admission.native_gangs import Served
from webhook.config import WebhookConfig
from webhook.podgroup_intent import Existing, OwnerRef, PodGroupIntent, Removed
from webhook.podgroups.from_workload import OwnerPodGroups
from webhook.podgroups.reconciler import PodGroupOutcome, PodGroupReconciler

__all__ = ["PodGroupApi", "owner_resource"]

# The name the webhook has always logged its PodGroup calls under.
log = logging.getLogger(__name__)

_OWNERS: dict[tuple[str, str], Resource] = {(r.group, r.kind): r for r in (PODS, *WORKLOADS)}
_JOIN_TRIES = 5


def owner_resource(owner: OwnerRef) -> Resource | None:
    """The resource to read ``owner`` from, at the version its reference names; None
    for a kind the webhook does not read."""
    group, _, version = owner.api_version.rpartition("/")
    known = _OWNERS.get((group, owner.kind))
    if known is None or not version:
        return None
    if version == known.version:
        return known
    return Resource(group, version, known.plural, known.kind, known.namespaced)


def _podgroups(intent: PodGroupIntent) -> Resource:
    """The resource of an intent's object, at the version it names (the native gang
    API's version is the one the API server serves)."""
    known = GANG_OBJECT_APIS.get((intent.group, intent.plural))
    if known is None:
        raise ValueError(f"{intent.plural} of {intent.api_version} are not known to the webhook")
    if intent.version == known.version:
        return known
    return Resource(known.group, intent.version, known.plural, known.kind, known.namespaced)


def _refs(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    refs = (obj.get("metadata") or {}).get("ownerReferences")
    return [r for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []


def _ours(obj: Mapping[str, Any]) -> bool:
    """Whether corral made ``obj`` (its managed-by label)."""
    labels = (obj.get("metadata") or {}).get("labels")
    return isinstance(labels, Mapping) and labels.get(MANAGED_BY[0]) == MANAGED_BY[1]


def _describe(refs: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{r.get('kind')}/{r.get('name')}" for r in refs) or "nobody"


class PodGroupApi:
    """PodGroups over the API server, for :class:`~webhook.podgroups.reconciler.PodGroupReconciler`:
    ``PodGroupReconciler(api.create, api.resolve_owner, existing=api.existing,
    update=api.update, remove=api.remove, ...)``."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube

    async def create(self, intent: PodGroupIntent, body: dict[str, Any]) -> None:
        await self.kube.create(_podgroups(intent), body, namespace=intent.namespace)

    async def resolve_owner(self, namespace: str, owner: OwnerRef) -> str | None:
        obj = await self.read_owner(namespace, owner)
        uid = (obj.get("metadata") or {}).get("uid") if obj is not None else None
        return str(uid) if uid else None

    async def read_owner(self, namespace: str, owner: OwnerRef) -> Mapping[str, Any] | None:
        """The owner's object; None when it is gone, is a newer object of the same name
        (``owner.uid`` given and different), or is of a kind the webhook does not read."""
        res = owner_resource(owner)
        if res is None:
            return None
        try:
            obj = await self.kube.get(res, owner.name, namespace)
        except ApiError as e:
            if e.status == 404:
                return None
            raise
        uid = (obj.get("metadata") or {}).get("uid")
        if owner.uid and uid and uid != owner.uid:
            return None
        return obj

    async def existing(self, intent: PodGroupIntent, owner: OwnerRef | None) -> Existing:
        """See :class:`~webhook.podgroup_intent.Existing`. A pod whose gang's PodGroup is owned
        by pods only joins their owners (a guarded JSON patch, retried when the PodGroup
        changed in between): it is garbage-collected once the last of them is gone."""

        def decide(obj: Mapping[str, Any]) -> _Verdict:
            if owner is None or not owner.uid:
                return Existing.OURS
            refs = _refs(obj)
            if any(r.get("uid") == owner.uid for r in refs):
                return Existing.OURS
            is_pod = owner.api_version == "v1" and owner.kind == "Pod"
            if not is_pod:
                if any(r.get("kind") == owner.kind and r.get("name") == owner.name for r in refs):
                    return Existing.STALE  # its owner had our name: it is being deleted
                log.warning(
                    "a PodGroup of that name exists and is not this workload's; left alone",
                    extra={
                        "fields": {
                            "podgroup": f"{intent.namespace}/{intent.name}",
                            "owner": f"{owner.kind}/{owner.name}",
                            "owned_by": _describe(refs),
                        }
                    },
                )
                return Existing.OTHER
            if not refs and _ours(obj):
                # Made without owners before its first pod was answered
                # (PodGroupReconciler.before_answer): the pod becomes its first owner.
                first = {
                    "op": "add",
                    "path": "/metadata/ownerReferences",
                    "value": [owner.to_json()],
                }
                return [first], Existing.JOINED
            if not refs or any(r.get("kind") != "Pod" for r in refs):
                return Existing.OTHER  # a workload's gang, or one nobody owns
            add = {"op": "add", "path": "/metadata/ownerReferences/-", "value": owner.to_json()}
            return [add], Existing.JOINED

        return await self._change(intent, decide, "joining")

    async def update(
        self, intent: PodGroupIntent, owner: OwnerRef | None, body: dict[str, Any]
    ) -> Existing:
        """See :data:`~webhook.podgroups.reconciler.UpdateFn`: a scaled workload's PodGroup takes
        the new minMember and minResources (a JSON patch guarded by the resourceVersion
        read, retried when it changed in between). Only a PodGroup this owner owns."""
        want = body.get("spec") or {}

        def decide(obj: Mapping[str, Any]) -> _Verdict:
            refs = _refs(obj)
            if owner is None or not owner.uid or not any(r.get("uid") == owner.uid for r in refs):
                log.warning(
                    "a PodGroup of that name is not this workload's; not scaled",
                    extra={
                        "fields": {
                            "podgroup": f"{intent.namespace}/{intent.name}",
                            "owned_by": _describe(refs),
                        }
                    },
                )
                return Existing.OTHER
            ops = _scale_ops(obj.get("spec"), want)
            return (ops, Existing.UPDATED) if ops else Existing.OURS

        got = await self._change(intent, decide, "scaling")
        if got is Existing.UPDATED:
            log.info(
                "PodGroup follows its scaled workload",
                extra={
                    "fields": {
                        "podgroup": f"{intent.namespace}/{intent.name}",
                        "minMember": want.get("minMember"),
                    }
                },
            )
        return got

    async def remove(self, intent: PodGroupIntent, owner: OwnerRef) -> Removed:
        """Delete the PodGroup of a suspended workload: only one corral made (its
        managed-by label) that ``owner`` owns (an owner without a uid: one nobody owns),
        and only the object read (a uid precondition: one made again meanwhile is a new
        object, and stays)."""
        res = _podgroups(intent)
        try:
            obj = await self.kube.get(res, intent.name, intent.namespace)
        except ApiError as e:
            if e.status == 404:
                return "absent"
            raise
        meta = obj.get("metadata") or {}
        # An owner without a uid: a bare pod that never appeared, whose PodGroup was
        # made before it was answered -- removed only while it still has no owners.
        refs = _refs(obj)
        owned = any(r.get("uid") == owner.uid for r in refs) if owner.uid else not refs
        if not _ours(obj) or not owned:
            log.info(
                "a PodGroup of that name is not this suspended workload's; left alone",
                extra={
                    "fields": {
                        "podgroup": f"{intent.namespace}/{intent.name}",
                        "owned_by": _describe(_refs(obj)),
                    }
                },
            )
            return "foreign"
        try:
            await self.kube.delete(
                res, intent.name, namespace=intent.namespace, uid=str(meta.get("uid") or "")
            )
        except ApiError as e:
            if e.status in (404, 409):
                return "absent"  # gone, or replaced by a new one since the read
            raise
        return "removed"

    async def _change(
        self,
        intent: PodGroupIntent,
        decide: Callable[[Mapping[str, Any]], _Verdict],
        doing: str,
    ) -> Existing:
        """Read the PodGroup, ``decide``, and apply the operations decided, guarded by
        the resourceVersion read; read again when it changed in between."""
        res = _podgroups(intent)
        for _ in range(_JOIN_TRIES):
            try:
                obj = await self.kube.get(res, intent.name, intent.namespace)
            except ApiError as e:
                if e.status == 404:
                    return Existing.GONE
                raise
            verdict = decide(obj)
            if isinstance(verdict, Existing):
                return verdict
            ops, done = verdict
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            guard = {"op": "test", "path": "/metadata/resourceVersion", "value": rv}
            try:
                await self.kube.patch(res, intent.name, [guard, *ops], namespace=intent.namespace)
            except ApiError as e:
                if e.status in (409, 422):
                    continue  # changed since we read it: look again
                if e.status == 404:
                    return Existing.GONE
                raise
            return done
        raise ApiError(409, "Conflict", f"PodGroup {intent.name} kept changing while {doing} it")


# What to do with a PodGroup read: a final answer, or operations and the answer once
# they are applied.
_Verdict = Existing | tuple[list[dict[str, Any]], Existing]

_SCALED = ("minMember", "minResources")


def _scale_ops(have: Any, want: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JSON patch operations making ``have``'s minMember and minResources ``want``'s."""
    if not isinstance(have, dict):
        scaled = {k: want[k] for k in _SCALED if k in want}
        return [{"op": "add", "path": "/spec", "value": scaled}] if scaled else []
    ops: list[dict[str, Any]] = []
    for key in _SCALED:
        if key in want and have.get(key) != want[key]:
            ops.append({"op": "add", "path": f"/spec/{key}", "value": want[key]})
        elif key not in want and key in have:
            ops.append({"op": "remove", "path": f"/spec/{key}"})
    return ops


def live_reconciler(
    kube: KubeClient,
    config: WebhookConfig,
    on_outcome: Callable[[PodGroupIntent, PodGroupOutcome], None] | None = None,
    served: Served | None = None,
) -> PodGroupReconciler:
    """The reconciler the webhook runs on a cluster: every PodGroup call over ``kube``,
    and a gang's missing PodGroup made from its live workload by ``config``'s rules
    (``served``: what the API server serves, as admission was told).
    One wiring for the server, the benchmarks and the scenario tests."""
    api = PodGroupApi(kube)
    return PodGroupReconciler(
        api.create,
        api.resolve_owner,
        existing=api.existing,
        update=api.update,
        remove=api.remove,
        ensure=OwnerPodGroups(api.read_owner, config, served),
        on_outcome=on_outcome,
    )
