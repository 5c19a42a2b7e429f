"""Writes the study's bundled data, ``shared/gangplace/data/study-*.json``: counts
derived from the Alibaba GPU trace v2023 (the FGD paper's, ATC '23; the CSVs live in
../shared/data/alibaba-gpu-v2023/), never its rows, so that ``corral-descheduler study``
runs on a clone without the trace. Deterministic: run it again and the files do not
change.

- ``study-nodes-trace.json``: the GPU node list's node classes (GPUs, CPU, memory,
  model) and how many nodes each has.
- ``study-mix-trace.json`` (the default mix): one job per GPU pod of the default pod
  list, by the list's own frequencies of (GPUs, CPU, memory) -- a pod sharing a GPU
  counts as one whole GPU -- and a tail of multi-node gangs of 8-GPU workers (shaped
  like the 8-GPU pods of multigpu20) that holds ``TAIL_GPU_SHARE`` of the GPU demand, as
  multigpu20 holds 20% of its GPU demand in multi-GPU pods; gangs of 2, 4 and 8 workers
  in the ratio of that list's 2-, 4- and 8-GPU pods.
- ``study-mix-gang-tail.json``: a heavier tail of gangs (see ``GANG_TAIL``).
- ``study-mix-squared.json``: the study's former mix -- each k-GPU pod of multigpu20
  made k workers of k GPUs -- kept to compare.

    .venv/bin/python -m scripts.make_study_mixes [--trace-dir DIR]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from gangplace.sim.trace_csv import GPU_NODE_FILE, load_nodes, load_pods, pod_list_path
from gangplace.thirdparty import GET_DATA_HINT, trace_dir

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "shared/gangplace/data"
TRACE = (
    "Alibaba GPU cluster trace v2023 (github.com/alibaba/clusterdata, "
    "cluster-trace-gpu-v2023; Weng et al., 'Beware of Fragmentation', USENIX ATC '23)"
)
TAIL_GPU_SHARE = 0.20
GANG_WORKER_GPUS = 8


def _dump(path: Path, data: dict[str, Any]) -> None:
    """One line per key, and per item of a list (small diffs, easy to read)."""
    lines = []
    for k, v in data.items():
        if isinstance(v, list):
            items = ",\n".join(f"  {json.dumps(x)}" for x in v)
            lines.append(f" {json.dumps(k)}: [\n{items}\n ]")
        else:
            lines.append(f" {json.dumps(k)}: {json.dumps(v)}")
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"wrote {path.relative_to(ROOT)}")


def _nodes(d: Path) -> dict[str, Any]:
    nodes = load_nodes(d / GPU_NODE_FILE)
    classes = Counter(
        (n.gpu_count, n.allocatable["cpu"], n.allocatable["memory"] // 2**20, n.gpu_model)
        for n in nodes
    )
    return {
        "source": f"{TRACE}: {GPU_NODE_FILE}, {len(nodes)} nodes, counted by class",
        "classes": [
            {"gpus": g, "cpu": f"{c}m", "memory": f"{m}Mi", "model": model, "count": k}
            for (g, c, m, model), k in sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
    }


def _shapes(d: Path, name: str) -> Counter[tuple[int, int, int]]:
    """(GPUs, CPU milli, memory MiB) of the list's GPU pods; a shared GPU counts as 1."""
    out: Counter[tuple[int, int, int]] = Counter()
    for p in load_pods(pod_list_path(name, d)):
        s = p.shape
        if s.gpu_count == 0:
            continue
        out[(s.gpu_count, s.request("cpu"), s.request("memory") // 2**20)] += 1
    return out


def _entry(workers: int, gpus: int, cpu: int, mem: int, weight: float) -> dict[str, Any]:
    return {
        "workers": workers,
        "gpus": gpus,
        "cpu": f"{cpu}m",
        "memory": f"{mem}Mi",
        "weight": round(weight, 6),
    }


def _trace_mix(d: Path) -> dict[str, Any]:
    single = _shapes(d, "default")
    multi = _shapes(d, "multigpu20")
    n_single = sum(single.values())
    single_gpus = sum(g * k for (g, _, _), k in single.items()) / n_single
    by_gpus = Counter({g: 0 for g in (1, 2, 4, 8)})
    for (g, _, _), k in single.items():
        by_gpus[g] += k
    sizes = Counter({g: 0 for g in (2, 4, 8)})
    for (g, _, _), k in multi.items():
        if g in sizes:
            sizes[g] += k
    workers = {(c, m): k for (g, c, m), k in multi.items() if g == GANG_WORKER_GPUS}
    n_workers = sum(workers.values())
    n_sizes = sum(sizes.values())
    gang_gpus = sum(GANG_WORKER_GPUS * s * k for s, k in sizes.items()) / n_sizes
    # Gangs per single-node job so that gangs hold TAIL_GPU_SHARE of the GPU demand.
    tail = TAIL_GPU_SHARE / (1 - TAIL_GPU_SHARE) * single_gpus / gang_gpus
    total = 1 + tail
    jobs = [
        _entry(1, g, c, m, k / n_single / total)
        for (g, c, m), k in sorted(single.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0]))
    ]
    for s in sorted(sizes):
        for (c, m), k in sorted(workers.items(), key=lambda kv: (-kv[1], kv[0])):
            jobs.append(
                _entry(s, GANG_WORKER_GPUS, c, m, tail * sizes[s] / n_sizes * k / n_workers / total)
            )
    shares = ", ".join(f"{g} GPU {100 * k / n_single:.2f}%" for g, k in sorted(by_gpus.items()))
    return {
        "name": "trace",
        "source": (
            f"{TRACE}. Single-node jobs: openb_pod_list_default.csv, one job per GPU pod "
            f"({n_single}; a pod sharing a GPU counts as one GPU) by its frequencies: "
            f"{shares}. Multi-node tail: gangs of {GANG_WORKER_GPUS}-GPU workers shaped like "
            f"the 8-GPU pods of openb_pod_list_multigpu20.csv, holding "
            f"{100 * TAIL_GPU_SHARE:.0f}% of the GPU demand (multigpu20 holds 20% of its GPU "
            f"demand in multi-GPU pods), of 2 / 4 / 8 workers in the ratio of its 2-, 4- and "
            f"8-GPU pods ({sizes[2]} : {sizes[4]} : {sizes[8]})."
        ),
        "jobs": jobs,
    }


