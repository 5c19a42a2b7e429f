"""How long the informers take to sync a large cluster, and how much memory they keep.

Starts the in-memory API server in a process of its own, loads it with full-size Node
and Pod objects (managed fields, env, volumes, status: what a real API server returns),
then syncs it in two fresh processes over real HTTP, paged as the informers page:

* **compact**: corral's ``ClusterCache`` -- nodes and non-finished pods kept as the
  engine's compact records;
* **baseline**: the same informer keeping each object's full JSON, as a generic
  informer cache does.

Each side reports the time to sync, its memory after sync and at the peak (RSS), and
the time to build the engine's ``Snapshot`` (from the records, or from the JSON with
``Snapshot.from_objects``). The server runs apart so that its memory is not counted.

    python -m bench.informer                  # 10,000 nodes, 100,000 pods
    python -m bench.informer --nodes 1000 --pods 10000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing as mp
import random
import statistics
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

from bench._common import in_process

MiB = 1024 * 1024


# --- the server process ---------------------------------------------------------------


def _cluster(
    nodes: int, pods: int, gpu_node_share: float, gpu_pod_share: float, seed: int
) -> list[dict[str, Any]]:
    from tests.kubeapi import objects as o

    rng = random.Random(seed)
    n_gpu_nodes = int(nodes * gpu_node_share)
    objs = [o.full_node(i, gpus=8 if i < n_gpu_nodes else 0, rng=rng) for i in range(nodes)]
    gpu_names = [f"node-{i:05d}" for i in range(n_gpu_nodes)]
    cpu_names = [f"node-{i:05d}" for i in range(n_gpu_nodes, nodes)] or gpu_names
    for i in range(pods):
        gpu = rng.random() < gpu_pod_share and gpu_names
        node = rng.choice(gpu_names) if gpu else rng.choice(cpu_names)
        p = o.full_pod(i, node, gpus=rng.choice((1, 1, 2, 4)) if gpu else 0, rng=rng)
        r = rng.random()
        if r < 0.02:  # waiting to be scheduled
            del p["spec"]["nodeName"]
            p["status"] = {"phase": "Pending", "qosClass": "Guaranteed"}
        elif r < 0.05:  # finished: the cache's field selector leaves these out
            p["status"]["phase"] = "Succeeded"
        objs.append(p)
    return objs


def _serve(conn: Connection, args: dict[str, Any]) -> None:
    from tests.kubeapi import ApiServer

    async def main() -> None:
        t0 = time.perf_counter()
        objs = _cluster(
            args["nodes"], args["pods"], args["gpu_nodes"], args["gpu_pods"], args["seed"]
        )
        built = time.perf_counter() - t0
        async with ApiServer(bookmark_interval=30) as api:
            n = api.store.load(objs)
            del objs
            api.accept("bench")  # bench.webhook's kubeconfig token (unknown ones are 401)
            conn.send({"url": api.url, "objects": n, "build_seconds": built})
            await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until told

    asyncio.run(main())


# --- the measuring processes ----------------------------------------------------------


def _rss() -> tuple[int, int]:
    """(current, peak) resident set size in bytes."""
    cur = peak = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                cur = int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024
    return cur, peak


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _measure(conn: Connection, url: str, variant: str, page_size: int, repeats: int) -> None:
    from gangplace.engine import EngineConfig, Snapshot
    from gangplace.engine.node_pod_records import node_from_json
    from gangplace.kube import ClusterCache, Informer, client_for
    from gangplace.kube.resources import NODES, NON_TERMINAL_PODS, PODS
    from kubernetes_asyncio.client import Configuration

    async def main() -> dict[str, Any]:
        kube = client_for(Configuration(host=url), request_timeout=300)
        cfg = EngineConfig()
        gc.collect()
        before, _ = _rss()
        peak_exact = _reset_peak()
        t0 = time.perf_counter()
        if variant == "compact":
            cache = ClusterCache(kube, cfg, page_size=page_size)
            await cache.start()
            await cache.wait_synced()
            informers = [cache.nodes, cache.pods]
        else:
            nodes = Informer(kube, NODES, lambda o: o, page_size=page_size)
            pods = Informer(
                kube, PODS, lambda o: o, field_selector=NON_TERMINAL_PODS, page_size=page_size
            )
            informers = [nodes, pods]
            for inf in informers:
                inf.start()
            await asyncio.gather(*(inf.wait_synced() for inf in informers))
        sync = time.perf_counter() - t0
        gc.collect()
        after, peak = _rss()
        counts = [len(inf) for inf in informers]
        snaps = []
        for _ in range(repeats):
            t1 = time.perf_counter()
            if variant == "compact":
                snap = cache.snapshot()
            else:
                # The engine reads the JSON directly: parse every object on each build.
                snap = Snapshot.from_objects(nodes.values(), pods.values(), cfg)
            snaps.append(time.perf_counter() - t1)
            del snap
        extra: dict[str, Any] = {}
        if variant == "compact":
            extra["distinct_shapes"] = len(cache.shapes)
            await cache.stop()
        else:
            # What converting the held JSON to records would cost, for comparison.
            t2 = time.perf_counter()
            for obj in nodes.values():
                node_from_json(obj, cfg)
            extra["convert_nodes_seconds"] = time.perf_counter() - t2
            for inf in informers:
                await inf.stop()
        await kube.close()
        return {
            "variant": variant,
            "nodes": counts[0],
            "pods": counts[1],
            "sync_seconds": sync,
            "rss_before_bytes": before,
            "cache_bytes": after - before,
            "peak_bytes": peak - before,
            "peak_exact": peak_exact,
            "snapshot_seconds": sorted(snaps),
            **extra,
        }

    conn.send(asyncio.run(main()))


# --- report ---------------------------------------------------------------------------


def _fmt_mib(b: float) -> str:
    return f"{b / MiB:,.0f} MiB"


def _table(res: dict[str, Any]) -> str:
    c, b, srv = res["compact"], res["baseline"], res["server"]
    med = statistics.median
    rows = [
        (
            "time to sync",
            f"{c['sync_seconds']:.1f} s",
            f"{b['sync_seconds']:.1f} s",
            f"{b['sync_seconds'] / c['sync_seconds']:.2f}x",
        ),
        (
            "memory after sync (RSS delta)",
            _fmt_mib(c["cache_bytes"]),
            _fmt_mib(b["cache_bytes"]),
            f"{b['cache_bytes'] / c['cache_bytes']:.1f}x",
        ),
        (
            "peak memory during sync",
            _fmt_mib(c["peak_bytes"]),
            _fmt_mib(b["peak_bytes"]),
            f"{b['peak_bytes'] / c['peak_bytes']:.1f}x",
        ),
        (
            "memory per pod",
            f"{c['cache_bytes'] / c['pods']:,.0f} B",
            f"{b['cache_bytes'] / b['pods']:,.0f} B",
            "",
        ),
        (
            "engine Snapshot build (median)",
            f"{med(c['snapshot_seconds']):.2f} s",
            f"{med(b['snapshot_seconds']):.2f} s",
            f"{med(b['snapshot_seconds']) / med(c['snapshot_seconds']):.1f}x",
        ),
    ]
    w0 = max(len(r[0]) for r in rows) + 2
    head = f"{'':{w0}}{'compact records':>18}{'full JSON':>16}{'baseline/compact':>19}"
    lines = [
        f"informer sync: {res['args']['nodes']:,} nodes, {res['args']['pods']:,} pods "
        f"({c['pods']:,} not finished) over HTTP, pages of {res['args']['page_size']}",
        "",
        head,
        "-" * len(head),
        *(f"{r[0]:{w0}}{r[1]:>18}{r[2]:>16}{r[3]:>19}" for r in rows),
        "",
        f"{c['distinct_shapes']:,} distinct pod shapes shared by {c['pods']:,} pod records; "
        f"snapshot builds: {', '.join(f'{s:.2f}' for s in c['snapshot_seconds'])} s",
        f"(server: {srv['objects']:,} objects generated in {srv['build_seconds']:.1f} s,"
        f" in its own process; memory is resident-set growth of each measuring process"
        f"{'' if c['peak_exact'] else '; peak approximate'})",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000, help="nodes to load (default 10000)")
    ap.add_argument("--pods", type=int, default=100_000, help="pods to load (default 100000)")
    ap.add_argument("--gpu-nodes", type=float, default=0.3, help="share of GPU nodes (default 0.3)")
    ap.add_argument("--gpu-pods", type=float, default=0.2, help="share of GPU pods (default 0.2)")
    ap.add_argument("--page-size", type=int, default=500, help="list page size (default 500)")
    ap.add_argument("--repeats", type=int, default=3, help="snapshot builds to time (default 3)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args(argv)
    if args.nodes < 1 or args.pods < 0 or args.page_size < 1 or args.repeats < 1:
        ap.error("--nodes, --page-size and --repeats must be >= 1, --pods >= 0")
    if not (0 <= args.gpu_nodes <= 1 and 0 <= args.gpu_pods <= 1):
        ap.error("--gpu-nodes and --gpu-pods are shares between 0 and 1")

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(child, vars(args)), daemon=True)
    server.start()
    info = parent.recv()
    try:
        results = {
            v: in_process(_measure, info["url"], v, args.page_size, args.repeats)
            for v in ("compact", "baseline")
        }
    finally:
        parent.send("stop")
        server.join(30)
    report = {"args": vars(args), "server": info, **results}
    if args.json:
        print(json.dumps(report))
    else:
        print(_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
