"""A throwaway certificate authority and server certificate for 127.0.0.1, so the
in-memory API server can serve HTTPS as a real cluster does (in-cluster configuration
always uses TLS with the service account's CA bundle). The certificates come from the
webhook's own certificate code."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

from webhook.tls.certificates import issue, new_ca

__all__ = ["server_tls"]


def server_tls(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """A server SSL context for 127.0.0.1 and the path of the CA certificate (PEM) that
    verifies it. Files are written under ``directory``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_cert, ca_key = new_ca(now, days=1, name="corral-test-ca")
    cert, key = issue(ca_cert, ca_key, ["localhost"], now, ips=["127.0.0.1"], days=1)
    directory.mkdir(parents=True, exist_ok=True)
    ca_path = directory / "ca.crt"
    cert_path, key_path = directory / "server.crt", directory / "server.key"
    ca_path.write_bytes(ca_cert)
    cert_path.write_bytes(cert)
    key_path.write_bytes(key)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert_path, key_path)
    return ctx, ca_path
