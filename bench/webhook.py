"""Benchmark of the admission webhook (a benchmark that prints figures, not a test).

1. The pure ``admit()`` on the captured fixture reviews: median and p99 in
   microseconds (target: p99 <= 200 us).
2. The running server, over TLS on loopback with keep-alive, at 1 and 16
   connections, side by side with the *ceiling* measured in the same run: the least a
   correct aiohttp webhook does (read the body, parse it with the standard json
   module, echo the uid, allow; the default event loop), on the same TLS settings.
   The ceiling is built the same way whatever corral's stack is, so it does not move
   with it. Both servers run at once and rounds alternate between them (the order
   flips each round), so drift on a shared machine hits both; ratios are medians of
   the rounds' paired ratios. Targets are ratios, since absolute times drift:
   throughput at 16 connections >= the ceiling's; at 1 connection, median <= 1.2x
   and p99 <= 1.5x the ceiling's.

The load generator is ``wrk`` (Debian: ``apt-get install -y wrk``) with a Lua script
that POSTs the review. Without it, a built-in aiohttp client takes its place; that
client is slower than the servers, so its figures are client-bound and the ratios
understate the gap -- the output says which generator ran.

    python -m bench.webhook            # a table
    python -m bench.webhook --json     # one JSON object with the same figures

   Then the same through the in-memory API server's admission chain (tests/kubeapi):
   pod creations sent to it, the webhook called by its chain over verified TLS with
   ``?timeout=10s`` and keep-alive as kube-apiserver calls it (``--no-chain`` leaves
   this out); one API server per webhook, alternating rounds as above.

   And what each server executes per review in user space, counted by valgrind's
   callgrind (``apt-get install -y valgrind``; ``--no-instructions`` leaves it out):
   instructions and simulated L1 cache misses, over ``--count-reviews`` reviews on one
   connection after a warm-up. Counts do not move with the machine's load, as times do.

3. ``--cluster``: the webhook with informers on a large cluster (default 10,000 nodes
   and 100,000 pods of full size, served by the in-memory API server in a process of
   its own, as ``bench.informer`` does):

   * the resident memory of ``corral-webhook serve`` once ready, beside the same server
     with ``--no-cluster``;
   * the memory of the webhook's view (lean pod records and a live snapshot without pod
     records), beside the kube layer's ``ClusterCache`` with one engine snapshot (full
     pod records, what ``SnapshotFeed`` would keep), each synced in a fresh process;
   * ``admit()`` with that live view and feasibility warnings on (``warnWhenFull``:
     "can it ever start" on the empty copy, cached per shape, and "can it start now" on
     the live snapshot every time), beside ``admit()`` without a cluster;
   * what keeping the view current costs: a pod event applied, and a rebuild after a
     node change (in a worker thread), with the event loop's lag meanwhile.

    python -m bench.webhook --cluster              # a table
    python -m bench.webhook --cluster --nodes 1000 --pods 10000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import datetime as dt
import gc
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonpatch

from bench._common import in_process
from webhook.admit import admit
from webhook.config import WebhookConfig
from webhook.demo import find_fixtures
from webhook.tls.certificates import new_bundle

REPO = Path(__file__).resolve().parents[1]

CONCURRENCY = (1, 16)
TARGETS = {"admit_p99_us": 200.0, "throughput_16": 1.0, "p50_1": 1.2, "p99_1": 1.5}

# --- 1. the pure function ---------------------------------------------------------------


def _member_pod(job_review: dict[str, Any], pod_review: dict[str, Any]) -> dict[str, Any]:
    """The pod a mutated Job's controller creates: it carries the gang keys already (the
    common case in production)."""
    res = admit(job_review, None, WebhookConfig())
    patched = jsonpatch.apply_patch(job_review["request"]["object"], res.patch)
    out = copy.deepcopy(pod_review)
    out["request"]["object"]["metadata"]["annotations"].update(
        patched["spec"]["template"]["metadata"]["annotations"]
    )
    return out


def bench_admit(iterations: int) -> dict[str, dict[str, float]]:
    """Per review: wall-clock median and p99, and the same of the calling thread's CPU
    time, which leaves out the time the OS gave other processes mid-call (on a shared
    2-core machine a few percent of calls are preempted for milliseconds)."""
    folder = find_fixtures()

    def load(name: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads((folder / name).read_text())
        return doc

    job = load("job-create-mpi-train.json")
    pod = load("pod-create-from-job-mpi-train.json")
    cases = {
        "pod of a gang (keys from its template)": _member_pod(job, pod),
        "pod joining its Job's gang (fixture)": pod,
        "bare pod with corral.dev/gang (fixture)": load("pod-create-llm-worker-0.json"),
        "plain pod, single-pod gang (fixture)": load("pod-create-plain-cpu.json"),
        "Job, parallelism 4 (fixture)": job,
    }
    config = WebhookConfig()
    out: dict[str, dict[str, float]] = {}
    wall, cpu = time.perf_counter_ns, time.thread_time_ns
    for label, review in cases.items():
        for _ in range(500):  # warm caches (quantity parsing, shapes, the dialect)
            admit(review, None, config)
        walls, cpus = [], []
        gc.collect()
        for _ in range(iterations):
            w0, c0 = wall(), cpu()
            admit(review, None, config)
            c1, w1 = cpu(), wall()
            walls.append(w1 - w0)
            cpus.append(c1 - c0)
        walls.sort()
        cpus.sort()
        p99 = int(len(walls) * 0.99)
        out[label] = {
            "median_us": walls[len(walls) // 2] / 1000,
            "p99_us": walls[p99] / 1000,
            "cpu_median_us": cpus[len(cpus) // 2] / 1000,
            "cpu_p99_us": cpus[p99] / 1000,
        }
    return out


# --- 2. the servers ---------------------------------------------------------------------

CEILING = r"""
import asyncio, json, ssl, sys
from aiohttp import web

