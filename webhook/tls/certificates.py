"""Making and checking the self-signed certificates: a CA, a serving certificate it
signs for the Service's DNS names (with ``cryptography``), and when to renew them.

:func:`new_bundle` makes a CA and a serving certificate; :func:`renewal_reason` says
when a bundle must be renewed (expiry near, names changed, CA near its end);
:func:`renew` renews it, keeping the CA while the CA is good. Where a bundle is kept is
:mod:`webhook.tls.store`; the loop that keeps it good is :mod:`webhook.tls.rotation`.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CA_NAME",
    "RENEW_BEFORE",
    "TlsBundle",
    "issue",
    "new_bundle",
    "new_ca",
    "renew",
    "renewal_reason",
    "service_names",
]

CA_DAYS = 3650
SERVING_DAYS = 365
RENEW_BEFORE = dt.timedelta(days=30)
CA_NAME = "corral-webhook-ca"  # the common name of the CAs corral makes
_SKEW = dt.timedelta(minutes=5)


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
