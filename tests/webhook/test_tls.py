"""Self-signed certificates (names, renewal, the Secret and caBundle contents) and the
live reload of mounted certificate files."""

from __future__ import annotations

import base64
import datetime as dt
import ssl
from pathlib import Path

import jsonpatch
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from webhook.tls.ca_bundle import ca_bundle_patch
from webhook.tls.certificates import (
    TlsBundle,
    issue,
    new_bundle,
    renew,
    renewal_reason,
    service_names,
)
from webhook.tls.contexts import server_context
from webhook.tls.rotation import CertReloader, SelfSignedManager
from webhook.tls.store import MemoryCertStore, bundle_from_secret, secret_manifest

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
NAMES = service_names("corral-webhook", "corral-system")


def cert_of(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def test_service_names() -> None:
    assert NAMES == [
        "corral-webhook",
        "corral-webhook.corral-system",
        "corral-webhook.corral-system.svc",
        "corral-webhook.corral-system.svc.cluster.local",
    ]


def test_new_bundle() -> None:
    b = new_bundle("corral-webhook", "corral-system", NOW, ips=["127.0.0.1"])
    ca, cert = cert_of(b.ca_cert), cert_of(b.cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == NAMES
    assert [str(i) for i in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    cert.verify_directly_issued_by(ca)
    assert cert.not_valid_after_utc == NOW + dt.timedelta(days=365)
    assert renewal_reason(b, NAMES, NOW, ips=["127.0.0.1"]) is None
    # it loads into a server context and a client trusting the CA would accept it
    ctx = server_context()
    ctx.load_verify_locations(cadata=b.ca_cert.decode())


def test_renewal_reasons() -> None:
    b = new_bundle("corral-webhook", "corral-system", NOW)
    assert renewal_reason(b, NAMES, NOW + dt.timedelta(days=300)) is None
    assert (
        renewal_reason(b, NAMES, NOW + dt.timedelta(days=340)) == "serving certificate expires soon"
    )
    other = service_names("webhook2", "corral-system")
    assert "lacks webhook2" in (renewal_reason(b, other, NOW) or "")
    assert renewal_reason(b, NAMES, NOW + dt.timedelta(days=3640)) == "CA expires soon"
    stranger = new_bundle("corral-webhook", "corral-system", NOW)
    mixed = TlsBundle(b.ca_cert, b.ca_key, stranger.cert, stranger.key)
    assert renewal_reason(mixed, NAMES, NOW) == "serving certificate not issued by the CA"
    wrong_key = TlsBundle(b.ca_cert, b.ca_key, b.cert, stranger.key)
    assert renewal_reason(wrong_key, NAMES, NOW) == "serving key does not match the certificate"
    garbage = TlsBundle(b.ca_cert, b.ca_key, b"not a cert", b.key)
    assert (renewal_reason(garbage, NAMES, NOW) or "").startswith("serving certificate unreadable")


def test_renew_keeps_a_good_ca() -> None:
    b = new_bundle("corral-webhook", "corral-system", NOW)
    assert renew(b, "corral-webhook", "corral-system", NOW) is b
    later = NOW + dt.timedelta(days=340)
    r = renew(b, "corral-webhook", "corral-system", later)
    assert r.ca_cert == b.ca_cert and r.cert != b.cert
    assert renewal_reason(r, NAMES, later) is None
    much_later = NOW + dt.timedelta(days=3640)
    r2 = renew(r, "corral-webhook", "corral-system", much_later)
    assert r2.ca_cert != b.ca_cert
    assert renewal_reason(r2, NAMES, much_later) is None


def test_serving_cert_never_outlives_its_ca() -> None:
    b = new_bundle("corral-webhook", "corral-system", NOW)
    late = NOW + dt.timedelta(days=3600)
    cert, _ = issue(b.ca_cert, b.ca_key, NAMES, late)
    assert cert_of(cert).not_valid_after_utc == cert_of(b.ca_cert).not_valid_after_utc


def test_secret_round_trip() -> None:
    b = new_bundle("corral-webhook", "corral-system", NOW)
    s = secret_manifest(b, "corral-webhook-tls", "corral-system")
    assert s["type"] == "kubernetes.io/tls"
    assert s["metadata"] == {
        "name": "corral-webhook-tls",
        "namespace": "corral-system",
        "labels": {"app.kubernetes.io/managed-by": "corral"},
    }
    assert set(s["data"]) == {"tls.crt", "tls.key", "ca.crt", "ca.key"}
    assert base64.b64decode(s["data"]["tls.crt"]) == b.cert
    assert bundle_from_secret(s) == b
    assert bundle_from_secret({"data": {"tls.crt": "x"}}) is None
    assert bundle_from_secret({"data": {**s["data"], "tls.key": "!!"}}) is None
    assert bundle_from_secret({}) is None


def test_ca_bundle_patch() -> None:
    old = base64.b64encode(b"old").decode()
    mwc = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "corral"},
        "webhooks": [
            {
                "name": "other.example.com",
                "clientConfig": {"service": {"name": "x", "namespace": "y"}},
            },
            {
                "name": "pods.corral.dev",
                "clientConfig": {
                    "service": {"name": "corral-webhook", "namespace": "corral-system"},
                    "caBundle": old,
                },
            },
            {
                "name": "jobs.corral.dev",
                "clientConfig": {
                    "service": {"name": "corral-webhook", "namespace": "corral-system"}
                },
            },
            {"name": "url.example.com", "clientConfig": {"url": "https://x"}},
        ],
    }
    ops = ca_bundle_patch(mwc, b"PEM", "corral-webhook", "corral-system")
    want = base64.b64encode(b"PEM").decode()
    assert ops == [
        {"op": "test", "path": "/webhooks/1/name", "value": "pods.corral.dev"},
        {"op": "replace", "path": "/webhooks/1/clientConfig/caBundle", "value": want},
        {"op": "test", "path": "/webhooks/2/name", "value": "jobs.corral.dev"},
        {"op": "add", "path": "/webhooks/2/clientConfig/caBundle", "value": want},
    ]
    patched = jsonpatch.apply_patch(mwc, ops)
    assert "caBundle" not in patched["webhooks"][0]["clientConfig"]
    assert ca_bundle_patch(patched, b"PEM", "corral-webhook", "corral-system") == []
    # a reordered configuration makes the guarded patch fail instead of hitting another webhook
    w = mwc["webhooks"]
    swapped = dict(mwc, webhooks=[w[0], w[2], w[1], w[3]])
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(swapped, ops)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> dt.datetime:
        return self.now


async def test_self_signed_manager_lifecycle() -> None:
    store = MemoryCertStore()
    clock = Clock()
    reloads: list[bool] = []
    ctx = server_context()
    m = SelfSignedManager(
        ctx, store, "corral-webhook", "corral-system", clock=clock, on_reload=reloads.append
    )
    assert await m.ensure() is True
    first = store.bundle
    assert first is not None and store.published == first.ca_cert
    assert await m.ensure() is False  # still good: nothing changes
    assert store.bundle is first and reloads == []
    clock.now = NOW + dt.timedelta(days=340)
    assert await m.ensure() is True  # serving certificate renewed, same CA
    assert store.bundle is not None and store.bundle.ca_cert == first.ca_cert
    assert store.bundle.cert != first.cert and reloads == [True]
    clock.now = NOW + dt.timedelta(days=3640)
    assert await m.ensure() is True  # CA renewed: the API server trusts both for a while
    assert store.bundle.ca_cert != first.ca_cert
    assert store.published == store.bundle.ca_cert + first.ca_cert


async def test_self_signed_manager_adopts_what_another_replica_stored() -> None:
    winner = new_bundle("corral-webhook", "corral-system", dt.datetime.now(dt.UTC))

    class Racing(MemoryCertStore):
        async def save(self, bundle: TlsBundle) -> TlsBundle:
            self.bundle = winner
            return winner

    store = Racing()
    m = SelfSignedManager(server_context(), store, "corral-webhook", "corral-system")
    await m.ensure()
    assert m.bundle == winner and store.published == winner.ca_cert


def write_pair(folder: Path, b: TlsBundle, *, cert: bool = True, key: bool = True) -> None:
    # Like a Secret volume: write new files aside, then rename over (new inodes).
    for name, data, do in (("tls.crt", b.cert, cert), ("tls.key", b.key, key)):
        if do:
            tmp = folder / f".{name}.tmp"
            tmp.write_bytes(data)
            tmp.replace(folder / name)


def test_cert_reloader(tmp_path: Path) -> None:
    a = new_bundle("corral-webhook", "corral-system", NOW)
    b = renew(a, "corral-webhook", "corral-system", NOW + dt.timedelta(days=340))
    write_pair(tmp_path, a)
    ctx = server_context()
    events: list[bool] = []
    r = CertReloader(ctx, tmp_path / "tls.crt", tmp_path / "tls.key", on_reload=events.append)
    r.load()
    assert r.check() is None
    # half-rotated: new certificate, old key -- refused, the old pair stays
    write_pair(tmp_path, b, key=False)
    assert r.check() is False
    assert r.check() is None  # the same broken files are not retried in a loop
    write_pair(tmp_path, b, cert=False)
    assert r.check() is True
    assert events == [False, True]
    (tmp_path / "tls.key").unlink()
    assert r.check() is False


def test_tls_12_is_the_floor() -> None:
    ctx = server_context()
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2


def test_trusted_cas_keep_a_renewed_corral_ca_until_it_expires() -> None:
    from webhook.tls.ca_bundle import trusted_cas
    from webhook.tls.certificates import new_ca

    current, _ = new_ca(NOW)
    # a CA that a regular renewal replaced: within 30 days of its end
    renewed, _ = new_ca(NOW - dt.timedelta(days=3630))
    # a CA replaced early (its Secret deleted): years left
    early, _ = new_ca(NOW - dt.timedelta(days=10))
    expired, _ = new_ca(NOW - dt.timedelta(days=3700))
    foreign, _ = new_ca(NOW, name="someone-else")
    have = [renewed + early, expired + foreign, b"not a certificate", b""]
    got = x509.load_pem_x509_certificates(trusted_cas(current, have, NOW))
    assert got == [x509.load_pem_x509_certificate(c) for c in (current, renewed)]
    # the current CA is not repeated, and nothing is kept once the old one expired
    later = NOW + dt.timedelta(days=40)
    again = trusted_cas(current, [current + renewed], later)
    assert x509.load_pem_x509_certificates(again) == [x509.load_pem_x509_certificate(current)]


async def test_a_manager_serves_while_publishing_fails_and_retries() -> None:
    class Failing(MemoryCertStore):
        fail = True

        async def publish_ca(self, ca_bundle: bytes) -> None:
            if self.fail:
                raise RuntimeError("no webhook configuration yet")
            await super().publish_ca(ca_bundle)

    store = Failing()
    m = SelfSignedManager(server_context(), store, "corral-webhook", "corral-system")
    with pytest.raises(RuntimeError):
        await m.ensure()
    assert m.bundle is not None and m.published_at is None
    store.fail = False
    assert await m.ensure() is False  # nothing new to store; published this time
    assert m.published_at is not None and store.published == m.bundle.ca_cert