async def mutate(request):
    review = json.loads(await request.read())
    uid = review["request"]["uid"]
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": True}}
    return web.Response(body=json.dumps(body).encode(), content_type="application/json")

port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.minimum_version = ssl.TLSVersion.TLSv1_2
ctx.load_cert_chain(cert, key)
app = web.Application(client_max_size=3 * 1024 * 1024)
app.router.add_post("/mutate", mutate)
web.run_app(app, host="127.0.0.1", port=port, ssl_context=ctx, access_log=None, print=None)
"""

LUA = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open(os.getenv("CORRAL_BENCH_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "CORRAL {\"requests\": %d, \"duration_us\": %d, \"p50_us\": %d, \"p99_us\": %d, " ..
    "\"errors\": %d, \"non2xx\": %d}\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with code {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class Server:
    def __init__(self, name: str, argv: list[str], port: int, start_timeout: float = 20) -> None:
        self.name, self.argv, self.port = name, argv, port
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO
        )
        _wait_listening(self.port, self.proc, self.start_timeout)
        return self

    def cpu_seconds(self) -> float:
        assert self.proc is not None
        return _cpu_seconds(self.proc.pid)

    def rss_mb(self) -> float:
        assert self.proc is not None
        return _rss_mb(self.proc.pid)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _serve_argv(port: int, cert: Path, key: Path, *extra: str) -> list[str]:
    """``corral-webhook serve`` on 127.0.0.1:``port`` with the given certificate."""
    return [
        sys.executable,
        "-m",
        "webhook.cli",
        "serve",
        *extra,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--tls-cert-file",
        str(cert),
        "--tls-key-file",
        str(key),
        "--log-level",
        "warning",
        "--shutdown-delay",
        "0",
    ]


def _servers(tmp: Path, cert: Path, key: Path) -> list[tuple[str, list[str], int]]:
    ceiling_py = tmp / "ceiling.py"
    ceiling_py.write_text(CEILING)
    out = []
    p = _free_port()
    ceiling = [sys.executable, str(ceiling_py), str(p), str(cert), str(key)]
    out.append(("ceiling (plain aiohttp)", ceiling, p))
    p = _free_port()
    out.append(("corral-webhook", _serve_argv(p, cert, key, "--no-cluster"), p))
    return out


def _wrk(
    port: int, conns: int, seconds: float, lua: Path, body: Path, url: str = ""
) -> dict[str, float]:
    env = {**os.environ, "CORRAL_BENCH_BODY": str(body)}
    cmd = [
        "wrk",
        "-t1",
        f"-c{conns}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "5s",
        "-s",
        str(lua),
        url or f"https://127.0.0.1:{port}/mutate",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=seconds + 60)
    for line in out.stdout.splitlines():
        if line.startswith("CORRAL "):
            r = json.loads(line[len("CORRAL ") :])
            return {
                "rps": r["requests"] / (r["duration_us"] / 1e6),
                "p50_us": float(r["p50_us"]),
                "p99_us": float(r["p99_us"]),
                "errors": float(r["errors"] + r["non2xx"]),
            }
    raise RuntimeError(f"wrk gave no figures: {out.stdout}\n{out.stderr}")


async def _aiohttp_load(
    port: int, conns: int, seconds: float, body: bytes, ca: bytes
) -> dict[str, float]:
    import aiohttp

    ctx = ssl.create_default_context(cadata=ca.decode())
    connector = aiohttp.TCPConnector(ssl=ctx, limit=conns)
    lat: list[int] = []
    errors = 0
    url = f"https://127.0.0.1:{port}/mutate"
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=connector) as session:
        stop = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < stop:
                t0 = time.perf_counter_ns()
                async with session.post(url, data=body, headers=headers) as r:
                    await r.read()
                    if r.status != 200:
                        errors += 1
                lat.append(time.perf_counter_ns() - t0)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(conns)))
        elapsed = time.perf_counter() - started
    lat.sort()
    return {
        "rps": len(lat) / elapsed,
        "p50_us": lat[len(lat) // 2] / 1000,
        "p99_us": lat[int(len(lat) * 0.99)] / 1000,
        "errors": float(errors),
    }


def _median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


@contextlib.contextmanager
def _tls_files() -> Iterator[tuple[Path, Path, Path, bytes]]:
    b = new_bundle("corral-webhook", "corral-system", dt.datetime.now(dt.UTC), ips=["127.0.0.1"])
    with tempfile.TemporaryDirectory(prefix="corral-bench-") as d:
        tmp = Path(d)
        (tmp / "tls.crt").write_bytes(b.cert)
        (tmp / "tls.key").write_bytes(b.key)
        yield tmp, tmp / "tls.crt", tmp / "tls.key", b.ca_cert


def _ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs > 0 else float("nan")


Results = dict[str, dict[int, list[dict[str, float]]]]


def _alternate(
    pairs: list[tuple[Server, Server]],
    concurrency: tuple[int, ...],
    rounds: int,
    seconds: float,
    load: Callable[[Server, int, float], dict[str, float]],
    cpu_key: str,
) -> Results:
    """Warm each target, then ``rounds`` rounds of a run per target and concurrency, the
    targets' order flipped every round so a slow spell on a shared machine falls on all.
    A pair is (what is loaded, whose CPU is counted per answer under ``cpu_key``)."""
    results: Results = {}
    for target, _ in pairs:
        for conns in concurrency:
            load(target, conns, 1)  # warm-up: imports, caches, TLS sessions
    for r in range(rounds):
        for conns in concurrency:
            for target, worker in pairs if r % 2 == 0 else pairs[::-1]:
                cpu0 = worker.cpu_seconds()
                fig = load(target, conns, seconds)
                # CPU spent per answer: steadier than rates when others share the machine.
                served = fig["rps"] * seconds
                fig[cpu_key] = (worker.cpu_seconds() - cpu0) * 1e6 / max(served, 1)
                results.setdefault(target.name, {}).setdefault(conns, []).append(fig)
    return results


def _summary(results: Results, cpu_key: str) -> dict[str, Any]:
    """Medians per server and concurrency, and corral/ceiling as the median of the
    rounds' paired ratios."""
    ours, ceil = results["corral-webhook"], results["ceiling (plain aiohttp)"]
    return {
        "servers": {
            name: {str(c): _median_of(runs) for c, runs in per.items()}
            for name, per in results.items()
        },
        "ratios": {
            str(c): {
                k: statistics.median(
                    _ratio(a[k], b[k]) for a, b in zip(ours[c], ceil[c], strict=True)
                )
                for k in ("rps", "p50_us", "p99_us", cpu_key)
            }
            for c in ours
        },
    }