def _squared_mix(d: Path) -> dict[str, Any]:
    multi = _shapes(d, "multigpu20")
    jobs = [
        _entry(g, g, c, m, float(k))
        for (g, c, m), k in sorted(multi.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0]))
        if g >= 2
    ]
    return {
        "name": "squared",
        "source": (
            f"{TRACE}: openb_pod_list_multigpu20.csv, each k-GPU pod (k >= 2) made a gang "
            "of k workers of k GPUs (the study's mix before the trace mix)."
        ),
        "jobs": jobs,
    }


# A heavier tail, by count: (workers, GPUs each, share of jobs). The shape the public
# characterisations give (most jobs ask one GPU; multi-node gangs are few and hold much
# of the GPU time): Jeon et al., ATC '19 (Philly); Hu et al., SC '21 (Helios); Weng et
# al., NSDI '22 (PAI).
GANG_TAIL = (
    (1, 1, 70.0),
    (1, 2, 8.0),
    (1, 4, 8.0),
    (1, 8, 8.0),
    (2, 8, 4.0),
    (4, 8, 1.5),
    (8, 8, 0.5),
)


def _gang_tail_mix(d: Path) -> dict[str, Any]:
    """GANG_TAIL's counts; each worker asks the CPU and memory most frequent among the
    pods of its GPU count (default list; 8-GPU workers: multigpu20's)."""
    single = _shapes(d, "default")
    multi = _shapes(d, "multigpu20")
    jobs = []
    for workers, gpus, share in GANG_TAIL:
        pool = multi if gpus == 8 else single
        (_, c, m), _ = max(
            ((k, n) for k, n in pool.items() if k[0] == gpus), key=lambda kv: (kv[1], kv[0])
        )
        jobs.append(_entry(workers, gpus, c, m, share / 100))
    return {
        "name": "gang-tail",
        "source": (
            "By count 70% 1-GPU jobs, 8% each 2-, 4- and 8-GPU, gangs of 8-GPU workers: "
            "4% 2 x 8, 1.5% 4 x 8, 0.5% 8 x 8 -- the shape of Philly (Jeon et al., ATC '19), "
            "Helios (Hu et al., SC '21) and PAI (Weng et al., NSDI '22): mostly 1-GPU jobs, "
            f"a tail of multi-node gangs holding much of the GPU time. CPU and memory: {TRACE}, "
            "the most frequent of the pods with as many GPUs (default list; 8 GPUs: "
            "multigpu20)."
        ),
        "jobs": jobs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace-dir", type=Path)
    args = ap.parse_args()
    d = args.trace_dir or trace_dir()
    if d is None:
        raise SystemExit(f"no trace folder found: {GET_DATA_HINT}")
    _dump(OUT / "study-nodes-trace.json", _nodes(d))
    _dump(OUT / "study-mix-trace.json", _trace_mix(d))
    _dump(OUT / "study-mix-squared.json", _squared_mix(d))
    _dump(OUT / "study-mix-gang-tail.json", _gang_tail_mix(d))


if __name__ == "__main__":
    main()
