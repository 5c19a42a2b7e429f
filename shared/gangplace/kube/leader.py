"""Leader election on a coordination.k8s.io/v1 Lease.

The algorithm is the one Kubernetes controllers use: a candidate takes the Lease when
its holder has not renewed it for ``leaseDurationSeconds``, as measured on the
candidate's own clock from the moment it *observed* the last change (so clocks of
different machines need not agree); every write carries the resourceVersion it read, so
of two candidates racing for an expired Lease exactly one wins (the other gets 409).

Safety comes from the leader giving up first: it counts itself leader only until
``renew_deadline`` after the *start* of its last successful renewal, and
``renew_deadline < lease_duration``. A renewal that hangs is cut off at that deadline,
the leader's work is cancelled, and only then may another candidate's wait run out.

kubernetes-asyncio ships a leader-election module, but it is not used here: its timings
must each be at least a second, cancelling its ``run()`` leaves the leader's task
running, an unreachable API server raises out of it, a hanging renewal extends
leadership past the deadline, and it neither releases the Lease on shutdown nor
campaigns again after losing it. Each of those is a way for two leaders to overlap or
for failover to stall, which is what this module exists to prevent.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from gangplace.kube.client import REQUEST_ERRORS, TRANSIENT_ERRORS, ApiError, KubeClient
from gangplace.kube.resources import LEASES

__all__ = ["LeaderElector"]

log = logging.getLogger(__name__)


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate for the Lease ``namespace/name``.

    ``await elector.run(work)`` campaigns until it holds the Lease, runs ``work()`` while
    it leads, cancels it the moment leadership cannot be confirmed, and campaigns again
    (unless ``once``). Cancelling ``run`` stops the work first, then releases the Lease so
    another candidate takes over at once. :attr:`is_leader` is exact at any instant and
    is what side effects should check (the evictor's ``guard``).
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_stop: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not name or not namespace or not identity:
            raise ValueError("leader election: name, namespace and identity are required")
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError(
                "leader election: need 0 < retry_period < renew_deadline < lease_duration, got "
                f"{retry_period}, {renew_deadline}, {lease_duration}"
            )
        if lease_duration < 1:
            raise ValueError(
                f"leader election: lease_duration must be >= 1s (the Lease counts whole "
                f"seconds), got {lease_duration}"
            )
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_stop = release_on_stop
        self._clock = clock
        self._rng = random.Random()
        self._valid_until = 0.0
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._lease: dict[str, Any] | None = None  # as last read or written
        self.terms = 0  # how many times this candidate became leader

    # --- state ------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._clock() < self._valid_until

    @property
    def leader(self) -> str:
        """The holder of the Lease as last observed ('' if none)."""
        if self.is_leader:
            return self.identity
        spec = (self._lease or {}).get("spec") or {}
        return str(spec.get("holderIdentity") or "")

    # --- running ----------------------------------------------------------------------

    async def run(
        self,
        work: Callable[[], Awaitable[None]],
        *,
        on_stopped: Callable[[], None] | None = None,
        once: bool = False,
    ) -> None:
        """Lead and run ``work`` until cancelled (or, with ``once``, until the first term
        ends). If ``work`` returns, the Lease is released and ``run`` returns; if it
        raises, the Lease is released and the error propagates."""
        while True:
            await self._acquire()
            self.terms += 1
            log.info("%s: became leader of lease %s/%s", self.identity, self.namespace, self.name)
            task = asyncio.create_task(_call(work), name=f"leader work {self.identity}")
            finished = lost = False
            try:
                finished = await self._renew_until_lost(task)
                lost = not finished
            finally:
                self._valid_until = 0.0
                if not task.done():
                    task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                log.info("%s: stopped leading", self.identity)
                if on_stopped is not None:
                    on_stopped()
                if self.release_on_stop and not lost:
                    await self._release()
            if finished:
                task.result()  # re-raise the work's error, if any
                return
            if once:
                return

    async def _acquire(self) -> None:
        while True:
            start = self._clock()
            if await self._try_acquire_or_renew(start):
                return
            await asyncio.sleep(self.retry_period * (1 + 0.2 * self._rng.random()))

    async def _renew_until_lost(self, task: asyncio.Task[None]) -> bool:
        """Renew every ``retry_period``; True when the work finished, False when
        leadership was lost."""
        while True:
            wait = min(self.retry_period, max(0.0, self._valid_until - self._clock()))
            done, _ = await asyncio.wait({task}, timeout=wait)
            if done:
                return True
            start = self._clock()
            remaining = self._valid_until - start
            if remaining <= 0:
                log.warning(
                    "%s: lease not renewed within %.1fs", self.identity, self.renew_deadline
                )
                return False
            try:
                async with asyncio.timeout(remaining):
                    await self._try_acquire_or_renew(start)
            except TimeoutError:
                pass
            if not self.is_leader:
                log.warning("%s: lost the lease", self.identity)
                return False

    # --- the Lease --------------------------------------------------------------------

    def _observe(self, lease: dict[str, Any]) -> None:
        spec = lease.get("spec") or {}
        record = (
            spec.get("holderIdentity"),
            spec.get("renewTime"),
            spec.get("acquireTime"),
            spec.get("leaseTransitions"),
            (lease.get("metadata") or {}).get("resourceVersion"),
        )
        self._lease = lease
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock()

    def _spec(self, old: dict[str, Any]) -> dict[str, Any]:
        now = _micro_time()
        ours = old.get("holderIdentity") == self.identity
        transitions = int(old.get("leaseTransitions") or 0)
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": math.ceil(self.lease_duration),
            "acquireTime": old.get("acquireTime") if ours and old.get("acquireTime") else now,
            "renewTime": now,
            "leaseTransitions": transitions if ours or not old else transitions + 1,
        }

    async def _try_acquire_or_renew(self, start: float) -> bool:
        """One attempt; ``start`` is when it began (leadership counts from there)."""
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
        except ApiError as e:
            if e.status != 404:
                log.warning("%s: reading lease: %s", self.identity, e)
                return False
            return await self._create(start)
        except TRANSIENT_ERRORS as e:
            log.warning("%s: reading lease: %s", self.identity, e)
            return False
        self._observe(lease)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        duration = int(spec.get("leaseDurationSeconds") or math.ceil(self.lease_duration))
        if holder and holder != self.identity and self._observed_at + duration > self._clock():
            return False
        meta = lease.get("metadata") or {}
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "resourceVersion": meta.get("resourceVersion"),
            },
            "spec": self._spec(spec),
        }
        try:
            updated = await self.client.replace(LEASES, self.name, body, namespace=self.namespace)
        except REQUEST_ERRORS as e:
            log.debug("%s: updating lease: %s", self.identity, e)
            return False
        self._observe(updated)
        self._valid_until = start + self.renew_deadline
        return True

    async def _create(self, start: float) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": self._spec({}),
        }
        try:
            created = await self.client.create(LEASES, body, namespace=self.namespace)
        except REQUEST_ERRORS as e:
            log.debug("%s: creating lease: %s", self.identity, e)
            return False
        self._observe(created)
        self._valid_until = start + self.renew_deadline
        return True

    async def _release(self) -> None:
        """Hand the Lease back (holder cleared) if it is still ours as we last wrote it;
        the resourceVersion guard makes this a no-op if anyone else wrote since."""
        lease = self._lease or {}
        spec = dict(lease.get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            return
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time())
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                **lease.get("metadata", {}),
                "name": self.name,
                "namespace": self.namespace,
            },
            "spec": spec,
        }
        try:
            async with asyncio.timeout(self.renew_deadline):
                released = await self.client.replace(
                    LEASES, self.name, body, namespace=self.namespace
                )
            self._observe(released)
            log.info("%s: released lease %s/%s", self.identity, self.namespace, self.name)
        except REQUEST_ERRORS as e:  # includes a timeout
            log.warning("%s: could not release lease: %s", self.identity, e)


async def _call(work: Callable[[], Awaitable[None]]) -> None:
    await work()