def bench_servers(
    seconds: float,
    rounds: int,
    force_builtin: bool,
    concurrency: tuple[int, ...] = CONCURRENCY,
) -> dict[str, Any]:
    """Both servers run side by side; each round loads one, then the other (the order
    flips every round), so a slow spell on a shared machine falls on both. Figures are
    medians over the rounds; ratios are the medians of each round's paired ratio."""
    use_wrk = shutil.which("wrk") is not None and not force_builtin
    body = (find_fixtures() / "pod-create-from-job-mpi-train.json").read_bytes()
    rss: dict[str, float] = {}
    with _tls_files() as (tmp, cert, key, ca), contextlib.ExitStack() as stack:
        body_file = tmp / "body.json"
        body_file.write_bytes(body)
        lua = tmp / "post.lua"
        lua.write_text(LUA)
        running = [
            stack.enter_context(Server(name, argv, port))
            for name, argv, port in _servers(tmp, cert, key)
        ]

        def load(srv: Server, conns: int, secs: float) -> dict[str, float]:
            if use_wrk:
                return _wrk(srv.port, conns, secs, lua, body_file)
            return asyncio.run(_aiohttp_load(srv.port, conns, secs, body, ca))

        results = _alternate(
            [(srv, srv) for srv in running], concurrency, rounds, seconds, load, "cpu_us_per_req"
        )
        for srv in running:
            rss[srv.name] = srv.rss_mb()
    return {
        "load_generator": "wrk"
        if use_wrk
        else "aiohttp client (--builtin-load)"
        if force_builtin
        else "aiohttp client: wrk not found (apt-get install -y wrk); figures are client-bound",
        "body_bytes": len(body),
        "seconds_per_run": seconds,
        "rounds": rounds,
        **_summary(results, "cpu_us_per_req"),
        "rss_mb_after_load": rss,
    }


