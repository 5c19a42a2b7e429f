"""What answering a gang's first pod only once its PodGroup exists costs (``podGroupWait``).

Volcano's ``/pods/validate`` (on by default through Volcano 1.11) refuses a pod whose
PodGroup is not there yet, so corral's webhook makes sure it is before answering a
gang's first pod; the gang's other pods find it known and make no call. This measures
the answer's latency as the API server sees it -- a POST of the AdmissionReview over TLS
on loopback with keep-alive, from sending to the whole answer -- for:

* a bare-pod gang's first pod (its PodGroup created on the request path, without
  owners) and its other pods;
* a Job's first pod (the Job's PodGroup, pending since the Job's admission, created
  with its ownerReference once the pod names the Job's uid) and its other pods;

with ``podGroupWait`` on (the default, 2s) and, as the baseline measured in the same
run, off (``0s``: every answer at once, the PodGroup made afterwards). The PodGroups go
to the in-memory API server (tests/kubeapi) over HTTP, and each admitted object is
stored in it as the API server would, so owners resolve as on a cluster. Everything
runs in one process and one event loop (client, both webhooks, the API server): the
figures include the API server's work for the create, on the same core. Rounds
alternate between the two webhooks, the order flipped each round.

    python -m bench.podgroup_first                 # a table
    python -m bench.podgroup_first --json          # the same figures as JSON
    python -m bench.podgroup_first --gangs 200 --size 4 --rounds 4
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import datetime as dt
import json
import ssl
import statistics
import sys
import time
import uuid
from typing import Any

import aiohttp
import jsonpatch

from bench._common import die
from tests.builders.reviews import review
from tests.kubeapi import ApiServer
from webhook.config import WebhookConfig
from webhook.podgroups.calls import live_reconciler
from webhook.podgroups.reconciler import PodGroupReconciler
from webhook.server import init_app, start
from webhook.tls.certificates import new_bundle
from webhook.tls.contexts import client_context, load_pair, server_context

NS = "ml"
VARIANTS = (("wait", "2s"), ("baseline", "0s"))
CASES = ("bare_first", "bare_other", "job_first", "job_other")

Json = dict[str, Any]


def _pod(name: str, annotations: Json, owner: Json | None = None) -> Json:
    meta: Json = {"name": name, "namespace": NS, "annotations": dict(annotations)}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }


def _job(name: str, size: int) -> Json:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "parallelism": size,
            "completions": size,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": _pod(name, {})["spec"],
            },
        },
    }


class Webhook:
    """corral's webhook on 127.0.0.1 over TLS, its PodGroups going to ``api``."""

    def __init__(self, name: str, wait: str) -> None:
        self.name = name
        self.config = WebhookConfig(pod_group_wait=wait)
        self.url = ""
        self.reconciler: PodGroupReconciler | None = None
        self._runner: Any = None

    async def start(self, api: ApiServer, ctx: ssl.SSLContext) -> None:
        self.reconciler = live_reconciler(api.client(self.name), self.config)
        app = init_app(self.config, reconciler=self.reconciler)
        self._runner, port = await start(app, "127.0.0.1", 0, ctx, shutdown_timeout=0.5)
        self.url = f"https://127.0.0.1:{port}/mutate?timeout=5s"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


class Bench:
    def __init__(self, api: ApiServer, session: aiohttp.ClientSession) -> None:
        self.api = api
        self.session = session
        self.pods = api.store.resource("pods")
        self.jobs = api.store.resource("jobs", "batch")

    async def post(self, hook: Webhook, body: Json) -> tuple[float, Json]:
        data = json.dumps(body).encode()
        t0 = time.perf_counter()
        async with self.session.post(
            hook.url, data=data, headers={"Content-Type": "application/json"}
        ) as r:
            raw = await r.read()
        took = time.perf_counter() - t0
        out: Json = json.loads(raw)
        if r.status != 200 or not out["response"]["allowed"]:
            raise RuntimeError(f"{hook.name}: review not allowed: {raw[:300]!r}")
        return took, out

    def admitted(self, rev: Json, answer: Json) -> Json:
        """The object as the API server stores it: the patch applied."""
        obj: Json = copy.deepcopy(rev["request"]["object"])
        patch = answer["response"].get("patch")
        if patch:
            patched: Json = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(patch)))
            return patched
        return obj

    async def bare_gang(
        self, hook: Webhook, tag: str, size: int, out: dict[str, list[float]]
    ) -> None:
        gang = f"bare-{tag}"
        for i in range(size):
            pod = _pod(
                f"{gang}-{i}", {"corral.dev/gang": gang, "corral.dev/min-available": str(size)}
            )
            rev = review(pod)
            took, answer = await self.post(hook, rev)
            out["bare_first" if i == 0 else "bare_other"].append(took)
            self.api.store.create(self.pods, NS, self.admitted(rev, answer))

    async def job_gang(
        self, hook: Webhook, tag: str, size: int, out: dict[str, list[float]]
    ) -> None:
        name = f"job-{tag}"
        rev = review(_job(name, size), group="batch")
        _, answer = await self.post(hook, rev)
        job = self.api.store.create(self.jobs, NS, self.admitted(rev, answer))
        owner = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": name,
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        template = job["spec"]["template"]
        for i in range(size):
            pod = _pod(f"{name}-{i}", template["metadata"].get("annotations") or {}, owner)
            pod["metadata"]["labels"] = dict(template["metadata"].get("labels") or {})
            pod["spec"] = copy.deepcopy(template["spec"])
            rev = review(pod)
            took, answer = await self.post(hook, rev)
            out["job_first" if i == 0 else "job_other"].append(took)
            self.api.store.create(self.pods, NS, self.admitted(rev, answer))


