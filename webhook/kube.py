"""The webhook's writes to the API server, through the kube layer's :class:`KubeClient`
(every call declared in :data:`gangplace.kube.API_CALLS`).

* :class:`PodGroupApi` gives the :class:`~webhook.podgroups.PodGroupReconciler` its
  ``create``, ``resolve_owner`` and ``existing`` functions for Volcano
  (``scheduling.volcano.sh/v1beta1``) and scheduler-plugins
  (``scheduling.x-k8s.io/v1alpha1``) PodGroups.
* :class:`SecretCertStore` keeps ``--self-signed``'s CA and serving certificate in a
  Secret of the webhook's namespace and puts the CA into the ``caBundle`` of the
  webhook's own MutatingWebhookConfiguration.

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

import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gangplace.kube import ApiError, KubeClient
from gangplace.kube.resources import (
    COSCHED_PODGROUPS,
    MUTATING_WEBHOOKS,
    PODS,
    SECRETS,
    VOLCANO_PODGROUPS,
    WORKLOADS,
    Resource,
)

from .keys import MANAGED_BY
from .podgroups import Existing, OwnerRef, PodGroupIntent, Removed
from .tls import (
    TlsBundle,
    bundle_from_secret,
    ca_bundle_patch,
    secret_manifest,
    trusted_cas,
    webhook_ca_bundles,
)

__all__ = ["CertPublishError", "PodGroupApi", "SecretCertStore", "owner_resource"]

log = logging.getLogger("webhook.kube")

_PODGROUPS = {r.group: r for r in (VOLCANO_PODGROUPS, COSCHED_PODGROUPS)}
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
    known = _PODGROUPS.get(intent.group)
    if known is None:
        raise ValueError(f"PodGroups of {intent.api_version} are not known to the webhook")
    return known


def _refs(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    refs = (obj.get("metadata") or {}).get("ownerReferences")
    return [r for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []


def _describe(refs: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{r.get('kind')}/{r.get('name')}" for r in refs) or "nobody"


class PodGroupApi:
    """PodGroups over the API server, for :class:`~webhook.podgroups.PodGroupReconciler`:
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
        """See :class:`~webhook.podgroups.Existing`. A pod whose gang's PodGroup is owned
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
            if not refs or any(r.get("kind") != "Pod" for r in refs):
                return Existing.OTHER  # a workload's gang, or one nobody owns
            add = {"op": "add", "path": "/metadata/ownerReferences/-", "value": owner.to_json()}
            return [add], Existing.JOINED

        return await self._change(intent, decide, "joining")

    async def update(
        self, intent: PodGroupIntent, owner: OwnerRef | None, body: dict[str, Any]
    ) -> Existing:
        """See :class:`~webhook.podgroups.UpdateFn`: a scaled workload's PodGroup takes
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
        managed-by label) that ``owner`` owns, and only the object read (a uid
        precondition: one made again meanwhile is a new object, and stays)."""
        res = _podgroups(intent)
        try:
            obj = await self.kube.get(res, intent.name, intent.namespace)
        except ApiError as e:
            if e.status == 404:
                return "absent"
            raise
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        ours = labels.get(MANAGED_BY[0]) == MANAGED_BY[1] if isinstance(labels, dict) else False
        if not ours or not owner.uid or not any(r.get("uid") == owner.uid for r in _refs(obj)):
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


# --- the self-signed certificate's Secret and caBundle ------------------------------------


class CertPublishError(RuntimeError):
    """The CA could not be put into the webhook configuration; the message says why."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class SecretCertStore:
    """A :class:`~webhook.tls.CertStore` on the API server.

    The bundle lives in Secret ``secret`` of ``namespace`` (type ``kubernetes.io/tls``
    plus the CA pair). The first replica creates it; a replica that loses that race
    (409) reads and uses what the winner stored. Renewals are conditional updates on
    the resourceVersion last read, so two replicas renewing at once end up on one
    bundle. The CA goes into the ``caBundle`` of every webhook of MutatingWebhookConfig-
    uration ``webhook_config`` that calls ``service`` in ``namespace``, by a JSON patch
    guarded by each webhook's name; earlier corral CAs already there stay until they
    expire when they were near their end (a CA renewal: replicas still serving a
    certificate of the old CA keep working until they switch).
    """

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        *,
        secret: str,
        webhook_config: str,
        service: str,
        clock: Callable[[], dt.datetime] = _now,
    ) -> None:
        self.kube = kube
        self.namespace, self.secret = namespace, secret
        self.webhook_config, self.service = webhook_config, service
        self.clock = clock
        self._rv: str | None = None  # the Secret's resourceVersion as last seen

    async def load(self) -> TlsBundle | None:
        try:
            obj = await self.kube.get(SECRETS, self.secret, self.namespace)
        except ApiError as e:
            if e.status == 404:
                self._rv = None
                return None
            raise
        self._rv = str((obj.get("metadata") or {}).get("resourceVersion") or "") or None
        bundle = bundle_from_secret(obj)
        if bundle is None:
            log.warning(
                "Secret does not hold a readable bundle; it will be replaced",
                extra={"fields": {"secret": f"{self.namespace}/{self.secret}"}},
            )
        return bundle

    async def save(self, bundle: TlsBundle) -> TlsBundle:
        body = secret_manifest(bundle, self.secret, self.namespace)
        for _ in range(3):
            try:
                if self._rv is None:
                    stored = await self.kube.create(SECRETS, body, namespace=self.namespace)
                else:
                    body["metadata"]["resourceVersion"] = self._rv
                    stored = await self.kube.replace(
                        SECRETS, self.secret, body, namespace=self.namespace
                    )
            except ApiError as e:
                if e.status == 409:
                    # Another replica stored its bundle first: use that one.
                    theirs = await self.load()
                    if theirs is not None:
                        log.info(
                            "another replica stored the certificate first; using it",
                            extra={"fields": {"secret": f"{self.namespace}/{self.secret}"}},
                        )
                        return theirs
                    continue
                if e.status == 404 and self._rv is not None:
                    self._rv = None  # deleted meanwhile: create it
                    continue
                raise
            self._rv = str((stored.get("metadata") or {}).get("resourceVersion") or "") or None
            return bundle
        raise CertPublishError(f"Secret {self.namespace}/{self.secret} kept changing")

    async def publish_ca(self, ca_bundle: bytes) -> None:
        for _ in range(3):
            try:
                mwc = await self.kube.get(MUTATING_WEBHOOKS, self.webhook_config)
            except ApiError as e:
                if e.status == 404:
                    raise CertPublishError(
                        f"MutatingWebhookConfiguration {self.webhook_config} does not exist "
                        "(yet): the API server cannot call this webhook until it does "
                        "(--webhook-config-name names it)"
                    ) from None
                raise
            have = webhook_ca_bundles(mwc, self.service, self.namespace)
            if have is None:
                raise CertPublishError(
                    f"MutatingWebhookConfiguration {self.webhook_config} has no webhook "
                    f"that calls Service {self.namespace}/{self.service} (--service-name, "
                    "--namespace)"
                )
            want = trusted_cas(ca_bundle, have, self.clock())
            ops = ca_bundle_patch(mwc, want, self.service, self.namespace)
            if not ops:
                return
            try:
                await self.kube.patch(MUTATING_WEBHOOKS, self.webhook_config, ops)
            except ApiError as e:
                if e.status == 422:
                    continue  # its webhooks moved since we read it: look again
                raise
            log.info(
                "CA published to the webhook configuration",
                extra={"fields": {"webhook_config": self.webhook_config}},
            )
            return
        raise CertPublishError(f"MutatingWebhookConfiguration {self.webhook_config} kept changing")
