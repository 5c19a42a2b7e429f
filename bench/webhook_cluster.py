"""``bench.webhook --cluster``: the webhook with informers on a large cluster served by
the in-memory API server in a process of its own -- resident memory, the view's
memory, ``admit()`` with the live view, and what keeping the view current costs
(described in :mod:`bench.webhook`)."""

from __future__ import annotations

import asyncio
import gc
import http.client
import json
import ssl
import time
from pathlib import Path
from typing import Any

from bench._common import in_process
from bench.webhook_servers import Server, free_port, serve_argv, tls_files
from webhook.admission.entry import admit
from webhook.config import WebhookConfig
from webhook.review_demo import find_fixtures

# --- 3. with a cluster ------------------------------------------------------------------

MiB = 1024 * 1024


def _proc_rss(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _big_job(parallelism: int, gpus: int) -> dict[str, Any]:
    obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"train-{parallelism}x{gpus}", "namespace": "ml"},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "trainer",
                            "resources": {
                                "requests": {
                                    "cpu": "8",
                                    "memory": "64Gi",
                                    "nvidia.com/gpu": str(gpus),
                                }
                            },
                        }
                    ],
                    "restartPolicy": "Never",
                }
            },
        },
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "namespace": "ml",
            "operation": "CREATE",
            "object": obj,
        },
    }


