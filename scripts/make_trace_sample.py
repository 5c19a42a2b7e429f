"""Writes descheduler/data/sample-trace.json: the default cluster of `corral-descheduler
plan`, built from the Alibaba GPU trace (v2023, the FGD paper's; the CSVs live in
../shared/data/alibaba-gpu-v2023/), as `kubectl get nodes,pods,pdb,podgroups,queues,
priorityclasses -A -o json` would list it. Deterministic: run it again and the file
does not change.

- Nodes: 48 real nodes of the trace's GPU node list (their names, CPU, memory, GPU
  count and model), drawn with a fixed seed.
- Running pods: the trace's default pod list replayed onto them with the engine (the
  paper's arrival sequence for one seed, up to 86% of the GPUs asked for, placed by the
  paper's Random policy: a scheduler that does not think about fragmentation), so the
  idle GPUs end up scattered. Each pod keeps its trace shape (CPU, memory, whole or
  shared GPU, model constraint) and its devices.
- Gangs: the whole-GPU training pods are grouped into data-parallel gangs of 2 to 4
  workers of one shape, each with a Volcano PodGroup (some elastic: minMember below
  their size). Shared-GPU pods are notebooks (queue research) and inference services
  (queue inference, `reclaimable: false`, under a PodDisruptionBudget); CPU-only pods
  are data-prep jobs.
- Waiting: gangs shaped like the trace's multi-GPU pods (PodGroups Inqueue, pods
  Pending) that do not fit as the cluster stands. A training gang sits under a budget
  that allows no disruption. (Stale partial gangs are shown by the small hand-built
  sample, ``--snapshot sample:small``.)

    .venv/bin/python -m scripts.make_trace_sample [--trace-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gangplace.engine import PodRecord, PodShape, Snapshot
from gangplace.engine.fragmentation import TargetWorkload
from gangplace.engine.model import GPU_SHARE_INDEX
from gangplace.engine.policies import PolicyContext, make_policy
from gangplace.sim.arrivals import paper_arrivals
from gangplace.sim.replay import replay
from gangplace.sim.trace_csv import GPU_NODE_FILE, load_nodes, load_pods, pod_list_path
from gangplace.thirdparty import GET_DATA_HINT, trace_dir

from tests.builders import objects as b

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "descheduler/data/sample-trace.json"
TAKEN = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
MODEL_LABEL = "alibabacloud.com/gpu-card-model"
SEED = 1
NODES = 48
FILL = 0.86  # GPU asked for, as a share of capacity
GANG_SHARE = 0.85  # of the whole-GPU pods, the share grouped into gangs

# Waiting gangs: (namespace, name, queue, pods, GPUs per pod, CPU milli, memory MiB).
# The waiting gangs' priority (PriorityClass batch-high): above the running batch work,
# so the descheduler may move that work for them.
WAITING_PRIORITY = 1000
WAITING = [
    ("training", "llm-pretrain", "training", 2, 8, 64000, 262144),
    ("research", "vision-finetune", "research", 2, 4, 32000, 131072),
    ("training", "rl-rollout", "training", 4, 2, 16000, 65536),
]


def ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def node_json(rec: Any) -> dict[str, Any]:
    alloc = {
        "cpu": f"{rec.allocatable['cpu']}m",
        "memory": f"{rec.allocatable['memory'] // (1 << 20)}Mi",
        "pods": "110",
        b.GPU: str(rec.gpu_count),
    }
    return b.node(
        rec.name, alloc, labels={"kubernetes.io/hostname": rec.name, MODEL_LABEL: rec.gpu_model}
    )


def pod_json(
    ns: str,
    name: str,
    shape: PodShape,
    *,
    node: str = "",
    gpus: tuple[int, ...] = (),
    owner: tuple[str, str],
    created: datetime,
    gang: str | None = None,
    queue: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority_class: str = "",
    priority: int = 0,
) -> dict[str, Any]:
    req = {
        "cpu": f"{shape.request('cpu')}m",
        "memory": f"{shape.request('memory') // (1 << 20)}Mi",
    }
    ann = dict(annotations or {})
    if shape.is_gpu and shape.gpu_milli >= 1000:
        req[b.GPU] = str(shape.gpu_count)
    elif shape.is_gpu:
        ann.update(b.gpu_share(shape.gpu_milli))
    if shape.gpu_models:
        ann[MODEL_LABEL] = "|".join(shape.gpu_models)
    if gpus:
        ann[GPU_SHARE_INDEX] = ",".join(map(str, gpus))
    if gang:
        ann["scheduling.k8s.io/group-name"] = gang
    if queue:
        ann["scheduling.volcano.sh/queue-name"] = queue
    kind, owner_name = owner
    return b.pod(
        name,
        ns,
        requests=req,
        node=node,
        scheduler="volcano",
        priority=priority,
        priority_class=priority_class or None,
        uid=f"uid-{ns}-{name}",
        labels=labels or {},
        annotations=ann,
        created=ts(created),
        owner=b.owner_ref(kind, owner_name, uid=f"uid-{kind.lower()}-{ns}-{owner_name}"),
    )


def podgroup_json(
    ns: str,
    name: str,
    min_member: int,
    queue: str,
    phase: str,
    created: datetime,
    *,
    annotations: dict[str, str] | None = None,
    min_resources: dict[str, str] | None = None,
) -> dict[str, Any]:
    return b.podgroup(
        name,
        ns,
        min_member=min_member,
        queue=queue,
        min_resources=min_resources or None,
        uid=f"uid-pg-{ns}-{name}",
        created=ts(created),
        annotations=annotations or {},
        phase=phase,
    )


def pdb_json(ns: str, name: str, app: str, matching: int, **bound: int) -> dict[str, Any]:
    """A budget over ``matching`` healthy pods, with the status the disruption
    controller computes for it."""
    desired = (
        matching - bound["max_unavailable"]
        if "max_unavailable" in bound
        else bound["min_available"]
    )
    return b.pdb(
        name,
        ns,
        match_labels={"app": app},
        min_available=bound.get("min_available"),
        max_unavailable=bound.get("max_unavailable"),
        generation=1,
        status={
            "observedGeneration": 1,
            "disruptionsAllowed": max(0, matching - desired),
            "currentHealthy": matching,
            "desiredHealthy": desired,
            "expectedPods": matching,
        },
    )


def build(trace_dir: Path) -> dict[str, Any]:
    rnd = random.Random(SEED)
    every = load_nodes(trace_dir / GPU_NODE_FILE)
    picked = sorted(rnd.sample(range(len(every)), NODES))
    nodes = [every[i] for i in picked]
    trace_pods = load_pods(pod_list_path("default", trace_dir))
    snap = Snapshot(nodes)
    capacity = int(snap.gpu_total.sum()) * 1000
    arrivals = paper_arrivals(trace_pods, snap.n_nodes, capacity, SEED, inflate=FILL)
    snap.node_rank = arrivals.node_rank
    workload = TargetWorkload.from_shapes([p.shape for p in trace_pods])
    policy = make_policy("random", PolicyContext(workload, arrivals.rng))
    replay(snap, arrivals.pods, policy, workload)
    placed = [p for p in snap.pods if p.node >= 0]

    items: list[dict[str, Any]] = [node_json(n) for n in nodes]
    names = snap.node_names

    def age(hours_min: int, hours_max: int) -> datetime:
        return TAKEN - timedelta(minutes=rnd.randrange(hours_min * 60, hours_max * 60))

    # Whole-GPU pods: data-parallel gangs of one shape, 2 to 4 workers.
    whole: dict[PodShape, list[PodRecord]] = {}
    for p in placed:
        if p.shape.is_gpu and p.shape.gpu_milli >= 1000:
            whole.setdefault(p.shape, []).append(p)
    gangs: list[list[PodRecord]] = []
    singles: list[PodRecord] = []
    for shape in sorted(whole, key=lambda s: (s.gpu_count, s.request("cpu"), s.request("memory"))):
        pods = whole[shape]
        rnd.shuffle(pods)
        cut = int(len(pods) * GANG_SHARE)
        rest = pods[:cut]
        singles += pods[cut:]
        while len(rest) >= 2:
            k = min(rnd.choice((2, 2, 3, 4)), len(rest))
            gangs.append(rest[:k])
            rest = rest[k:]
        singles += rest

    protected_gang, protected_size = "", 0
    for n_gang, members in enumerate(gangs, 1):
        ns, queue = ("training", "training") if n_gang % 3 else ("research", "research")
        name = f"ddp-{n_gang:03d}"
        created = age(1, 72)
        elastic = len(members) >= 3 and rnd.random() < 0.4
        items.append(
            podgroup_json(
                ns, name, len(members) - 1 if elastic else len(members), queue, "Running", created
            )
        )
        if not protected_gang and len(members) >= 3 and ns == "training":
            protected_gang, protected_size = name, len(members)
        for i, p in enumerate(members):
            items.append(
                pod_json(
                    ns,
                    f"{name}-worker-{i}",
                    p.shape,
                    node=names[p.node],
                    gpus=p.gpus,
                    owner=("Job", name),
                    created=created,
                    gang=name,
                    queue=queue,
                    labels={"app": name},
                )
            )

    # Shared-GPU pods: inference services (not reclaimable) and notebooks.
    n_job = n_svc = n_nb = 0
    services = ["search-ranker", "ad-ctr", "speech-tts", "ocr"]
    per_service: Counter[str] = Counter()
    for p in placed:
        if p.shape.is_gpu and p.shape.gpu_milli >= 1000:
            continue
        if p.shape.is_gpu:
            if rnd.random() < 0.45:
                svc = services[n_svc % len(services)]
                n_svc += 1
                per_service[svc] += 1
                items.append(
                    pod_json(
                        "inference",
                        f"{svc}-{per_service[svc]:03d}",
                        p.shape,
                        node=names[p.node],
                        gpus=p.gpus,
                        owner=("ReplicaSet", f"{svc}-7d9f"),
                        created=age(24, 240),
                        queue="inference",
                        labels={"app": svc},
                        priority_class="serving",
                        priority=10000,
                    )
                )
            else:
                n_nb += 1
                items.append(
                    pod_json(
                        "research",
                        f"notebook-{n_nb:03d}",
                        p.shape,
                        node=names[p.node],
                        gpus=p.gpus,
                        owner=("Job", f"notebook-{n_nb:03d}"),
                        created=age(1, 48),
                        queue="research",
                        labels={"app": "notebook"},
                    )
                )
        else:
            n_job += 1
            items.append(
                pod_json(
                    "data",
                    f"etl-{n_job:03d}",
                    p.shape,
                    node=names[p.node],
                    owner=("Job", f"etl-{n_job:03d}"),
                    created=age(1, 24),
                    queue="default",
                    labels={"app": "etl"},
                )
            )
    for p in singles:
        n_job += 1
        items.append(
            pod_json(
                "training",
                f"train-{n_job:03d}",
                p.shape,
                node=names[p.node],
                gpus=p.gpus,
                owner=("Job", f"train-{n_job:03d}"),
                created=age(1, 72),
                queue="training",
                labels={"app": f"train-{n_job:03d}"},
            )
        )

    # Waiting gangs, shaped like the trace's multi-GPU pods; G2 nodes (the trace's
    # most common 8-GPU model) are what they ask for.
    for ns, name, queue, size, gpus, cpu, mem in WAITING:
        created = TAKEN - timedelta(minutes=rnd.randrange(5, 90))
        items.append(podgroup_json(ns, name, size, queue, "Inqueue", created))
        shape = PodShape.of({"cpu": cpu, "memory": mem << 20}, gpus=gpus, gpu_models=("G2",))
        for i in range(size):
            items.append(
                pod_json(
                    ns,
                    f"{name}-worker-{i}",
                    shape,
                    owner=("Job", name),
                    created=created,
                    gang=name,
                    queue=queue,
                    labels={"app": name},
                    priority_class="batch-high",
                    priority=WAITING_PRIORITY,
                )
            )

    items += jobs_of(items)
    items += [
        b.queue("default", 1, state="Open"),
        b.queue("training", 4, state="Open"),
        b.queue("research", 2, state="Open"),
        b.queue("inference", 2, reclaimable=False, state="Open"),
        b.priority_class("serving", 10000),
        b.priority_class("batch-high", WAITING_PRIORITY),
        pdb_json(
            "inference",
            "search-ranker",
            "search-ranker",
            per_service["search-ranker"],
            max_unavailable=1,
        ),
    ]
    if protected_gang:
        items.append(
            pdb_json(
                "training",
                protected_gang,
                protected_gang,
                protected_size,
                min_available=protected_size,
            )
        )
    return {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"annotations": {"corral.dev/snapshot-time": ts(TAKEN)}},
        "items": items,
    }


def jobs_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A batch/v1 Job for every Job that owns pods, in order of first mention. How each
    may move follows from its fields: ETL jobs retry (backoffLimit 6); training jobs
    and gangs must not retry blindly (backoffLimit 0), and every other one has the
    podFailurePolicy rule that does not count an eviction; notebooks tolerate 2."""
    seen: dict[tuple[str, str], int] = {}
    for x in items:
        if x["kind"] != "Pod":
            continue
        ref = x["metadata"]["ownerReferences"][0]
        if ref["kind"] == "Job":
            key = (x["metadata"]["namespace"], ref["name"])
            seen[key] = seen.get(key, 0) + 1
    out = []
    for i, ((ns, name), n) in enumerate(seen.items()):
        limit = 6 if name.startswith("etl-") else 2 if name.startswith("notebook-") else 0
        out.append(
            b.job(
                name,
                ns,
                backoff_limit=limit,
                parallelism=n,
                ignore_disruption=limit == 0 and i % 2 == 0,
                uid=f"uid-job-{ns}-{name}",
                created=ts(TAKEN - timedelta(hours=1)),
            )
        )
    return out


def write(doc: dict[str, Any], path: Path) -> None:
    """One object per line: small, and a change to one object is a one-line diff."""
    lines = [json.dumps(x, separators=(",", ":"), sort_keys=True) for x in doc["items"]]
    head = {k: v for k, v in doc.items() if k != "items"}
    text = json.dumps(head, separators=(",", ":"), sort_keys=True)[:-1]
    path.write_text(text + ',"items":[\n' + ",\n".join(lines) + "\n]}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--trace-dir",
        help="the trace's folder (default: $CORRAL_DATA's, or ../shared's found upward from here)",
    )
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    folder = Path(args.trace_dir) if args.trace_dir else trace_dir(Path(__file__))
    if folder is None:
        raise SystemExit(
            f"trace folder not found: give --trace-dir or set $CORRAL_DATA; {GET_DATA_HINT}"
        )
    write(build(folder), Path(args.out))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
