"""``bench.webhook``'s servers: corral's webhook and the ceiling (the least a correct
aiohttp webhook does), run as processes over TLS and loaded in alternating rounds by
wrk or a built-in client; the instructions each executes per review under callgrind;
and both called through the in-memory API server's admission chain. The figures and
their targets are described in :mod:`bench.webhook`."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
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

from webhook.review_demo import find_fixtures
from webhook.tls.certificates import new_bundle

REPO = Path(__file__).resolve().parents[1]

CONCURRENCY = (1, 16)


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


def free_port() -> int:
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


def serve_argv(port: int, cert: Path, key: Path, *extra: str) -> list[str]:
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
    p = free_port()
    ceiling = [sys.executable, str(ceiling_py), str(p), str(cert), str(key)]
    out.append(("ceiling (plain aiohttp)", ceiling, p))
    p = free_port()
    out.append(("corral-webhook", serve_argv(p, cert, key, "--no-cluster"), p))
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
def tls_files() -> Iterator[tuple[Path, Path, Path, bytes]]:
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
    with tls_files() as (tmp, cert, key, ca), contextlib.ExitStack() as stack:
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
    with tls_files() as (tmp, cert, key, ca):
        for name, argv, port in _servers(tmp, cert, key):
            out["servers"][name] = _count_one(argv, port, tmp, body, ca, n)
    ours, ceil = out["servers"]["corral-webhook"], out["servers"]["ceiling (plain aiohttp)"]
    out["ratios"] = {k: _ratio(ours[k], ceil[k]) for k in ours}
    return out


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
    with tls_files() as (tmp, cert, key, ca), contextlib.ExitStack() as stack:
        body_file = tmp / "pod.json"
        body_file.write_bytes(pod)
        lua = tmp / "post.lua"
        lua.write_text(LUA)
        ca_file = tmp / "ca.crt"
        ca_file.write_bytes(ca)
        chains = []
        for name, argv, port in _servers(tmp, cert, key):
            hook = stack.enter_context(Server(name, argv, port))
            api_port = free_port()
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