# --- 2b. instructions per review (deterministic) -----------------------------------------


def _callgrind_totals(path: Path) -> dict[str, int]:
    events: list[str] = []
    for line in path.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("totals:"):
            return dict(zip(events, (int(x) for x in line.split()[1:]), strict=False))
    raise RuntimeError(f"{path}: no totals line")


def _count_one(
    argv: list[str], port: int, folder: Path, body: bytes, ca: bytes, n: int
) -> dict[str, float]:
    """Run one server under callgrind with collection toggled on only for ``n`` reviews
    after a warm-up, over one keep-alive TLS connection; the counts per review."""
    out = folder / f"callgrind.{port}"
    valgrind = [
        "valgrind",
        "--tool=callgrind",
        "--cache-sim=yes",
        "--instr-atstart=no",
        f"--callgrind-out-file={out}",
    ]
    # Python under valgrind takes minutes to import everything before it listens.
    with Server("counted", [*valgrind, *argv], port, start_timeout=900) as srv:
        assert srv.proc is not None
        pid = str(srv.proc.pid)
        ctx = ssl.create_default_context(cadata=ca.decode())
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=300)
        headers = {"Content-Type": "application/json"}

        def send(k: int) -> None:
            for _ in range(k):
                conn.request("POST", "/mutate", body=body, headers=headers)
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status} under callgrind")

        control = ["callgrind_control"]
        send(30)  # imports, caches, the TLS session: not counted
        subprocess.run([*control, "-i", "on", pid], capture_output=True, check=True)
        send(10)  # instrumented code warmed
        subprocess.run([*control, "-z", pid], capture_output=True, check=True)
        send(n)
        subprocess.run([*control, "-d", pid], capture_output=True, check=True)
        conn.close()
    dumps = sorted(folder.glob(f"callgrind.{port}.*"))
    if not dumps:
        raise RuntimeError("callgrind wrote no dump")
    totals = _callgrind_totals(dumps[0])
    names = {"Ir": "instructions", "I1mr": "l1i_misses", "D1mr": "l1d_read_misses"}
    return {names[k]: totals[k] / n for k in names if k in totals}


