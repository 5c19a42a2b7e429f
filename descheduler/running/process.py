"""``corral-descheduler run``: the process around the runner.

- ``--once`` (a CronJob): sync the informers, make one plan, carry it out, print the
  report (text or ``--output json``), exit 0, or 1 when evictions failed. It runs
  without leader election: the CronJob's ``concurrencyPolicy: Forbid`` already keeps
  runs apart, and a Lease would only make a run wait for a crashed run's Lease to
  expire. With ``--lease-name`` it takes the Lease first, and when another replica
  holds it, it does nothing and exits 0. When it loses the Lease mid-run (a renewal
  failed, another replica took it), the gang being moved is finished, no other is
  begun, and it exits 0 if it had done nothing yet, else 3 (1 if evictions failed),
  with the report of what it did.
- ``--interval D`` (a Deployment): every replica keeps its informers synced (a standby
  takes over at once); only the holder of the Lease ``--lease-namespace/--lease-name``
  plans and evicts, and every request of the evictor checks that it still holds it.
  ``/healthz`` (alive, with the loop's state as JSON), ``/readyz`` (informers synced)
  and ``/metrics`` are served on ``--metrics-host:--metrics-port``.

SIGTERM or SIGINT: the gang being evicted is finished (a gang is never left half
evicted by a shutdown or a lost Lease), no other is started, the Lease is released
so a standby takes over at once, and the process exits 0. Logs are JSON lines on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import orjson
from aiohttp import web
from gangplace.engine.timeparse import format_time
from gangplace.health import health_app
from gangplace.kube import REQUEST_ERRORS, KubeClient, LeaderElector, new_client
from gangplace.kube.kubeconfig import SERVICE_ACCOUNT_DIR
from prometheus_client import generate_latest

from descheduler.config import DeschedulerConfig
from descheduler.running.cluster_view import ClusterView
from descheduler.running.kube_io import KubeIO
from descheduler.running.metrics import DeschedulerMetrics
from descheduler.running.run_report import render_run
from descheduler.running.runner import (
    EXIT_FAILED,
    EXIT_OK,
    RunnerPort,
    RunResult,
    run_loop,
    run_once,
)

__all__ = ["DEFAULT_LEASE", "EXIT_LEASE_LOST", "RunOptions", "default_namespace", "run_descheduler"]

log = logging.getLogger(__name__)

DEFAULT_LEASE = "corral-descheduler"
DEFAULT_NAMESPACE = "corral-system"
# ``run --once`` lost the Lease part way through a run that had begun to move gangs.
EXIT_LEASE_LOST = 3


def default_namespace(service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> str:
    """The pod's namespace: ``POD_NAMESPACE`` (the downward API), else the namespace of
    its service account, else corral-system."""
    env = os.environ.get("POD_NAMESPACE")
    if env:
        return env
    try:
        ns = (service_account_dir / "namespace").read_text().strip()
    except OSError:
        ns = ""
    return ns or DEFAULT_NAMESPACE


@dataclass(slots=True)
class RunOptions:
    once: bool = True
    interval: float = 600.0
    dry_run: bool = False
    kubeconfig: str | None = None
    lease_name: str | None = None
    lease_namespace: str = field(default_factory=default_namespace)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8080
    sync_timeout: float = 120.0
    shutdown_grace: float = 25.0
    output: str = "text"
    identity: str = ""
    backoff_initial: float = 1.0  # the evictor's first retry delay (tests make it short)


@dataclass(slots=True)
class _Status:
    identity: str
    started: float = field(default_factory=time.time)
    leader: Callable[[], bool] = lambda: True
    synced: Callable[[], bool] = lambda: False
    runs: int = 0
    last_run: str = ""
    last_exit_code: int | None = None
    last_error: str = ""
    stopping: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": "stopping" if self.stopping else "ok",
            "identity": self.identity,
            "leader": self.leader(),
            "synced": self.synced(),
            "runs": self.runs,
            "last_run": self.last_run or None,
            "last_exit_code": self.last_exit_code,
            "last_error": self.last_error or None,
        }


def _http_app(metrics: DeschedulerMetrics, status: _Status) -> web.Application:
    """``/healthz`` answers the loop's state, ``/readyz`` whether the informers are
    synced, ``/metrics`` the runner's metrics with the leader gauge as it is now."""

    def render() -> bytes:
        metrics.leader.set(1 if status.leader() else 0)
        return generate_latest(metrics.registry)

    def not_ready() -> str | None:
        return None if status.synced() else "informers not synced"

    return health_app(metrics=render, not_ready=not_ready, status=status.to_dict)


def _summary(result: RunResult) -> dict[str, Any]:
    p = result.plan
    return {
        "plan": p.plan_id,
        "moves": len(p.moves),
        "pods_evicted": result.pods_evicted,
        "gpus_freed": result.gpus_freed,
        "statuses": {s: result.count(s) for s in {o.status for o in result.outcomes}},
        "waiting_before": len(p.waiting_before),
        "waiting_after": len(p.waiting_after),
        "fragmentation_before": round(p.fragmentation_before, 3),
        "fragmentation_after": round(p.fragmentation_after, 3),
        "plan_seconds": round(result.plan_seconds, 3),
        "exit_code": result.exit_code,
        "stopped": result.stopped,
    }


