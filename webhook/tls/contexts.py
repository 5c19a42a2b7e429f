"""TLS contexts for the webhook: TLS 1.2 or newer only, and certificates loaded from
memory into a live context."""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

__all__ = ["client_context", "load_pair", "server_context"]


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