def _quantiles(xs: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in xs)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return {"n": len(ms), "p50_ms": statistics.median(ms), "p99_ms": p99}


async def run(gangs: int, size: int, rounds: int) -> dict[str, Any]:
    bundle = new_bundle(
        "corral-webhook", "corral-system", dt.datetime.now(dt.UTC), ips=["127.0.0.1"]
    )
    sctx = server_context()
    load_pair(sctx, bundle.cert, bundle.key)
    cctx = client_context(bundle.ca_cert)
    hooks = [Webhook(name, wait) for name, wait in VARIANTS]
    times: dict[str, dict[str, list[float]]] = {h.name: {c: [] for c in CASES} for h in hooks}
    async with ApiServer() as api:
        api.store.load([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
        for h in hooks:
            await h.start(api, sctx)
        conn = aiohttp.TCPConnector(ssl=cctx, limit=1)
        try:
            async with aiohttp.ClientSession(connector=conn) as session:
                bench = Bench(api, session)
                warm: dict[str, list[float]] = {c: [] for c in CASES}
                for h in hooks:  # imports, caches, the TLS session
                    await bench.bare_gang(h, f"warm-{h.name}", size, warm)
                    await bench.job_gang(h, f"warm-{h.name}", size, warm)
                for r in range(rounds):
                    for h in hooks if r % 2 == 0 else hooks[::-1]:
                        for g in range(gangs // rounds):
                            tag = f"{h.name}-{r}-{g}-{uuid.uuid4().hex[:6]}"
                            await bench.bare_gang(h, tag, size, times[h.name])
                            await bench.job_gang(h, tag, size, times[h.name])
                        assert h.reconciler is not None
                        await h.reconciler.drain()
        finally:
            for h in hooks:
                await h.stop()
    return {
        "gangs": gangs,
        "size": size,
        "rounds": rounds,
        "variants": {
            h.name: {
                "podGroupWait": h.config.pod_group_wait,
                **{c: _quantiles(times[h.name][c]) for c in CASES},
            }
            for h in hooks
        },
    }


_LABELS = {
    "bare_first": "bare-pod gang, first pod",
    "bare_other": "bare-pod gang, other pods",
    "job_first": "Job, first pod",
    "job_other": "Job, other pods",
}


def render(res: dict[str, Any]) -> str:
    v = res["variants"]
    lines = [
        f"A gang's first pod and the others: {res['gangs']} gangs of each kind, "
        f"{res['size']} pods each, {res['rounds']} alternating rounds",
        "",
        f"{'':28} {'podGroupWait 2s':>22} {'baseline (0s)':>22}",
        f"{'':28} {'p50 ms':>10} {'p99 ms':>11} {'p50 ms':>10} {'p99 ms':>11}",
    ]
    for case in CASES:
        w, b = v["wait"][case], v["baseline"][case]
        lines.append(
            f"{_LABELS[case]:28} {w['p50_ms']:10.2f} {w['p99_ms']:11.2f} "
            f"{b['p50_ms']:10.2f} {b['p99_ms']:11.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.podgroup_first", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--gangs", type=int, default=200, help="gangs of each kind per webhook (default 200)"
    )
    p.add_argument("--size", type=int, default=4, help="pods per gang (default 4)")
    p.add_argument("--rounds", type=int, default=4, help="alternating rounds (default 4)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = p.parse_args(argv)
    if args.size < 2:
        die(f"--size {args.size}: at least 2 (a first pod and another)")
    if args.rounds < 1 or args.gangs < args.rounds:
        die(f"--gangs {args.gangs} --rounds {args.rounds}: at least one gang per round")
    res = asyncio.run(run(args.gangs, args.size, args.rounds))
    print(json.dumps(res, indent=2) if args.json else render(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
