"""Where a self-signed bundle lives and how its CA reaches the API server.

:class:`CertStore` is what :class:`~webhook.tls.rotation.SelfSignedManager` needs;
:class:`MemoryCertStore` keeps the bundle in this process (no cluster);
:class:`SecretCertStore` keeps it in a Secret (:func:`secret_manifest` is its exact
content) and puts the CA into the webhook's MutatingWebhookConfiguration.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from gangplace.kube import ApiError, KubeClient
from gangplace.kube.resources import MUTATING_WEBHOOKS, SECRETS

from webhook.tls.ca_bundle import ca_bundle_patch, trusted_cas, webhook_ca_bundles
from webhook.tls.certificates import TlsBundle

__all__ = [
    "CertPublishError",
    "CertStore",
    "MemoryCertStore",
    "SecretCertStore",
    "bundle_from_secret",
    "secret_manifest",
]

# The name the webhook has always logged its Secret store's records under.
log = logging.getLogger(__name__)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def secret_manifest(bundle: TlsBundle, name: str, namespace: str) -> dict[str, Any]:
    """The Secret that keeps a bundle (``kubernetes.io/tls`` plus the CA pair)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "corral"},
        },
        "data": {
            "tls.crt": _b64(bundle.cert),
            "tls.key": _b64(bundle.key),
            "ca.crt": _b64(bundle.ca_cert),
            "ca.key": _b64(bundle.ca_key),
        },
    }


def bundle_from_secret(secret: Mapping[str, Any]) -> TlsBundle | None:
    """The bundle kept in a Secret, or None if it is missing a part or not base64."""
    data = secret.get("data")
    if not isinstance(data, Mapping):
        return None
    try:
        parts = [
            base64.b64decode(data[k], validate=True)
            for k in ("ca.crt", "ca.key", "tls.crt", "tls.key")
        ]
    except (KeyError, TypeError, ValueError):
        return None
    return TlsBundle(*parts)


class CertStore(Protocol):
    """Where a self-signed bundle lives and how its CA reaches the API server.
    :class:`SecretCertStore` keeps it in a Secret and the webhook configuration."""

    async def load(self) -> TlsBundle | None: ...

    async def save(self, bundle: TlsBundle) -> TlsBundle:
        """Store ``bundle``; returns the bundle actually stored (another replica may
        have stored its own first -- then that one is used)."""
        ...

    async def publish_ca(self, ca_bundle: bytes) -> None:
        """Make the API server trust ``ca_bundle`` (PEM, one or more CAs)."""
        ...


class MemoryCertStore:
    """A store for running without a cluster: the bundle lives in this process."""

    def __init__(self, bundle: TlsBundle | None = None) -> None:
        self.bundle = bundle
        self.published: bytes | None = None

    async def load(self) -> TlsBundle | None:
        return self.bundle

    async def save(self, bundle: TlsBundle) -> TlsBundle:
        self.bundle = bundle
        return bundle

    async def publish_ca(self, ca_bundle: bytes) -> None:
        self.published = ca_bundle


class CertPublishError(RuntimeError):
    """The CA could not be put into the webhook configuration; the message says why."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class SecretCertStore:
    """A :class:`CertStore` on the API server.

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
