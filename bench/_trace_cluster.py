"""Fragmented GPU clusters shaped like the Alibaba GPU trace (FGD, ATC '23), as a
Kubernetes List: nodes drawn from the trace's node list (models, GPU counts, CPU and
memory), pods drawn from its default pod list (whole and shared GPUs, CPU-only pods),
bound by a random-fit scheduler until most GPUs are in use -- which leaves the idle
GPUs scattered -- and multi-GPU gangs waiting on top.
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gangplace import thirdparty
from gangplace.thirdparty import trace_dir

from tests.builders import objects as b

ROOT = Path(__file__).resolve().parents[1]

# The trace is not in the repository: $CORRAL_DATA's or ../shared's (gangplace.thirdparty).
TRACE = trace_dir(ROOT) or ROOT.parent / "shared" / thirdparty.TRACE
NODES_CSV = TRACE / "openb_node_list_gpu_node.csv"
PODS_CSV = TRACE / "openb_pod_list_default.csv"
MODEL_LABEL = "alibabacloud.com/gpu-card-model"
NOW = "2026-12-02T12:00:00Z"
_NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)

# Waiting gangs: (pods, GPUs per pod).
WAITING_SHAPES = [(1, 8), (2, 8), (2, 4), (4, 4), (1, 4), (4, 2)]


@dataclass(frozen=True, slots=True)
class NodeRow:
    cpu: int
    mem_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class PodRow:
    cpu: int
    mem_mib: int
    gpus: int
    milli: int
    spec: str


def node_rows(path: Path = NODES_CSV) -> list[NodeRow]:
    with path.open() as f:
        return [
            NodeRow(int(r["cpu_milli"]), int(r["memory_mib"]), int(r["gpu"]), r["model"])
            for r in csv.DictReader(f)
        ]


def pod_rows(path: Path = PODS_CSV) -> list[PodRow]:
    with path.open() as f:
        return [
            PodRow(
                int(r["cpu_milli"]),
                int(r["memory_mib"]),
                int(r["num_gpu"]),
                int(r["gpu_milli"]),
                r["gpu_spec"],
            )
            for r in csv.DictReader(f)
        ]


def _node(i: int, row: NodeRow) -> dict[str, Any]:
    name = f"node-{i:05d}"
    alloc = {
        "cpu": f"{row.cpu}m",
        "memory": f"{row.mem_mib}Mi",
        "pods": "256",
        b.GPU: str(row.gpus),
    }
    return b.node(name, alloc, labels={"kubernetes.io/hostname": name, MODEL_LABEL: row.model})


def _pod(
    name: str,
    ns: str,
    row: PodRow,
    node: str,
    devices: list[int],
    gang: str | None,
    created: str,
) -> dict[str, Any]:
    req: dict[str, str] = {"cpu": f"{row.cpu}m", "memory": f"{row.mem_mib}Mi"}
    ann: dict[str, str] = {}
    if row.gpus and row.milli >= 1000:
        req[b.GPU] = str(row.gpus)
    elif row.gpus:
        ann.update(b.gpu_share(row.milli))
    if row.spec:
        ann[MODEL_LABEL] = row.spec
    if devices:
        ann["alibabacloud.com/gpu-index"] = ",".join(map(str, devices))
    if gang:
        ann["scheduling.k8s.io/group-name"] = gang
    owner = gang or name
    return b.pod(
        name,
        ns,
        requests=req,
        limits=True,
        node=node,
        scheduler="volcano",
        uid=f"uid-{ns}-{name}",
        labels={"app": owner},
        annotations=ann,
        created=created,
        owner=b.owner_ref("Job", owner),
    )


def _podgroup(name: str, ns: str, min_member: int, phase: str, created: str) -> dict[str, Any]:
    return b.podgroup(
        name, ns, min_member=min_member, queue="default", created=created, phase=phase
    )


class _Fill:
    """A random-fit binder over plain lists: picks a random node that fits."""

    def __init__(self, rows: list[NodeRow], rnd: random.Random) -> None:
        self.rows = rows
        self.rnd = rnd
        self.cpu = [r.cpu for r in rows]
        self.mem = [r.mem_mib for r in rows]
        self.gpu = [[1000] * r.gpus for r in rows]

    def devices(self, i: int, row: PodRow) -> list[int] | None:
        if self.cpu[i] < row.cpu or self.mem[i] < row.mem_mib:
            return None
        if row.spec and self.rows[i].model not in row.spec.split("|"):
            return None
        if not row.gpus:
            return []
        free = self.gpu[i]
        if row.milli >= 1000:
            full = [g for g, f in enumerate(free) if f >= 1000]
            return full[: row.gpus] if len(full) >= row.gpus else None
        fit = [g for g, f in enumerate(free) if f >= row.milli]
        return [self.rnd.choice(fit)] if fit else None

    def bind(self, row: PodRow, tries: int = 40) -> tuple[int, list[int]] | None:
        n = len(self.rows)
        for _ in range(tries):
            i = self.rnd.randrange(n)
            devs = self.devices(i, row)
            if devs is not None:
                self.cpu[i] -= row.cpu
                self.mem[i] -= row.mem_mib
                for g in devs:
                    self.gpu[i][g] -= row.milli
                return i, devs
        return None


def make_cluster(
    n_nodes: int,
    *,
    fill: float = 0.9,
    waiting: int | None = None,
    seed: int = 7,
    nodes: list[NodeRow] | None = None,
    pods: list[PodRow] | None = None,
) -> dict[str, Any]:
    """A List of ``n_nodes`` GPU nodes, pods until ``fill`` of the GPUs are allocated,
    and ``waiting`` gangs (default: one per 100 nodes) that wait."""
    rnd = random.Random(seed)
    node_list = nodes or node_rows()
    pod_list = pods or pod_rows()
    rows = [rnd.choice(node_list) for _ in range(n_nodes)]
    items: list[dict[str, Any]] = [_node(i, r) for i, r in enumerate(rows)]
    names = [x["metadata"]["name"] for x in items]
    binder = _Fill(rows, rnd)
    total = sum(r.gpus for r in rows) * 1000
    used = 0
    job = 0
    misses = 0
    while used < fill * total and misses < 2000:
        row = rnd.choice(pod_list)
        size = rnd.choice((1, 1, 1, 2, 2, 4)) if row.gpus and row.milli >= 1000 else 1
        ns = f"team-{job % 16}"
        gang = f"job-{job}" if size > 1 else None
        placed = []
        for _ in range(size):
            got = binder.bind(row)
            if got is None:
                break
            placed.append(got)
        if not placed:
            misses += 1
            continue
        started = _NOW - timedelta(hours=rnd.randrange(1, 72))
        created = started.strftime("%Y-%m-%dT%H:%M:%SZ")
        for k, (i, devs) in enumerate(placed):
            name = f"job-{job}-{k}" if gang else f"job-{job}"
            items.append(_pod(name, ns, row, names[i], devs, gang, created))
            used += row.gpus * row.milli if row.gpus else 0
        if gang:
            # some elastic gangs can lose members above minAvailable
            mins = len(placed) if rnd.random() < 0.7 else max(1, len(placed) // 2)
            items.append(_podgroup(gang, ns, mins, "Running", created))
        job += 1
    for w in range(n_nodes // 100 if waiting is None else waiting):
        size, gpus = WAITING_SHAPES[w % len(WAITING_SHAPES)]
        gang = f"wait-{w}"
        ns = "waiting"
        row = PodRow(8000 * gpus, 32768 * gpus, gpus, 1000, "")
        items.append(_podgroup(gang, ns, size, "Inqueue", NOW))
        for k in range(size):
            items.append(_pod(f"{gang}-{k}", ns, row, "", [], gang, NOW))
    return {"apiVersion": "v1", "kind": "List", "items": items}