def _cluster_cases() -> dict[str, dict[str, Any]]:
    folder = find_fixtures()

    def load(name: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads((folder / name).read_text())
        return doc

    return {
        "Job, parallelism 4 (fixture)": load("job-create-mpi-train.json"),
        "bare pod with corral.dev/gang (fixture)": load("pod-create-llm-worker-0.json"),
        "plain pod, single-pod gang (fixture)": load("pod-create-plain-cpu.json"),
        "Job, 16 pods x 8 GPUs": _big_job(16, 8),
        "Job, 4 pods x 16 GPUs (never fits)": _big_job(4, 16),
    }


def _time_admit(
    review: dict[str, Any], state: Any, config: Any, n: int, *, changed: bool = False
) -> dict[str, float]:
    """Wall-clock figures of ``admit()``; ``changed``: the live view changes before each
    call (as under pod churn), so no answer about it is reused."""
    wall, cpu = time.perf_counter_ns, time.thread_time_ns
    t0 = wall()
    res = admit(review, state, config)
    first = wall() - t0
    for _ in range(min(200, n)):
        admit(review, state, config)
    lat, cpus = [], []
    for _ in range(n):
        if changed:
            state.version += 1
        t0, c0 = wall(), cpu()
        admit(review, state, config)
        c1, t1 = cpu(), wall()
        lat.append(t1 - t0)
        cpus.append(c1 - c0)
    lat.sort()
    cpus.sort()
    return {
        "first_us": first / 1000,
        "median_us": lat[len(lat) // 2] / 1000,
        "p99_us": lat[int(len(lat) * 0.99)] / 1000,
        "cpu_p99_us": cpus[int(len(cpus) * 0.99)] / 1000,
        "warnings": float(len(res.warnings)),
    }


def _measure_view(conn: Any, url: str, variant: str, iterations: int) -> None:
    """In a fresh process: sync ``variant`` ("webhook": the InformerSource; "cache":
    ClusterCache with one engine snapshot) from ``url``; memory, times, and for the
    webhook's view admit() latency and the cost of keeping it current."""
    import random as rnd

    gc.collect()
    bare = _proc_rss()
    from gangplace.kube import ClusterCache, client_for
    from kubernetes_asyncio.client import Configuration

    from webhook.live import InformerSource

    gc.collect()
    imports = _proc_rss() - bare

    async def main() -> dict[str, Any]:
        kube = client_for(Configuration(host=url), request_timeout=600)
        config = WebhookConfig(warn_when_full=True)
        gc.collect()
        before = _proc_rss()
        t0 = time.perf_counter()
        out: dict[str, Any] = {"variant": variant, "import_bytes": imports}
        if variant == "cache":
            cache = ClusterCache(kube, config.engine)
            await cache.start()
            await cache.wait_synced()
            out["sync_seconds"] = time.perf_counter() - t0
            t1 = time.perf_counter()
            snap = await cache.snapshot_async()
            out["build_seconds"] = time.perf_counter() - t1
            out["ready_seconds"] = time.perf_counter() - t0
            out["pods"] = len(cache.pods)
            gc.collect()
            out["view_bytes"] = _proc_rss() - before
            del snap
            await cache.stop()
            await kube.close()
            return out
        source = InformerSource(kube, config.engine)
        source.start()
        await source.wait_ready()
        out["ready_seconds"] = time.perf_counter() - t0
        out["build_seconds"] = source.stats.build_seconds
        out["pods"] = len(source.pods)
        out["shapes"] = len(source.shapes)
        gc.collect()
        out["view_bytes"] = _proc_rss() - before
        state = source.state()
        assert state is not None
        out["nodes"] = state.snapshot.n_nodes
        gc.freeze()  # as corral-webhook serve does after each build
        # admit() with the live view, beside admit() without a cluster
        cases = _cluster_cases()
        default = WebhookConfig()
        out["admit"] = {}
        for label, rev in cases.items():
            out["admit"][label] = {
                "full": _time_admit(rev, state, config, iterations, changed=True),
                "steady": _time_admit(rev, state, config, iterations),
                "default": _time_admit(rev, state, default, iterations, changed=True),
                "none": _time_admit(rev, None, default, iterations),
            }
        # a pod event: a bound pod moves to another node (and back)
        rng = rnd.Random(1)
        keys = rng.sample(list(source.pods.keys()), min(10_000, len(source.pods)))
        names = state.snapshot.node_names
        moves = []
        for k in keys:
            old = source.pods.get(k)
            assert old is not None
            moves.append((k, old, old._replace(node=names[rng.randrange(len(names))])))
        t1 = time.perf_counter_ns()
        for k, old, new in moves:
            source._on_pod("MODIFIED", k, old, new)
        for k, old, new in moves:
            source._on_pod("MODIFIED", k, new, old)
        out["event_us"] = (time.perf_counter_ns() - t1) / 1000 / (2 * len(moves))
        # a rebuild after a node change, and how late the event loop ran meanwhile
        lags: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            while not stop.is_set():
                t = time.perf_counter()
                await asyncio.sleep(0.001)
                lags.append(time.perf_counter() - t - 0.001)

        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0.2)
        idle = sorted(lags)
        lags.clear()
        await source._rebuild()
        stop.set()
        await tick
        busy = sorted(lags) or [0.0]
        out["rebuild_seconds"] = source.stats.build_seconds
        out["loop_lag_idle_p99_ms"] = idle[int(len(idle) * 0.99)] * 1000 if idle else 0.0
        out["loop_lag_rebuild_p99_ms"] = busy[int(len(busy) * 0.99)] * 1000
        out["loop_lag_rebuild_max_ms"] = busy[-1] * 1000
        await source.stop()
        await kube.close()
        return out

    conn.send(asyncio.run(main()))


def _kubeconfig(folder: Path, url: str) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bench", "cluster": {"server": url}}],
        "users": [{"name": "bench", "user": {"token": "bench"}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
        "current-context": "bench",
    }
    path = folder / "kubeconfig"
    path.write_text(json.dumps(doc))
    return path


def _served_rss(url: str, timeout: float) -> dict[str, dict[str, float]]:
    """``corral-webhook serve`` with informers and with --no-cluster: resident memory
    once ready (and the time it took)."""
    out: dict[str, dict[str, float]] = {}
    with tls_files() as (tmp, cert, key, ca):
        kubeconfig = _kubeconfig(tmp, url)
        ctx = ssl.create_default_context(cadata=ca.decode())
        for name, extra in (
            ("with informers", ["--kubeconfig", str(kubeconfig)]),
            ("--no-cluster", ["--no-cluster"]),
        ):
            port = free_port()
            argv = serve_argv(port, cert, key, *extra)
            t0 = time.perf_counter()
            with Server(name, argv, port) as srv:
                assert srv.proc is not None
                deadline = time.monotonic() + timeout
                while True:
                    try:
                        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
                        conn.request("GET", "/readyz")
                        ready = conn.getresponse().status == 200
                        conn.close()
                    except OSError:
                        ready = False
                    if ready:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{name}: not ready after {timeout}s")
                    time.sleep(0.2)
                ready_s = time.perf_counter() - t0
                time.sleep(1.0)  # let the first build's garbage go
                out[name] = {"rss_mb": srv.rss_mb(), "ready_seconds": ready_s}
    return out


def bench_cluster(nodes: int, pods: int, iterations: int, seed: int) -> dict[str, Any]:
    import multiprocessing as mp

    from bench import informer  # the in-memory API server as bench.informer serves it

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    args = {"nodes": nodes, "pods": pods, "gpu_nodes": 0.3, "gpu_pods": 0.2, "seed": seed}
    server = ctx.Process(target=informer._serve, args=(child, args), daemon=True)
    server.start()
    info = parent.recv()
    try:
        views = {
            v: in_process(_measure_view, info["url"], v, iterations) for v in ("webhook", "cache")
        }
        served = _served_rss(info["url"], timeout=900)
    finally:
        parent.send("stop")
        server.join(30)
    return {
        "nodes": nodes,
        "pods": pods,
        "server_objects": info["objects"],
        "views": views,
        "served": served,
    }


def render_cluster(res: dict[str, Any]) -> str:
    w, c = res["views"]["webhook"], res["views"]["cache"]
    srv = res["served"]
    lines = [
        f"with informers: {res['nodes']:,} nodes, {res['pods']:,} pods of full size from the "
        f"in-memory API server ({w['pods']:,} bound and unfinished, {w['shapes']} distinct "
        "shapes)",
        "",
        f"  {'':<44} {'webhook view':>14} {'ClusterCache':>14}",
        f"  {'':<44} {'(lean records,':>14} {'+ a snapshot':>14}",
        f"  {'':<44} {'live snapshot)':>14} {'(full records)':>14}",
        f"  {'memory of the view (RSS growth)':<44} {w['view_bytes'] / MiB:>10,.0f} MiB "
        f"{c['view_bytes'] / MiB:>10,.0f} MiB",
        f"  {'time to ready (sync + first snapshot)':<44} {w['ready_seconds']:>12.1f} s "
        f"{c['ready_seconds']:>12.1f} s",
        f"  {'snapshot build':<44} {w['build_seconds']:>12.2f} s {c['build_seconds']:>12.2f} s",
        "",
        f"  {'(importing kubernetes-asyncio, not counted)':<44} "
        f"{w['import_bytes'] / MiB:>10,.0f} MiB {c['import_bytes'] / MiB:>10,.0f} MiB",
        "",
        "  corral-webhook serve, resident memory once ready:",
    ]
    for name, f in srv.items():
        lines.append(
            f"    {name:<42} {f['rss_mb']:>10,.0f} MiB   (ready after {f['ready_seconds']:.1f} s)"
        )
    lines += [
        "",
        '  admit() with the live view: warnWhenFull on ("can it start now" asked anew as',
        '  after a pod event; and steady, the view unchanged), default config (only "can it',
        '  ever start", cached per shape), and without a cluster -- median / p99 in us',
        "  (wall clock; p99 of CPU time in brackets, which leaves out preemption by other",
        "  processes on a shared machine)",
        f"  {'review':<40} {'first':>6} {'warnWhenFull':>19} {'steady':>19} "
        f"{'default':>19} {'no cluster':>19} warn",
    ]

    def pair(f: dict[str, float]) -> str:
        return f"{f['median_us']:>5.0f} /{f['p99_us']:>5.0f} [{f['cpu_p99_us']:>4.0f}]"

    for label, f in w["admit"].items():
        lines.append(
            f"  {label:<40} {f['full']['first_us']:>6.0f} {pair(f['full']):>19} "
            f"{pair(f['steady']):>19} {pair(f['default']):>19} {pair(f['none']):>19} "
            f"{f['full']['warnings']:>4.0f}"
        )
    lines += [
        "",
        "  keeping the view current:",
        f"    a pod event (unplace + place_bound, on the event loop): {w['event_us']:.1f} us",
        f"    rebuild after a node change (worker thread): {w['rebuild_seconds']:.2f} s; "
        f"event-loop lag p99 {w['loop_lag_rebuild_p99_ms']:.1f} ms, max "
        f"{w['loop_lag_rebuild_max_ms']:.1f} ms meanwhile (idle p99 "
        f"{w['loop_lag_idle_p99_ms']:.1f} ms)",
    ]
    return "\n".join(lines)
