"""Certificates that rotate without a restart: both loops keep the *live* SSLContext on
the current certificate, so new handshakes get the new one and open connections keep
theirs.

* Mounted certificates (``--tls-cert-file``/``--tls-key-file``, as cert-manager
  writes them): :class:`CertReloader` polls the files' inode, mtime and size and loads
  a changed pair. A half-rotated pair (new cert, old key) fails to load and the old one
  stays until the pair matches.
* Self-signed (``--self-signed``): :class:`SelfSignedManager` loads the bundle from a
  :class:`~webhook.tls.store.CertStore`, renews it before it expires, serves it and
  publishes its CA.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path

from webhook.tls.certificates import TlsBundle, renew
from webhook.tls.contexts import load_pair
from webhook.tls.store import CertStore

__all__ = ["CertReloader", "SelfSignedManager"]

# The name the webhook has always logged its certificate records under.
log = logging.getLogger(__name__)

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