def bench_instructions(n: int) -> dict[str, Any]:
    """What each server executes per review in user space, counted by valgrind's
    callgrind (one connection, ``n`` reviews after a warm-up): instructions and
    simulated L1 misses. Unlike times, the counts do not move with the machine's load;
    they leave out the kernel's share (the socket writes), which both servers pay alike."""
    missing = [t for t in ("valgrind", "callgrind_control") if shutil.which(t) is None]
    if missing:
        return {"skipped": f"{missing[0]} not found (Debian: apt-get install -y valgrind)"}
    body = (find_fixtures() / "pod-create-from-job-mpi-train.json").read_bytes()
    out: dict[str, Any] = {"reviews": n, "servers": {}}
    with _tls_files() as (tmp, cert, key, ca):
        for name, argv, port in _servers(tmp, cert, key):
            out["servers"][name] = _count_one(argv, port, tmp, body, ca, n)
    ours, ceil = out["servers"]["corral-webhook"], out["servers"]["ceiling (plain aiohttp)"]
    out["ratios"] = {k: _ratio(ours[k], ceil[k]) for k in ours}
    return out


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
    with _tls_files() as (tmp, cert, key, ca):
        kubeconfig = _kubeconfig(tmp, url)
        ctx = ssl.create_default_context(cadata=ca.decode())
        for name, extra in (
            ("with informers", ["--kubeconfig", str(kubeconfig)]),
            ("--no-cluster", ["--no-cluster"]),
        ):
            port = _free_port()
            argv = _serve_argv(port, cert, key, *extra)
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


# --- 2b. through the in-memory API server's admission chain ----------------------------


def _chain_pod() -> bytes:
    """The bench's pod as a client creates it (the API server's own fields left out)."""
    review = json.loads((find_fixtures() / "pod-create-from-job-mpi-train.json").read_text())
    pod = review["request"]["object"]
    for k in ("managedFields", "creationTimestamp", "uid", "resourceVersion"):
        pod["metadata"].pop(k, None)
    pod.pop("status", None)
    return json.dumps(pod).encode()


def bench_chain(
    seconds: float, rounds: int, concurrency: tuple[int, ...] = CONCURRENCY
) -> dict[str, Any]:
    """Pod creations (``generateName``, so each is new) sent to the in-memory API server
    (tests/kubeapi), whose admission chain calls one webhook over verified TLS with
    keep-alive, as kube-apiserver does: one API server calling corral, one calling the
    ceiling, loaded in alternating rounds like the servers alone. The API server's own
    work (storing, applying the patch) is in the figures, as it is on a cluster."""
    if shutil.which("wrk") is None:
        return {"skipped": "wrk not found (apt-get install -y wrk)"}
    pod = _chain_pod()
    with _tls_files() as (tmp, cert, key, ca), contextlib.ExitStack() as stack:
        body_file = tmp / "pod.json"
        body_file.write_bytes(pod)
        lua = tmp / "post.lua"
        lua.write_text(LUA)
        ca_file = tmp / "ca.crt"
        ca_file.write_bytes(ca)
        chains = []
        for name, argv, port in _servers(tmp, cert, key):
            hook = stack.enter_context(Server(name, argv, port))
            api_port = _free_port()
            api_argv = [
                sys.executable,
                "-m",
                "bench._chain",
                str(api_port),
                f"https://127.0.0.1:{port}/mutate",
                str(ca_file),
            ]
            chains.append((stack.enter_context(Server(name, api_argv, api_port)), hook))
        url = "http://127.0.0.1:{}/api/v1/namespaces/ml/pods"

        def load(api: Server, conns: int, secs: float) -> dict[str, float]:
            return _wrk(api.port, conns, secs, lua, body_file, url.format(api.port))

        results = _alternate(chains, concurrency, rounds, seconds, load, "webhook_cpu_us_per_req")
    return {
        "body_bytes": len(pod),
        "seconds_per_run": seconds,
        "rounds": rounds,
        **_summary(results, "webhook_cpu_us_per_req"),
    }


# --- report -----------------------------------------------------------------------------


def verdicts(admit_fig: dict[str, dict[str, float]], srv: dict[str, Any] | None) -> dict[str, Any]:
    worst_cpu = max(v["cpu_p99_us"] for v in admit_fig.values())
    out: dict[str, Any] = {
        "admit_worst_p99_us": max(v["p99_us"] for v in admit_fig.values()),
        "admit_worst_cpu_p99_us": worst_cpu,
        "admit_p99_ok": worst_cpu <= TARGETS["admit_p99_us"],
    }
    if srv is not None:
        ratios = srv["ratios"]
        out["throughput_16_ratio"] = ratios["16"]["rps"]
        out["p50_1_ratio"] = ratios["1"]["p50_us"]
        out["p99_1_ratio"] = ratios["1"]["p99_us"]
        out["throughput_16_ok"] = out["throughput_16_ratio"] >= TARGETS["throughput_16"]
        out["p50_1_ok"] = out["p50_1_ratio"] <= TARGETS["p50_1"]
        out["p99_1_ok"] = out["p99_1_ratio"] <= TARGETS["p99_1"]
    return out


