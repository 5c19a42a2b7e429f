"""Writes shared/gangplace/data/sample-cluster.json, the small cluster `make run` uses.

Twelve nodes as `kubectl get nodes,pods -A -o json` would list them: eight 8-GPU
A100 nodes in two racks, two tainted 4-GPU T4 nodes, two CPU nodes, and running pods
that leave the A100s fragmented (idle GPUs scattered, no node with 8 free).
Deterministic: run it again and the file does not change.

    .venv/bin/python -m scripts.make_sample_cluster
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.builders import objects as b

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "shared/gangplace/data/sample-cluster.json"


def node(name: str, cpu: int, mem_gi: int, gpus: int, labels: dict[str, str], taints=()) -> Any:
    alloc = {"cpu": str(cpu), "memory": f"{mem_gi}Gi", "pods": "110", "ephemeral-storage": "800Gi"}
    if gpus:
        alloc[b.GPU] = str(gpus)
    return b.node(name, alloc, labels={"kubernetes.io/hostname": name, **labels}, taints=taints)


def pod(
    ns: str, name: str, node_name: str, cpu: str, mem: str, gpus: int, owner: str, **extra: Any
) -> Any:
    req: dict[str, str] = {"cpu": cpu, "memory": mem}
    if gpus:
        req["nvidia.com/gpu"] = str(gpus)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "uid": f"uid-{ns}-{name}",
        "labels": {"app": owner},
        "creationTimestamp": "2026-11-30T08:00:00Z",
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": owner,
                "uid": f"uid-job-{owner}",
                "controller": True,
            }
        ],
    }
    meta.update(extra.pop("meta", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node_name,
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "main",
                    "image": "trainer:1",
                    "resources": {"requests": req, "limits": dict(req)},
                }
            ],
            **extra,
        },
        "status": {"phase": "Running"},
    }


def main() -> None:
    items: list[Any] = []
    a100 = {"nvidia.com/gpu.product": "A100-SXM4-80GB", "node-pool": "gpu"}
    for i in range(8):
        rack = "rack-a" if i < 4 else "rack-b"
        items.append(node(f"gpu-a100-{i}", 96, 1024, 8, {**a100, "topology.corral.dev/rack": rack}))
    t4 = {"nvidia.com/gpu.product": "Tesla-T4", "node-pool": "inference"}
    taint = {"key": "gpu", "value": "reserved", "effect": "NoSchedule"}
    for i in range(2):
        items.append(node(f"gpu-t4-{i}", 32, 192, 4, t4, [taint]))
    for i in range(2):
        items.append(node(f"cpu-{i}", 64, 256, 0, {"node-pool": "cpu"}))

    # Small jobs scattered over the A100s: 3, 5, 2, 6, 4, 3, 5, 2 GPUs busy per node.
    busy = [3, 5, 2, 6, 4, 3, 5, 2]
    n = 0
    for i, used in enumerate(busy):
        for _ in range(used):
            items.append(
                pod("research", f"notebook-{n}", f"gpu-a100-{i}", "8", "64Gi", 1, f"notebook-{n}")
            )
            n += 1
    tol = [{"key": "gpu", "operator": "Equal", "value": "reserved", "effect": "NoSchedule"}]
    items.append(
        pod("serving", "llm-serve-0", "gpu-t4-0", "8", "48Gi", 2, "llm-serve", tolerations=tol)
    )
    for i in range(6):
        items.append(pod("etl", f"spark-exec-{i}", f"cpu-{i % 2}", "8", "32Gi", 0, "spark-etl"))
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT} ({len(items)} objects)")


if __name__ == "__main__":
    main()
