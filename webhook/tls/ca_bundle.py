"""What the webhook configuration should trust: the ``caBundle`` of the webhooks that
call the webhook's Service, which CAs it should hold during a CA renewal, and the
guarded JSON patch that puts them there."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

from webhook.tls.certificates import CA_NAME, RENEW_BEFORE

__all__ = ["ca_bundle_patch", "trusted_cas", "webhook_ca_bundles"]


def _calling(
    webhook_config: Mapping[str, Any], service: str, namespace: str
) -> Iterator[tuple[int, Mapping[str, Any], Mapping[str, Any]]]:
    """(index, webhook, clientConfig) of each webhook of a MutatingWebhookConfiguration
    that calls ``service`` in ``namespace``; malformed entries are passed over."""
    webhooks = webhook_config.get("webhooks")
    if not isinstance(webhooks, list):
        return
    for i, wh in enumerate(webhooks):
        cc = wh.get("clientConfig") if isinstance(wh, Mapping) else None
        svc = cc.get("service") if isinstance(cc, Mapping) else None
        if not isinstance(svc, Mapping):
            continue
        if svc.get("name") == service and svc.get("namespace") == namespace:
            assert isinstance(wh, Mapping) and isinstance(cc, Mapping)
            yield i, wh, cc


def ca_bundle_patch(
    webhook_config: Mapping[str, Any], ca_pem: bytes, service: str, namespace: str
) -> list[dict[str, Any]]:
    """JSON patch setting ``clientConfig.caBundle`` of every webhook in a
    MutatingWebhookConfiguration that calls ``service`` in ``namespace``; each change
    is guarded by a ``test`` of the webhook's name, so a concurrent edit that moved
    the webhooks makes the patch fail instead of touching the wrong one. ``[]`` when
    every bundle is already right."""
    want = base64.b64encode(ca_pem).decode()
    ops: list[dict[str, Any]] = []
    for i, wh, cc in _calling(webhook_config, service, namespace):
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
    out: list[bytes] | None = None
    for _, _, cc in _calling(webhook_config, service, namespace):
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
            out.append(c.public_bytes(serialization.Encoding.PEM))
    return b"".join(out)