class _Process:
    def __init__(
        self,
        opts: RunOptions,
        config: DeschedulerConfig,
        client: KubeClient,
        *,
        clock: Callable[[], datetime],
        stop: asyncio.Event,
        out: TextIO,
    ) -> None:
        self.opts = opts
        self.config = config
        self.client = client
        self.stop = stop
        self.out = out
        self.signal = ""
        self.dry_run = opts.dry_run or config.runner.dry_run
        self.identity = opts.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.metrics = DeschedulerMetrics()
        self.view = ClusterView(client, config, ledger_namespace=opts.lease_namespace)
        self.elector: LeaderElector | None = None
        if opts.lease_name:
            self.elector = LeaderElector(
                client,
                name=opts.lease_name,
                namespace=opts.lease_namespace,
                identity=self.identity,
                lease_duration=opts.lease_duration,
                renew_deadline=opts.renew_deadline,
                retry_period=opts.retry_period,
            )
        self.status = _Status(self.identity, leader=self.leading, synced=lambda: self.view.synced)
        # Held by the runner while it moves one gang; a lost Lease waits for it.
        self.gang_lock = asyncio.Lock()
        self.kio = KubeIO(
            client,
            self.view,
            config,
            clock=clock,
            is_leader=self.leading,
            interrupted=self.interrupted,
            ledger_namespace=opts.lease_namespace,
            backoff_initial=opts.backoff_initial,
        )
        self.kio.gang_lock = self.gang_lock

    def io(self) -> RunnerPort:
        return self.kio

    async def _as_leader(self, work: Callable[[], Awaitable[None]]) -> None:
        """``work`` as the elector's work. A lost Lease cancels it; the cancellation
        waits for the gang being moved to be finished (the gang lock), so no gang is
        left half evicted; it then cuts whatever else the work is doing (a wait, the
        settling of suspensions): the runner begins no gang without the lock."""
        inner: asyncio.Future[None] = asyncio.ensure_future(work())
        try:
            await asyncio.shield(inner)
        except asyncio.CancelledError:
            try:
                if not inner.done():
                    async with self.gang_lock:
                        inner.cancel()
            finally:
                inner.cancel()
                await asyncio.gather(inner, return_exceptions=True)
            raise

    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader

    def interrupted(self) -> str | None:
        return f"{self.signal or 'stop'} received" if self.stop.is_set() else None

    def on_result(self, result: RunResult) -> None:
        self.metrics.observe(result)
        self.status.runs += 1
        self.status.last_run = format_time(datetime.now(UTC))
        self.status.last_exit_code = result.exit_code
        self.status.last_error = ""
        level = logging.INFO if result.exit_code == EXIT_OK else logging.ERROR
        log.log(level, "run finished", extra={"fields": _summary(result)})
        for u in result.plan.unserved:
            log.info("waiting gang not served", extra={"fields": {"gang": u.gang, "why": u.reason}})

    def on_error(self, e: BaseException) -> None:
        self.metrics.error()
        self.status.runs += 1
        self.status.last_run = format_time(datetime.now(UTC))
        self.status.last_exit_code = EXIT_FAILED
        self.status.last_error = f"{type(e).__name__}: {e}"

    async def _until_stop(self, aw: Any) -> bool:
        """Await ``aw`` unless a stop comes first; False when stopped."""
        task = asyncio.ensure_future(aw)
        stopper = asyncio.ensure_future(self.stop.wait())
        try:
            done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if task in done:
            task.result()
            return True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False

    async def run(self) -> int:
        http: web.AppRunner | None = None
        try:
            if not self.opts.once:  # first, so that probes are answered while it syncs
                http = web.AppRunner(_http_app(self.metrics, self.status), access_log=None)
                await http.setup()
                site = web.TCPSite(http, self.opts.metrics_host, self.opts.metrics_port)
                await site.start()
                host, port = http.addresses[0][:2]
                log.info(
                    "serving /healthz and /metrics", extra={"fields": {"address": f"{host}:{port}"}}
                )
            await self.view.start()
            try:
                if not await self._until_stop(self.view.wait_synced(self.opts.sync_timeout)):
                    log.info("stopped before the informers synced")
                    return EXIT_OK
            except TimeoutError as e:
                log.error("cannot see the cluster", extra={"fields": {"error": str(e)}})
                return EXIT_FAILED
            log.info(
                "informers synced",
                extra={
                    "fields": {
                        "nodes": len(self.view.cache.nodes),
                        "pods": len(self.view.cache.pods),
                        "apis_missing": self.view.missing,
                        "dry_run": self.dry_run,
                    }
                },
            )
            return await (self._once() if self.opts.once else self._loop())
        finally:
            self.status.stopping = True
            if http is not None:
                await http.cleanup()
            await self.view.stop()

    async def _once(self) -> int:
        result: RunResult | None = None
        partial: RunResult | None = None

        def started(r: RunResult) -> None:
            nonlocal partial
            partial = r

        async def work() -> None:
            nonlocal result
            result = await run_once(self.io(), self.config, dry_run=self.dry_run, started=started)

        try:
            if self.elector is None:
                await work()
            elif not await self._lead_once(work):
                return EXIT_OK
        except REQUEST_ERRORS as e:
            log.error("run failed: the API server", extra={"fields": {"error": str(e)}})
            return EXIT_FAILED
        if result is None or result.lease_lost:
            return self._lost_lease(result or partial)
        return self._report(result)

    def _lost_lease(self, result: RunResult | None) -> int:
        """The Lease was lost before the run got to its end: a gang being moved was
        finished, no other was begun. Nothing done: exit 0 and no report, as when
        another replica holds the Lease; else the report of what was done, exit 3 (1 if
        evictions failed)."""
        fields: dict[str, Any] = {"lease": f"{self.opts.lease_namespace}/{self.opts.lease_name}"}
        if self.elector is not None:
            fields["leader"] = self.elector.leader or None
        if result is None or not (result.pods_evicted or result.resumed):
            log.warning(
                "lost the Lease before the run did anything; nothing done", extra={"fields": fields}
            )
            return EXIT_OK
        if result.stopped is None or not result.lease_lost:
            result.stopped = "leadership lost: the run stops evicting"
        result.lease_lost = True
        result.cut_short = True
        if result.exit_code == EXIT_OK:
            result.exit_code = EXIT_LEASE_LOST
        fields.update(pods_evicted=result.pods_evicted, exit_code=result.exit_code)
        log.error("lost the Lease mid-run: the run stopped part way", extra={"fields": fields})
        return self._report(result)

    def _report(self, result: RunResult) -> int:
        self.on_result(result)
        if self.opts.output == "json":
            self.out.write(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2).decode())
            self.out.write("\n")
        else:
            self.out.write(render_run(result, "the cluster") + "\n")
        self.out.flush()
        return result.exit_code

    async def _lead_once(self, work: Callable[[], Awaitable[None]]) -> bool:
        """Run ``work`` once under the Lease; False (nothing done) when another replica
        holds it for longer than two lease durations. Only the campaign is timed: a run
        that has begun is never cut short."""
        assert self.elector is not None
        elector = self.elector
        task = asyncio.create_task(elector.run(lambda: self._as_leader(work), once=True))
        wait = 2 * self.opts.lease_duration
        loop = asyncio.get_running_loop()
        end = loop.time() + wait
        while elector.terms == 0 and not task.done() and loop.time() < end:
            await asyncio.sleep(min(self.opts.retry_period / 2, 0.1))
        if elector.terms == 0 and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            log.info(
                "another replica holds the Lease; nothing done",
                extra={"fields": {"leader": elector.leader, "waited_seconds": wait}},
            )
            return False
        await task
        return True

    async def _work(self) -> None:
        log.info("leading: runs start", extra={"fields": {"identity": self.identity}})
        await run_loop(
            self.io(),
            self.config,
            interval=self.opts.interval,
            stop=self.stop,
            dry_run=self.dry_run,
            on_result=self.on_result,
            on_error=self.on_error,
        )

    async def _loop(self) -> int:
        if self.elector is None:
            await self._work()
            return EXIT_OK
        task = asyncio.create_task(
            self.elector.run(lambda: self._as_leader(self._work)), name="descheduler leader"
        )
        stopper = asyncio.create_task(self.stop.wait())
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            stopper.cancel()
            task.result()  # the loop only ends on a stop; anything else is an error
            return EXIT_OK
        # Stopping. A leader finishes the gang it is evicting (the runner stops between
        # gangs), its loop returns and the elector releases the Lease. A candidate
        # has nothing to finish.
        if not self.elector.is_leader:
            task.cancel()
        done, _ = await asyncio.wait({task}, timeout=self.opts.shutdown_grace)
        if not done:
            log.warning("the run did not stop in time; cancelling it")
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return EXIT_OK


async def run_descheduler(
    opts: RunOptions,
    config: DeschedulerConfig,
    *,
    client: KubeClient | None = None,
    clock: Callable[[], datetime] | None = None,
    stop: asyncio.Event | None = None,
    out: TextIO | None = None,
    install_signals: bool = True,
) -> int:
    """Run as the options say; the exit code. ``client`` (else one from the kubeconfig
    lookup), ``clock``, ``stop`` and ``out`` are for tests and embedding."""
    stop = stop or asyncio.Event()
    own = client is None
    if client is None:
        client = await new_client(opts.kubeconfig)
    proc = _Process(
        opts,
        config,
        client,
        clock=clock or (lambda: datetime.now(UTC)),
        stop=stop,
        out=out or sys.stdout,
    )
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT) if install_signals else ()

    def on_signal(sig: signal.Signals) -> None:
        proc.signal = sig.name
        log.info("signal received; stopping", extra={"fields": {"signal": sig.name}})
        stop.set()

    for sig in signals:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        return await proc.run()
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        if own:
            await client.close()
