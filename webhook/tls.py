"""TLS for the webhook: TLS 1.2 or newer only, certificates that rotate without a
restart, and a self-signed mode that makes its own CA.

* Mounted certificates (``--tls-cert-file``/``--tls-key-file``, as cert-manager
  writes them): :class:`CertReloader` polls the files' inode, mtime and size and loads
  a changed pair into the *live* SSLContext; new handshakes get the new certificate,
  open connections keep theirs. A half-rotated pair (new cert, old key) fails to load
  and the old one stays until the pair matches.
* Self-signed (``--self-signed``): :func:`new_bundle` makes a CA and a serving
  certificate for the Service's DNS names with ``cryptography``; :func:`renewal_reason`
  says when to renew (expiry near, names changed, CA near its end);
  :func:`secret_manifest` and :func:`ca_bundle_patch` are the exact content of the
  Secret that keeps them and of the patch that puts the CA into the
  MutatingWebhookConfiguration; :func:`trusted_cas` which CAs that configuration should
  trust. :class:`SelfSignedManager` drives them through a :class:`CertStore`, which
  keeps and publishes them (in memory without a cluster; in a Secret and the webhook
  configuration with one: :class:`webhook.kube.SecretCertStore`).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CertReloader",
    "CertStore",
    "MemoryCertStore",
    "SelfSignedManager",
    "TlsBundle",
    "bundle_from_secret",
    "ca_bundle_patch",
    "client_context",
    "load_pair",
    "new_bundle",
    "renew",
    "renewal_reason",
    "secret_manifest",
    "server_context",
    "service_names",
    "trusted_cas",
    "webhook_ca_bundles",
]

log = logging.getLogger("webhook.tls")

CA_DAYS = 3650
SERVING_DAYS = 365
RENEW_BEFORE = dt.timedelta(days=30)
CA_NAME = "corral-webhook-ca"  # the common name of the CAs corral makes
_SKEW = dt.timedelta(minutes=5)


def server_context() -> ssl.SSLContext:
    """A server context that refuses anything older than TLS 1.2."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_COMPRESSION
    return ctx


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    """A verifying client context that trusts ``ca_pem`` (demo, tests, bench)."""
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def load_pair(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Load an in-memory certificate and key into ``ctx`` (OpenSSL reads files only,
    so they pass through a private temporary directory that is removed at once)."""
    with tempfile.TemporaryDirectory(prefix="corral-tls-") as d:
        cert, key = Path(d, "tls.crt"), Path(d, "tls.key")
        cert.write_bytes(cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem)
        ctx.load_cert_chain(cert, key)


# --- reloading mounted files ------------------------------------------------------------

_Stamp = tuple[tuple[int, int, int], tuple[int, int, int]]


class CertReloader:
    """Keeps ``ctx`` on the current contents of ``cert_file`` and ``key_file``."""

    def __init__(
        self,
        ctx: ssl.SSLContext,
        cert_file: str | Path,
        key_file: str | Path,
        *,
        interval: float = 10.0,
        on_reload: Callable[[bool], None] | None = None,
    ) -> None:
        self.ctx = ctx
        self.cert_file, self.key_file = Path(cert_file), Path(key_file)
        self.interval = interval
        self._on_reload = on_reload
        self._loaded: _Stamp | None = None
        self._failed: _Stamp | None = None

    def _stamp(self) -> _Stamp:
        # stat() follows symlinks: a Secret volume swaps its ..data link on update,
        # which changes the inode we see.
        a, b = os.stat(self.cert_file), os.stat(self.key_file)
        return (a.st_ino, a.st_mtime_ns, a.st_size), (b.st_ino, b.st_mtime_ns, b.st_size)

    def load(self) -> None:
        """The first load; raises (ssl.SSLError, OSError) so a bad start is loud."""
        stamp = self._stamp()
        self.ctx.load_cert_chain(self.cert_file, self.key_file)
        self._loaded = stamp

    def check(self) -> bool | None:
        """Reload if the files changed: True on a reload, False on a failed one (the
        old certificate stays), None when nothing changed."""
        try:
            stamp = self._stamp()
        except OSError as e:
            if self._failed is None:
                log.warning(
                    "TLS files unreadable; keeping the loaded certificate",
                    extra={"fields": {"error": str(e)}},
                )
            return False
        if stamp == self._loaded or stamp == self._failed:
            return None
        try:
            self.ctx.load_cert_chain(self.cert_file, self.key_file)
        except (ssl.SSLError, OSError) as e:
            self._failed = stamp
            log.warning(
                "new TLS files do not load; keeping the loaded certificate",
                extra={"fields": {"cert": str(self.cert_file), "error": str(e)}},
            )
            self._notify(False)
            return False
        self._loaded, self._failed = stamp, None
        log.info("TLS certificate reloaded", extra={"fields": {"cert": str(self.cert_file)}})
        self._notify(True)
        return True

    def _notify(self, ok: bool) -> None:
        if self._on_reload is not None:
            self._on_reload(ok)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.check()


# --- self-signed certificates -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TlsBundle:
    """PEM bytes of a CA and of the serving certificate it signed."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes


def service_names(service: str, namespace: str) -> list[str]:
    """The DNS names the API server may use to reach a Service."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    now: dt.datetime,
    not_after: dt.datetime,
    *,
    ca: bool,
) -> x509.CertificateBuilder:
    """A certificate for ``key``, valid from a little before ``now``: a CA (signs
    certificates) or a leaf (signs nothing)."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )


def new_ca(now: dt.datetime, *, days: int = CA_DAYS, name: str = CA_NAME) -> tuple[bytes, bytes]:
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        _builder(subject, subject, key, now, now + dt.timedelta(days=days), ca=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return _pem_cert(cert), _pem_key(key)


def issue(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    names: Sequence[str],
    now: dt.datetime,
    *,
    ips: Sequence[str] = (),
    days: int = SERVING_DAYS,
) -> tuple[bytes, bytes]:
    """A serving certificate for ``names`` (and ``ips``) signed by the CA."""
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("CA key: expected an EC private key")
    key = _key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    not_after = min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    cert = (
        _builder(subject, ca_cert.subject, key, now, not_after, ca=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return _pem_cert(cert), _pem_key(key)


def new_bundle(
    service: str, namespace: str, now: dt.datetime, *, ips: Sequence[str] = ()
) -> TlsBundle:
    ca_cert, ca_key = new_ca(now)
    cert, key = issue(ca_cert, ca_key, service_names(service, namespace), now, ips=ips)
    return TlsBundle(ca_cert, ca_key, cert, key)


def _ca_reason(bundle: TlsBundle, now: dt.datetime, renew_before: dt.timedelta) -> str | None:
    try:
        ca = x509.load_pem_x509_certificate(bundle.ca_cert)
        ca_key = serialization.load_pem_private_key(bundle.ca_key, password=None)
    except ValueError as e:
        return f"CA unreadable: {e}"
    if ca.not_valid_after_utc - renew_before <= now:
        return "CA expires soon"
    if ca_key.public_key() != ca.public_key():
        return "CA key does not match the CA certificate"
    return None


def renewal_reason(
    bundle: TlsBundle,
    names: Sequence[str],
    now: dt.datetime,
    *,
    ips: Sequence[str] = (),
    renew_before: dt.timedelta = RENEW_BEFORE,
) -> str | None:
    """Why ``bundle`` must be renewed now, or None while it is good."""
    if (why := _ca_reason(bundle, now, renew_before)) is not None:
        return why
    ca = x509.load_pem_x509_certificate(bundle.ca_cert)
    try:
        cert = x509.load_pem_x509_certificate(bundle.cert)
        key = serialization.load_pem_private_key(bundle.key, password=None)
    except ValueError as e:
        return f"serving certificate unreadable: {e}"
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        return "serving certificate not issued by the CA"
    if key.public_key() != cert.public_key():
        return "serving key does not match the certificate"
    if cert.not_valid_after_utc - renew_before <= now:
        return "serving certificate expires soon"
    if cert.not_valid_before_utc > now + _SKEW:
        return "serving certificate not valid yet"
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "serving certificate has no subject alternative names"
    have_dns = set(san.get_values_for_type(x509.DNSName))
    have_ip = {str(i) for i in san.get_values_for_type(x509.IPAddress)}
    missing = [n for n in names if n not in have_dns] + [i for i in ips if i not in have_ip]
    if missing:
        return f"serving certificate lacks {', '.join(missing)}"
    return None


def renew(
    bundle: TlsBundle | None,
    service: str,
    namespace: str,
    now: dt.datetime,
    *,
    ips: Sequence[str] = (),
) -> TlsBundle:
    """A good bundle for the Service: ``bundle`` itself while it is good; else a new
    serving certificate from the same CA while the CA is good (so the caBundle the API
    server trusts stays valid); else a new CA too."""
    names = service_names(service, namespace)
    if bundle is not None:
        if renewal_reason(bundle, names, now, ips=ips) is None:
            return bundle
        if _ca_reason(bundle, now, RENEW_BEFORE) is None:
            cert, key = issue(bundle.ca_cert, bundle.ca_key, names, now, ips=ips)
            return TlsBundle(bundle.ca_cert, bundle.ca_key, cert, key)
    return new_bundle(service, namespace, now, ips=ips)


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


def ca_bundle_patch(
    webhook_config: Mapping[str, Any], ca_pem: bytes, service: str, namespace: str
) -> list[dict[str, Any]]:
    """JSON patch setting ``clientConfig.caBundle`` of every webhook in a
    MutatingWebhookConfiguration that calls ``service`` in ``namespace``; each change
    is guarded by a ``test`` of the webhook's name, so a concurrent edit that moved
    the webhooks makes the patch fail instead of touching the wrong one. ``[]`` when
    every bundle is already right."""
    want = _b64(ca_pem)
    ops: list[dict[str, Any]] = []
    webhooks = webhook_config.get("webhooks")
    if not isinstance(webhooks, list):
        return ops
    for i, wh in enumerate(webhooks):
        if not isinstance(wh, Mapping):
            continue
        cc = wh.get("clientConfig")
        svc = cc.get("service") if isinstance(cc, Mapping) else None
        if not isinstance(svc, Mapping):
            continue
        if svc.get("name") != service or svc.get("namespace") != namespace:
            continue
        assert isinstance(cc, Mapping)
        if cc.get("caBundle") == want:
            continue
        ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": wh.get("name")})
        ops.append(
            {
                "op": "replace" if "caBundle" in cc else "add",
                "path": f"/webhooks/{i}/clientConfig/caBundle",
                "value": want,
            }
        )
    return ops


def webhook_ca_bundles(
    webhook_config: Mapping[str, Any], service: str, namespace: str
) -> list[bytes] | None:
    """The caBundles (PEM; empty when unset or unreadable) of the webhooks that call
    ``service`` in ``namespace``; None when no webhook calls it."""
    webhooks = webhook_config.get("webhooks")
    if not isinstance(webhooks, list):
        return None
    out: list[bytes] | None = None
    for wh in webhooks:
        cc = wh.get("clientConfig") if isinstance(wh, Mapping) else None
        svc = cc.get("service") if isinstance(cc, Mapping) else None
        if not isinstance(svc, Mapping):
            continue
        if svc.get("name") != service or svc.get("namespace") != namespace:
            continue
        assert isinstance(cc, Mapping)
        out = out if out is not None else []
        try:
            out.append(base64.b64decode(cc.get("caBundle") or "", validate=True))
        except (TypeError, ValueError):
            out.append(b"")
    return out


def _certs(pem: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        return []


def _is_corral_ca(cert: x509.Certificate) -> bool:
    try:
        bc = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return False
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return bc.ca and any(n.value == CA_NAME for n in names)


def trusted_cas(
    want: bytes,
    have: Sequence[bytes],
    now: dt.datetime,
    *,
    renew_before: dt.timedelta = RENEW_BEFORE,
) -> bytes:
    """The caBundle to publish: the CAs of ``want`` (PEM), then those of ``have`` (the
    bundles published now) that corral made, that have not expired and that are within
    ``renew_before`` of their end -- the CA a regular renewal replaced, which replicas
    still serving its certificates need until they switch. A CA replaced early (its
    Secret deleted or damaged) is dropped at once, and anything else is dropped."""
    out = [want.rstrip(b"\n") + b"\n"] if want.strip() else []
    seen = {c.fingerprint(hashes.SHA256()) for c in _certs(want)}
    for pem in have:
        for c in _certs(pem):
            fp = c.fingerprint(hashes.SHA256())
            end = c.not_valid_after_utc
            if fp in seen or not _is_corral_ca(c) or end <= now or end - renew_before > now:
                continue
            seen.add(fp)
            out.append(_pem_cert(c))
    return b"".join(out)


class CertStore(Protocol):
    """Where a self-signed bundle lives and how its CA reaches the API server.
    :class:`webhook.kube.SecretCertStore` keeps it in a Secret and the webhook configuration."""

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


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class SelfSignedManager:
    """Keeps a self-signed bundle good: loads it from the store, renews it before it
    expires, serves it from the live SSLContext, and publishes the CA.

    :meth:`run` looks at the store every ``check_interval`` seconds (another replica may
    have renewed). The CA is published when the bundle changed, every
    ``republish_interval`` seconds (a re-applied webhook configuration may have lost
    it), and -- after a failure -- every ``retry_interval`` seconds until it succeeds."""

    def __init__(
        self,
        ctx: ssl.SSLContext,
        store: CertStore,
        service: str,
        namespace: str,
        *,
        ips: Sequence[str] = (),
        check_interval: float = 3600.0,
        retry_interval: float = 10.0,
        republish_interval: float = 600.0,
        clock: Callable[[], dt.datetime] = _now,
        on_reload: Callable[[bool], None] | None = None,
    ) -> None:
        self.ctx, self.store = ctx, store
        self.service, self.namespace = service, namespace
        self.ips = tuple(ips)
        self.check_interval = check_interval
        self.retry_interval = retry_interval
        self.republish_interval = dt.timedelta(seconds=republish_interval)
        self.clock = clock
        self._on_reload = on_reload
        self.bundle: TlsBundle | None = None
        self.published_at: dt.datetime | None = None  # None: never, or the last one failed

    async def ensure(self) -> bool:
        """Make sure a good bundle is stored, served and published; True if it changed.
        Raises if any step fails; when only publishing failed, :attr:`bundle` is served
        all the same and the next call publishes again."""
        stored = await self.store.load()
        now = self.clock()
        fresh = renew(stored, self.service, self.namespace, now, ips=self.ips)
        changed = fresh is not stored
        if changed:
            fresh = await self.store.save(fresh)
        previous = self.bundle
        if fresh != previous:
            load_pair(self.ctx, fresh.cert, fresh.key)
            if previous is not None and self._on_reload is not None:
                self._on_reload(True)
            self.bundle = fresh
            log.info("self-signed certificate in use", extra={"fields": {"renewed": changed}})
        due = (
            changed
            or fresh != previous
            or self.published_at is None
            or now - self.published_at >= self.republish_interval
        )
        if due:
            ca_bundle = fresh.ca_cert
            for old in (stored, previous):
                if old is not None and old.ca_cert not in ca_bundle:
                    # Trust old and new CA while connections switch over.
                    ca_bundle += old.ca_cert
            self.published_at = None
            await self.store.publish_ca(ca_bundle)
            self.published_at = now
        return changed

    async def run(self) -> None:
        while True:
            ok = self.published_at is not None
            await asyncio.sleep(
                self.check_interval if ok else min(self.check_interval, self.retry_interval)
            )
            try:
                await self.ensure()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.error(
                    "certificate renewal or publication failed; will retry",
                    extra={"fields": {"error": str(e)}},
                )
                if self._on_reload is not None:
                    self._on_reload(False)
