"""What ``eviction.victim_priority`` changes on a cluster where everything runs at
priority 0 (no PriorityClass in use, as on most clusters): waiting gangs unblocked and
pods moved with ``LowerPriority`` (the old default) and ``LowerOrEqualPriority`` (the
default: equal priorities moved only as consolidations), and the plan's time.

The cluster is trace-shaped (see ``_trace_cluster.py``): ``--nodes`` nodes drawn from
the Alibaba GPU trace's node list (1,213 nodes, its size, by default), filled by a
random-fit binder with pods of its default pod list to ``--fill`` of the GPUs (their
Jobs checkpoint every 30 minutes), and
``--waiting`` gangs of one 8-GPU pod waiting on top, every pod at priority 0. Every
setting plans the same state ``--reps`` times; the median and the fastest are shown.
``--json`` prints one object.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

from gangplace.engine.checkpoints import ANNOTATION_CHECKPOINT_INTERVAL as CHECKPOINT_INTERVAL

from bench._common import die, trace_folder
from bench._trace_cluster import _NOW, NOW, PodRow, _pod, _podgroup, make_cluster, node_rows
from bench._trace_cluster import pod_rows as trace_pods
from descheduler import Plan, parse_config, plan, state_from_list
from tests.builders import objects as b

SETTINGS = ("LowerPriority", "LowerOrEqualPriority")


def cluster(nodes: int, waiting: int, fill: float, seed: int, trace: Path) -> dict[str, Any]:
    rows = node_rows(trace / "openb_node_list_gpu_node.csv")
    pods = trace_pods(trace / "openb_pod_list_default.csv")
    doc = make_cluster(nodes or len(rows), fill=fill, waiting=0, seed=seed, nodes=rows, pods=pods)
    # The trace cluster's pods name their Job; the Jobs themselves make them movable
    # (suspended and resumed by default). They checkpoint every 30 minutes, so a move
    # loses at most that much work: the cap on work at risk does not decide here.
    jobs: dict[tuple[str, str], int] = {}
    for x in doc["items"]:
        if x["kind"] == "Pod":
            ref = x["metadata"]["ownerReferences"][0]
            key = (x["metadata"]["namespace"], ref["name"])
            jobs[key] = jobs.get(key, 0) + 1
    doc["items"] += [
        b.job(name, ns, parallelism=n, annotations={CHECKPOINT_INTERVAL: "30m"})
        for (ns, name), n in sorted(jobs.items())
    ]
    row = PodRow(32000, 262144, 8, 1000, "")
    for w in range(waiting):
        gang = f"wait8-{w}"
        doc["items"].append(_podgroup(gang, "waiting", 1, "Inqueue", NOW))
        doc["items"].append(_pod(f"{gang}-0", "waiting", row, "", [], gang, NOW))
    return doc


def measure(doc: dict[str, Any], setting: str, reps: int) -> dict[str, Any]:
    cfg = parse_config({"eviction": {"victim_priority": setting}})
    state = state_from_list(doc, _NOW)
    times: list[float] = []
    p: Plan | None = None
    for _ in range(reps):
        gc.collect()
        t = time.perf_counter()
        p = plan(state, cfg)
        times.append(time.perf_counter() - t)
    assert p is not None
    return {
        "setting": setting,
        "waiting_before": len(p.waiting_before),
        "waiting_after": len(p.waiting_after),
        "unblocked": len(set(p.waiting_before) - set(p.waiting_after)),
        "moves": len(p.moves),
        "pods_moved": p.pods_moved,
        "gangs_served": len({m.for_gang for m in p.moves if m.for_gang}),
        "plan_s": {"median": statistics.median(times), "min": min(times), "reps": reps},
        "notes": p.notes,
    }


def render(head: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{head['nodes']:,} nodes, {head['gpus']:,} GPUs, {head['pods']:,} pods running at "
        f"{head['fill']:.0%} of GPUs, {head['waiting']} waiting 8-GPU gangs; priority 0 "
        "everywhere",
        f"{'victim_priority':<22}{'waiting':>9}{'unblocked':>11}{'moves':>7}{'pods':>6}"
        f"{'plan p50':>10}{'plan min':>10}",
    ]
    for r in rows:
        lines.append(
            f"{r['setting']:<22}{r['waiting_before']:>9}{r['unblocked']:>11}{r['moves']:>7}"
            f"{r['pods_moved']:>6}{r['plan_s']['median']:>9.2f}s{r['plan_s']['min']:>9.2f}s"
        )
    lines.append(
        "waiting: gangs that cannot start before the plan; unblocked: of those, the ones "
        "that start after it; pods: pods moved (every one placed again by the plan)."
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=0, help="nodes (0: the trace's node count)")
    ap.add_argument("--waiting", type=int, default=12, help="waiting 8-GPU gangs")
    ap.add_argument("--fill", type=float, default=0.85, help="share of GPUs in use")
    ap.add_argument("--seed", type=int, default=7, help="the cluster's random seed")
    ap.add_argument("--reps", type=int, default=5, help="plans per setting (median shown)")
    ap.add_argument("--trace-dir", default=None, help="the Alibaba GPU trace's folder")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if args.nodes < 0 or args.waiting < 0 or args.reps < 1 or not 0 < args.fill < 1:
        die("--nodes and --waiting must be >= 0, --reps >= 1, --fill between 0 and 1")
    trace = trace_folder(args.trace_dir, Path(__file__).resolve().parent)
    doc = cluster(args.nodes, args.waiting, args.fill, args.seed, trace)
    snap = state_from_list(doc, _NOW).snapshot
    head = {
        "nodes": snap.n_nodes,
        "gpus": int(snap.gpu_total.sum()),
        "pods": sum(1 for x in snap.pods if x.node >= 0),
        "fill": args.fill,
        "waiting": args.waiting,
        "seed": args.seed,
    }
    rows = [measure(doc, s, args.reps) for s in SETTINGS]
    if args.json:
        print(json.dumps({"cluster": head, "settings": rows}, indent=2))
    else:
        print(render(head, rows))


if __name__ == "__main__":
    main()
