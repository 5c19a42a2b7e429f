"""``corral-descheduler run`` as a process: found through --kubeconfig, a loop under
leader election serving /healthz and /metrics, JSON logs on stderr, SIGTERM ends it
cleanly and hands the Lease back; --once prints its report as JSON."""

from __future__ import annotations

import asyncio
import copy
import json
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from descheduler import plan, state_from_list
from tests.builders.descheduler_cluster import as_list, gang, gpu_node, pod
from tests.builders.kubeconfig import kubeconfig
from tests.kubeapi import ApiServer

# The descheduler as a process of its own against the in-memory API server.
pytestmark = pytest.mark.scenario

CLI = [sys.executable, "-m", "descheduler.cli"]
NS = "corral-system"


def real_evictions(api: ApiServer) -> list[Any]:
    """POSTed Evictions that were not dry runs (each gang is dry-run first)."""
    return [r for r in api.requests("POST", "/eviction") if "dryRun" not in r.query]


def small(name: str, node: str) -> dict[str, Any]:
    """A 1-GPU pod that checkpoints every 10 minutes: the run plans at the real clock,
    days after the builders' start times, and a move of it still loses little."""
    return pod(name, node, 1, annotations={"corral.dev/checkpoint-interval": "10m"})


def cluster() -> list[Any]:
    """Volcano issue 3948's three nodes; the two 1-GPU pods of the middle one move."""
    items: list[Any] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}]
    items += [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 4, owner_kind=""), small("s0a", "n0"), small("s0b", "n0")]
    items += [small("s0c", "n0"), pod("big-1", "n1", 4, owner_kind="")]
    items += [small("s1a", "n1"), small("s1b", "n1"), pod("big-2", "n2", 4, owner_kind="")]
    items += [small("s2a", "n2"), small("s2b", "n2"), small("s2c", "n2")]
    items += gang("llm", [], 4, pending=1, phase="Inqueue")
    return items


async def read_logs(stream: asyncio.StreamReader, logs: list[dict[str, Any]]) -> None:
    while line := await stream.readline():
        logs.append(json.loads(line))  # every line is a JSON object


# Generous: on a loaded machine a Python process takes seconds to start and import.
async def wait_for(cond: Any, timeout: float = 90.0) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        got = await cond() if asyncio.iscoroutinefunction(cond) else cond()
        if got:
            return got
        assert loop.time() < end, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_the_loop_serves_health_and_metrics_and_stops_on_sigterm(
    api: ApiServer, tmp_path: Path
) -> None:
    api.store.load(copy.deepcopy(cluster()))
    cfg = kubeconfig(tmp_path / "kubeconfig", api.accept("proc").url, "proc")
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        "run",
        "--interval",
        "300ms",
        "--kubeconfig",
        cfg,
        "--lease-namespace",
        NS,
        "--lease-duration",
        "10",
        "--renew-deadline",
        "8",
        "--retry-period",
        "0.2",
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    logs: list[dict[str, Any]] = []
    assert proc.stderr is not None
    reader = asyncio.create_task(read_logs(proc.stderr, logs))
    try:
        serving = await wait_for(
            lambda: next((x for x in logs if x["msg"] == "serving /healthz and /metrics"), None)
        )
        base = f"http://{serving['address']}"
        async with aiohttp.ClientSession() as http:

            async def healthy() -> dict[str, Any] | None:
                async with http.get(f"{base}/healthz") as r:
                    assert r.status == 200
                    doc: dict[str, Any] = await r.json()
                return doc if doc["leader"] and doc["runs"] >= 2 else None

            health = await wait_for(healthy)
            assert health["synced"] and health["last_exit_code"] == 0
            async with http.get(f"{base}/readyz") as r:
                assert r.status == 200
            async with http.get(f"{base}/metrics") as r:
                text = await r.text()
        for line in (
            'corral_descheduler_evictions_total{result="evicted"} 2.0',
            "corral_descheduler_gpus_freed_total 2.0",
            "corral_descheduler_leader 1.0",
            'corral_descheduler_fragmentation_gpus{when="before"}',
            "corral_descheduler_plan_seconds_count",
        ):
            assert line in text, line
        evicted = sorted(r.path for r in real_evictions(api))
        assert evicted == [
            "/api/v1/namespaces/default/pods/s1a/eviction",
            "/api/v1/namespaces/default/pods/s1b/eviction",
        ]
        assert all(r.authorization == "Bearer proc" for r in api.log)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 60) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await reader
    lease = api.store.find(
        api.store.resource("leases", "coordination.k8s.io"), NS, "corral-descheduler"
    )
    assert lease is not None and lease["spec"]["holderIdentity"] == ""  # handed back
    msgs = [x["msg"] for x in logs]
    assert "signal received; stopping" in msgs and "run finished" in msgs
    done = next(x for x in logs if x["msg"] == "run finished")
    assert done["pods_evicted"] == 2 and done["exit_code"] == 0 and done["plan"].startswith("plan-")


async def test_once_prints_the_report(api: ApiServer, tmp_path: Path) -> None:
    items = cluster()
    api.store.load(copy.deepcopy(items))
    cfg = kubeconfig(tmp_path / "kubeconfig", api.accept("once").url, "once")
    args = [*CLI, "run", "--once", "--kubeconfig", cfg, "--lease-namespace", NS]
    proc = await asyncio.create_subprocess_exec(
        *args,
        "--dry-run",
        "--output",
        "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, err.decode()
    doc = json.loads(out)
    now = state_from_list(as_list(items[1:]), _time(doc["now"]))
    assert doc["evictions"] == plan(now).evictions
    assert [o["status"] for o in doc["run"]["outcomes"]] == ["dry-run", "dry-run"]
    assert not api.requests("POST")


def _time(text: str) -> Any:
    from gangplace.engine.timeparse import parse_time

    return parse_time(text)
