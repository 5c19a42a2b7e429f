"""Engine benchmark: snapshot build and gang placement at cluster scale.

Builds a snapshot from 10,000 Node and 100,000 Pod JSON objects, then places gangs of
1, 8 and 64 one-GPU pods (dry runs on the same snapshot), and the same placements done
by a straightforward per-node Python loop -- the baseline -- in the same run. Prints a
table; ``--json`` prints one JSON object with the same figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from typing import Any

from gangplace.engine import Gang, GangOptions, PodShape, Snapshot, place_gang
from gangplace.engine.feasibility import static_mask
from gangplace.engine.scoring import DEFAULT_WEIGHTS

from bench._cluster import make_nodes, make_pods

SHAPE = PodShape.of({"cpu": 8000, "memory": 64 * 2**30}, gpus=1)


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


class LoopBaseline:
    """The placement a straightforward scheduler loop makes: every member checks every
    node in Python, scores it with the same binpack formula, takes the best."""

    def __init__(self, snap: Snapshot, shape: PodShape) -> None:
        r = snap.res_index
        self.cols = [(r[k], v) for k, v in shape.requests if k in r]
        self.alloc = snap.alloc.tolist()
        self.used = snap.used.tolist()
        self.gpus = [[g for g in row if g >= 0] for row in snap.gpu_free.tolist()]
        self.static = static_mask(snap, shape).tolist()
        self.shape = shape
        self.cpu, self.mem = r["cpu"], r["memory"]

    def place(self, size: int) -> list[tuple[int, tuple[int, ...]]]:
        used = [row[:] for row in self.used]
        gpus = [row[:] for row in self.gpus]
        w = DEFAULT_WEIGHTS
        out: list[tuple[int, tuple[int, ...]]] = []
        mine: set[int] = set()
        req_cpu, req_mem = self.shape.request("cpu"), self.shape.request("memory")
        k, d = self.shape.gpu_count, self.shape.gpu_milli
        for _ in range(size):
            best, best_score = -1, -1.0
            for n in range(len(self.alloc)):
                if not self.static[n]:
                    continue
                a, u = self.alloc[n], used[n]
                if any(u[j] + v > a[j] for j, v in self.cols):
                    continue
                devs = gpus[n]
                if sum(1 for g in devs if g >= d) < k:
                    continue
                score = (
                    (
                        w["cpu"] * (u[self.cpu] + req_cpu) / a[self.cpu]
                        + w["memory"] * (u[self.mem] + req_mem) / a[self.mem]
                        + w["gpu"] * (len(devs) * 1000 - sum(devs) + k * d) / (len(devs) * 1000)
                    )
                    / (w["cpu"] + w["memory"] + w["gpu"])
                    * 100
                )
                if n in mine:
                    score += 400.0
                if score > best_score:
                    best, best_score = n, score
            if best < 0:
                return []
            chosen = tuple(i for i, g in enumerate(gpus[best]) if g >= 1000)[:k]
            for j, v in self.cols:
                used[best][j] += v
            for g in chosen:
                gpus[best][g] -= d
            mine.add(best)
            out.append((best, chosen))
        return out


def timed(fn: Any, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def run(nodes: int, pods: int, reps: int, loop_reps: int) -> dict[str, Any]:
    node_objs = make_nodes(nodes)
    pod_objs = make_pods(pods, node_objs)
    builds = []
    snap: Snapshot | None = None
    for _ in range(3):
        gc.collect()
        t = time.perf_counter()
        snap = Snapshot.from_objects(node_objs, pod_objs)
        builds.append(time.perf_counter() - t)
    assert snap is not None
    result: dict[str, Any] = {
        "nodes": nodes,
        "pods": pods,
        "snapshot_build_s": {"median": statistics.median(builds), "min": min(builds)},
        "place_gang": [],
    }
    base = LoopBaseline(snap, SHAPE)
    for size in (1, 8, 64):
        gang = Gang.uniform(f"bench-{size}", SHAPE, size)
        opts = GangOptions(dry_run=True)
        first = place_gang(snap, gang, options=opts)
        engine = [(a.node, a.gpus) for a in first.assignments]
        same = engine == base.place(size)
        eng_t = timed(lambda g=gang, o=opts: place_gang(snap, g, options=o), reps)
        loop_t = timed(lambda s=size: base.place(s), loop_reps)
        med, loop_med = statistics.median(eng_t), statistics.median(loop_t)
        result["place_gang"].append(
            {
                "gang_size": size,
                "engine_ms": {"median": med * 1e3, "p99": percentile(eng_t, 99) * 1e3},
                "loop_ms": {"median": loop_med * 1e3, "p99": percentile(loop_t, 99) * 1e3},
                "speedup": loop_med / med,
                "same_placement": same,
            }
        )
    return result


def render(r: dict[str, Any]) -> str:
    b = r["snapshot_build_s"]
    lines = [
        f"Snapshot build from {r['nodes']:,} nodes and {r['pods']:,} pods: "
        f"median {b['median']:.2f} s (min {b['min']:.2f} s; target <= 3 s)",
        "",
        f"{'gang':>5} {'engine p50':>11} {'engine p99':>11} {'loop p50':>10} {'loop p99':>10}"
        f" {'speedup':>8}  same placement",
    ]
    for g in r["place_gang"]:
        e, lp = g["engine_ms"], g["loop_ms"]
        lines.append(
            f"{g['gang_size']:>5} {e['median']:>9.2f}ms {e['p99']:>9.2f}ms {lp['median']:>8.1f}ms"
            f" {lp['p99']:>8.1f}ms {g['speedup']:>7.0f}x  {'yes' if g['same_placement'] else 'NO'}"
        )
    lines.append("")
    lines.append("Targets: an 8-pod gang in <= 5 ms median, >= 20x faster than the loop.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--pods", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=200, help="engine repetitions per gang size")
    ap.add_argument("--loop-reps", type=int, default=5, help="baseline repetitions per gang size")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    r = run(a.nodes, a.pods, a.reps, a.loop_reps)
    print(json.dumps(r, indent=2) if a.json else render(r))


if __name__ == "__main__":
    main()
