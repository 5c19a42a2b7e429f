"""Descheduler benchmark: plan time at scale, and what a plan buys, beside a baseline.

Clusters of 1,000, 5,000 and 10,000 GPU nodes are drawn from the Alibaba GPU trace
(node models, GPU counts, CPU and memory from its node list; pods from its default pod
list), bound by a random-fit scheduler to about 82% of the GPUs, with multi-GPU gangs
waiting (see ``_trace_cluster.py``); the bundled sample cluster is measured too.

For each: the time to build the planner's state from the List, the time to plan
(median of ``--reps``), and the quality of the plan beside a pod-by-pod baseline that
behaves like the kubernetes-sigs descheduler's HighNodeUtilization: nodes whose GPU
requests are under a threshold are emptied, least used first, pod by pod (lowest
priority first), while the other nodes have room for the pod -- under the same
never-evict rules, disruption budgets and limits as corral. After either, the cluster
lives it the same way: waiting gangs that fit start, then the rest in DRF order; the
baseline's evicted pods are then placed again one by one where they fit.

Figures: pods evicted; GPUs made available to waiting gangs (the GPUs of the gangs that
start after but not before), per pod evicted; gangs left partial (some members evicted,
fewer than minAvailable left running); evicted pods left with no room; FGD
fragmentation F(M) before and after, in GPUs. ``--json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from gangplace.engine import PodRecord, place_gang, place_pod
from gangplace.engine.feasibility import fits
from gangplace.engine.fragmentation import fragmentation
from gangplace.engine.timeparse import parse_time

from bench._trace_cluster import make_cluster, node_rows, pod_rows
from descheduler import DeschedulerConfig, Plan, plan, state_from_list
from descheduler.cli import SAMPLES, SNAPSHOT_TIME
from descheduler.planning.context import PlanContext
from descheduler.planning.gang_demand import Demand
from descheduler.planning.protect import pod_protection
from descheduler.planning.state import ClusterState

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
SAMPLE_NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
HNU_THRESHOLD = 0.5  # a node under 50% of its GPUs requested is "underutilized"


@dataclass
class Quality:
    pods_evicted: int
    gpus_made_available: float
    per_pod: float
    partial_gangs: int
    pods_left_pending: int
    pods_released: int
    waiting_before: int
    waiting_after: int
    frag_before: float
    frag_after: float


def _gpus(demands: dict[str, Demand], keys: set[str]) -> float:
    return sum(demands[k].request.get("gpu", 0) for k in keys if k in demands) / 1000


def _partial_gangs(ctx: PlanContext, evicted: set[int]) -> int:
    """Gangs that lost members but not all, and run fewer than minAvailable."""
    n = 0
    for v in ctx.views.values():
        if not v.is_gang:
            continue
        gone = sum(1 for p in v.running if id(p) in evicted)
        if 0 < gone < len(v.running) and len(v.running) - gone < v.min_available:
            n += 1
    return n


def corral_quality(state: ClusterState, cfg: DeschedulerConfig, p: Plan) -> Quality:
    ctx = PlanContext.build(state, cfg)
    demands = {d.key: d for d in ctx.demands}
    pods = {x.key: x for x in state.snapshot.pods}
    evicted = {id(pods[pm.key]) for m in p.moves for pm in m.pods}
    made = set(p.waiting_before) - set(p.waiting_after)
    gpus = _gpus(demands, made)
    return Quality(
        pods_evicted=p.pods_moved,
        gpus_made_available=gpus,
        per_pod=gpus / p.pods_moved if p.pods_moved else 0.0,
        partial_gangs=_partial_gangs(ctx, evicted),
        pods_left_pending=sum(
            1 for m in p.moves if m.kind != "release-stale" for pm in m.pods if pm.target is None
        ),
        pods_released=sum(len(m.pods) for m in p.moves if m.kind == "release-stale"),
        waiting_before=len(p.waiting_before),
        waiting_after=len(p.waiting_after),
        frag_before=p.fragmentation_before,
        frag_after=p.fragmentation_after,
    )


def _hnu_victims(ctx: PlanContext) -> list[PodRecord]:
    """HighNodeUtilization, pod by pod: underutilized nodes, least used first; on each,
    evictable pods lowest priority first, while some other node has room for them."""
    snap = ctx.snap
    cfg = ctx.config
    total = snap.gpu_total.astype(float)
    used = total - snap.gpu_free_total() / 1000
    share = used / total.clip(min=1)
    under = (snap.gpu_total > 0) & (share < HNU_THRESHOLD)
    by_node = snap.pods_by_node()
    out: list[PodRecord] = []
    for n in sorted(map(int, under.nonzero()[0]), key=lambda i: (share[i], i)):
        pods = sorted(by_node[n], key=lambda p: (p.priority, p.name))
        for p in pods:
            if pod_protection(p, cfg.eviction, ctx.now) is not None:
                continue
            view = ctx.view_of(p)
            if not ctx.movable(view):
                continue
            others = fits(snap, p.shape) & ~under
            if not others.any():
                continue
            if ctx.scratch.budget.refusal([p], view.queue) is not None:
                continue
            ctx.scratch.budget.take([p], view.queue)
            out.append(p)
    return out


def baseline_quality(state: ClusterState, cfg: DeschedulerConfig) -> tuple[Quality, float]:
    t0 = time.perf_counter()
    ctx = PlanContext.build(state, cfg)
    victims = _hnu_victims(ctx)
    seconds = time.perf_counter() - t0
    snap = ctx.snap
    demands = {d.key: d for d in ctx.demands}
    before_f = fragmentation(snap, ctx.workload)
    with snap.what_if():
        started = [d for d in ctx.demands if place_gang(snap, d.gang, ctx.scorer, ctx.options).ok]
    started_keys = {d.key for d in started}
    blocked_before = set(demands) - started_keys
    pending = 0
    with snap.what_if():
        for p in victims:
            snap.remove(p)
        with snap.what_if():
            for p in victims:
                if place_pod(snap, p.shape, ctx.scorer) is None:
                    pending += 1
            after_f = fragmentation(snap, ctx.workload)
        for d in started:
            place_gang(snap, d.gang, ctx.scorer, ctx.options)
        blocked_after = {
            d.key
            for d in ctx.demands
            if d.key not in started_keys
            and not place_gang(snap, d.gang, ctx.scorer, ctx.options).ok
        }
    made = blocked_before - blocked_after
    gpus = _gpus(demands, made)
    q = Quality(
        pods_evicted=len(victims),
        gpus_made_available=gpus,
        per_pod=gpus / len(victims) if victims else 0.0,
        partial_gangs=_partial_gangs(ctx, {id(p) for p in victims}),
        pods_left_pending=pending,
        pods_released=0,
        waiting_before=len(blocked_before),
        waiting_after=len(blocked_after),
        frag_before=before_f,
        frag_after=after_f,
    )
    return q, seconds


def measure(name: str, doc: dict[str, Any], now: datetime, reps: int) -> dict[str, Any]:
    cfg = DeschedulerConfig()
    t0 = time.perf_counter()
    state = state_from_list(doc, now)
    build_s = time.perf_counter() - t0
    snap = state.snapshot
    times = []
    p: Plan | None = None
    for _ in range(reps):
        gc.collect()
        t = time.perf_counter()
        p = plan(state, cfg)
        times.append(time.perf_counter() - t)
    assert p is not None
    corral = corral_quality(state, cfg, p)
    base, base_s = baseline_quality(state, cfg)
    kinds = Counter(m.kind for m in p.moves)
    return {
        "cluster": name,
        "nodes": snap.n_nodes,
        "gpus": int(snap.gpu_total.sum()),
        "pods": sum(1 for x in snap.pods if x.node >= 0),
        "state_build_s": build_s,
        "plan_s": {"median": statistics.median(times), "min": min(times), "reps": reps},
        "baseline_select_s": base_s,
        "moves": dict(kinds),
        "corral": corral.__dict__,
        "baseline": base.__dict__,
    }


def render(results: list[dict[str, Any]]) -> str:
    lines = [
        "Plan time (planner only; the state is built from the List once)",
        f"{'cluster':<22}{'nodes':>7}{'GPUs':>8}{'pods':>8}{'state':>9}{'plan p50':>10}"
        f"{'plan min':>10}",
    ]
    for r in results:
        lines.append(
            f"{r['cluster']:<22}{r['nodes']:>7,}{r['gpus']:>8,}{r['pods']:>8,}"
            f"{r['state_build_s']:>8.2f}s{r['plan_s']['median']:>9.2f}s{r['plan_s']['min']:>9.2f}s"
        )
    lines.append("Target: plan <= 5 s at 5,000 nodes.")
    lines.append("")
    lines.append("What a plan buys: corral (whole gangs) vs pod-by-pod HighNodeUtilization")
    head = (
        f"{'cluster':<22}{'':<9}{'evicted':>8}{'GPUs for':>10}{'per pod':>9}{'partial':>9}"
        f"{'no room':>9}{'waiting':>9}{'F(M) GPUs':>18}"
    )
    sub = (
        f"{'':<22}{'':<9}{'pods':>8}{'waiting':>10}{'evicted':>9}{'gangs':>9}"
        f"{'pods':>9}{'bef>aft':>9}{'before > after':>18}"
    )
    lines += [head, sub, "-" * len(head)]
    for r in results:
        for who in ("corral", "baseline"):
            q = r[who]
            label = r["cluster"] if who == "corral" else ""
            lines.append(
                f"{label:<22}{who:<9}{q['pods_evicted']:>8}{q['gpus_made_available']:>10.1f}"
                f"{q['per_pod']:>9.2f}{q['partial_gangs']:>9}{q['pods_left_pending']:>9}"
                f"{q['waiting_before']:>5}>{q['waiting_after']:<3}"
                f"{q['frag_before']:>10.1f} > {q['frag_after']:<6.1f}"
            )
    lines.append("")
    lines.append(
        "GPUs for waiting: GPUs of the waiting gangs that can start after the moves but "
        "could not before. partial gangs: gangs left with fewer than minAvailable members "
        "running. no room pods: evicted pods that fit nowhere after (members of released "
        "stale gangs not counted: corral released {} such pods). Limits (both): defaults "
        "of the descheduler config.".format(sum(r["corral"]["pods_released"] for r in results))
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="1000,5000,10000", help="cluster sizes in nodes")
    ap.add_argument("--reps", type=int, default=3, help="plans per cluster (median reported)")
    ap.add_argument("--fill", type=float, default=0.82, help="share of GPUs allocated")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    results = []
    for name, file in SAMPLES.items():  # the bundled clusters, `plan`'s default first
        doc = json.loads(resources.files("descheduler.data").joinpath(file).read_text())
        stamp = ((doc.get("metadata") or {}).get("annotations") or {}).get(SNAPSHOT_TIME)
        when = parse_time(stamp) if stamp else SAMPLE_NOW
        results.append(measure(f"sample:{name}", doc, when, a.reps))
    nodes, pods = node_rows(), pod_rows()
    for n in (int(x) for x in a.sizes.split(",") if x):
        doc = make_cluster(n, fill=a.fill, seed=a.seed, nodes=nodes, pods=pods)
        results.append(measure(f"trace {n:,} nodes", doc, NOW, a.reps))
        del doc
    out = {"fill": a.fill, "seed": a.seed, "results": results}
    print(json.dumps(out, indent=2) if a.json else render(results))


if __name__ == "__main__":
    main()