def _ok(good: bool) -> str:
    return "ok" if good else "MISSED"


def render(result: dict[str, Any]) -> str:
    lines = [
        f"load average before/after: {result['loadavg'][0]} / {result['loadavg'][1]} "
        f"({os.cpu_count()} CPUs)",
        "",
        "admit() on the fixture reviews (pure function)",
        "",
        f"  {'review':<42} {'median':>8} {'p99':>9}   {'CPU median':>10} {'CPU p99':>8}",
    ]
    for label, f in result["admit"].items():
        lines.append(
            f"  {label:<42} {f['median_us']:>6.1f}us {f['p99_us']:>7.1f}us   "
            f"{f['cpu_median_us']:>8.1f}us {f['cpu_p99_us']:>6.1f}us"
        )
    v = result["verdicts"]
    lines.append(
        f"  worst p99: {v['admit_worst_cpu_p99_us']:.1f}us of CPU time "
        f"(wall clock {v['admit_worst_p99_us']:.1f}us, preemptions included); "
        f"target <= {TARGETS['admit_p99_us']:.0f}us: {_ok(v['admit_p99_ok'])}"
    )
    srv = result.get("server")
    if srv:
        lines += [
            "",
            f"servers over TLS on 127.0.0.1, keep-alive, POSTing a {srv['body_bytes']}-byte "
            "pod review",
            f"  load generator: {srv['load_generator']}; {srv['seconds_per_run']}s per run, "
            f"median of {srv['rounds']} rounds, side by side, alternating",
            "",
            f"  {'server':<26} {'conns':>5} {'req/s':>9} {'p50':>10} {'p99':>10} "
            f"{'CPU/req':>9} {'errors':>6}",
        ]
        for name, per in srv["servers"].items():
            for c, f in per.items():
                lines.append(
                    f"  {name:<26} {c:>5} {f['rps']:>9.0f} {f['p50_us'] / 1000:>8.3f}ms "
                    f"{f['p99_us'] / 1000:>8.3f}ms {f['cpu_us_per_req']:>7.0f}us "
                    f"{f['errors']:>6.0f}"
                )
        lines.append("")
        checks = (
            ("throughput_16", "throughput at 16 conns vs ceiling", ">="),
            ("p50_1", "median at 1 conn vs ceiling", "<="),
            ("p99_1", "p99 at 1 conn vs ceiling", "<="),
        )
        lines.append(
            "  corral / ceiling, median of the rounds' paired ratios: "
            + "; ".join(
                f"{c} conn{'s' if c != '1' else ''}: throughput {r['rps']:.2f}x, "
                f"p50 {r['p50_us']:.2f}x, p99 {r['p99_us']:.2f}x, "
                f"CPU/req {r['cpu_us_per_req']:.2f}x"
                for c, r in srv["ratios"].items()
            )
        )
        for key, label, cmp in checks:
            lines.append(
                f"  {label:<36} {v[key + '_ratio']:>5.2f}x "
                f"(target {cmp} {TARGETS[key]}x): {_ok(v[key + '_ok'])}"
            )
        rss = ", ".join(f"{k} {m:.0f} MiB" for k, m in srv["rss_mb_after_load"].items())
        lines.append(
            f"  resident memory after the load: {rss} (with informers: python -m bench.webhook "
            "--cluster)"
        )
    ins = result.get("instructions")
    if ins and "skipped" in ins:
        lines += ["", f"instructions per review (callgrind): not counted ({ins['skipped']})"]
    elif ins:
        lines += [
            "",
            f"instructions per review in user space (valgrind's callgrind; {ins['reviews']} "
            "reviews on one connection after a warm-up; the same on any load)",
            "",
            f"  {'server':<26} {'instructions':>12} {'L1i misses':>11} {'L1d misses':>11}",
        ]
        for name, f in ins["servers"].items():
            lines.append(
                f"  {name:<26} {f['instructions']:>12,.0f} {f['l1i_misses']:>11,.0f} "
                f"{f['l1d_read_misses']:>11,.0f}"
            )
        r = ins["ratios"]
        lines.append(
            f"  corral / ceiling: instructions {r['instructions']:.2f}x, "
            f"L1i misses {r['l1i_misses']:.2f}x, L1d misses {r['l1d_read_misses']:.2f}x"
        )
    chain = result.get("chain")
    if chain and "skipped" in chain:
        lines += [
            "",
            f"through the in-memory API server's admission chain: skipped ({chain['skipped']})",
        ]
    elif chain:
        lines += [
            "",
            "through the in-memory API server's admission chain (tests/kubeapi): pod creations "
            f"of {chain['body_bytes']} bytes over HTTP,",
            "  the webhook called over verified TLS with keep-alive; "
            f"{chain['seconds_per_run']}s per run, median of {chain['rounds']} rounds, alternating",
            "",
            f"  {'webhook':<26} {'conns':>5} {'creates/s':>9} {'p50':>10} {'p99':>10} "
            f"{'hook CPU':>9} {'errors':>6}",
        ]
        for name, per in chain["servers"].items():
            for c, f in per.items():
                lines.append(
                    f"  {name:<26} {c:>5} {f['rps']:>9.0f} {f['p50_us'] / 1000:>8.3f}ms "
                    f"{f['p99_us'] / 1000:>8.3f}ms {f['webhook_cpu_us_per_req']:>7.0f}us "
                    f"{f['errors']:>6.0f}"
                )
        lines.append(
            "  corral / ceiling: "
            + "; ".join(
                f"{c} conn{'s' if c != '1' else ''}: creates/s {r['rps']:.2f}x, "
                f"p50 {r['p50_us']:.2f}x, p99 {r['p99_us']:.2f}x"
                for c, r in chain["ratios"].items()
            )
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--iterations", type=int, default=20_000, help="admit() calls per review")
    p.add_argument("--seconds", type=float, default=2.0, help="seconds per load run")
    p.add_argument("--rounds", type=int, default=9, help="alternating rounds per server")
    p.add_argument(
        "--no-instructions",
        action="store_true",
        help="leave out the count of instructions per review under valgrind",
    )
    p.add_argument("--count-reviews", type=int, default=300, help="reviews counted under valgrind")
    p.add_argument("--no-server", action="store_true", help="only the pure function")
    p.add_argument(
        "--no-chain",
        action="store_true",
        help="leave out the run through the in-memory API server's admission chain",
    )
    p.add_argument(
        "--builtin-load", action="store_true", help="use the aiohttp client even if wrk exists"
    )
    p.add_argument(
        "--cluster",
        action="store_true",
        help="only the webhook with informers on a large cluster (see --nodes, --pods)",
    )
    p.add_argument("--nodes", type=int, default=10_000, help="--cluster: nodes (10000)")
    p.add_argument("--pods", type=int, default=100_000, help="--cluster: pods (100000)")
    p.add_argument("--seed", type=int, default=1, help="--cluster: the cluster's seed")
    args = p.parse_args(argv)
    if args.count_reviews < 1:
        p.error("--count-reviews must be >= 1")
    before = os.getloadavg()[0]
    if args.cluster:
        if args.nodes < 1 or args.pods < 0:
            p.error("--nodes must be >= 1 and --pods >= 0")
        res = bench_cluster(args.nodes, args.pods, min(args.iterations, 5000), args.seed)
        res["loadavg"] = [round(before, 2), round(os.getloadavg()[0], 2)]
        print(json.dumps(res) if args.json else render_cluster(res))
        return 0
    result: dict[str, Any] = {"admit": bench_admit(args.iterations)}
    srv = None if args.no_server else bench_servers(args.seconds, args.rounds, args.builtin_load)
    if srv is not None:
        result["server"] = srv
    if not args.no_server and not args.no_instructions:
        result["instructions"] = bench_instructions(args.count_reviews)
    if not args.no_server and not args.no_chain:
        result["chain"] = bench_chain(args.seconds, args.rounds)
    result["loadavg"] = [round(before, 2), round(os.getloadavg()[0], 2)]
    result["verdicts"] = verdicts(result["admit"], srv)
    print(json.dumps(result) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
