"""Synthetic cluster JSON for benchmarks: Node and Pod objects as the API returns them."""

from __future__ import annotations

import random
from typing import Any

from tests.builders import objects as b

GPU_MODELS = ["A100-SXM4-80GB", "H100-SXM5-80GB", "Tesla-T4"]


def make_nodes(n: int, seed: int = 1) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    nodes = []
    for i in range(n):
        kind = rnd.random()
        gpus = 8 if kind < 0.6 else 4 if kind < 0.8 else 0
        labels = {
            "kubernetes.io/hostname": f"node-{i:05d}",
            "topology.kubernetes.io/zone": f"zone-{i % 3}",
            "topology.corral.dev/rack": f"rack-{i // 16:04d}",
            "node-pool": "gpu" if gpus else "cpu",
        }
        alloc = {
            "cpu": "96" if gpus == 8 else "64",
            "memory": "1007Gi",
            "pods": "110",
            "ephemeral-storage": "1800Gi",
            "hugepages-1Gi": "0",
        }
        if gpus:
            alloc["nvidia.com/gpu"] = str(gpus)
            labels["nvidia.com/gpu.product"] = GPU_MODELS[0 if gpus == 8 else 2 if i % 2 else 1]
        taints = None
        if gpus and rnd.random() < 0.05:
            taints = [{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}]
        nodes.append(
            b.node(f"node-{i:05d}", alloc, labels=labels, uid=f"uid-node-{i}", taints=taints)
        )
    return nodes


def make_pods(n: int, nodes: list[dict[str, Any]], seed: int = 2) -> list[dict[str, Any]]:
    """``n`` running pods spread over ``nodes``: roughly one GPU pod in four, so a 10x
    denser pod list still leaves room for the benchmark's gangs."""
    rnd = random.Random(seed)
    gpu_nodes = [
        x["metadata"]["name"] for x in nodes if "nvidia.com/gpu" in x["status"]["allocatable"]
    ]
    all_nodes = [x["metadata"]["name"] for x in nodes]
    gpu_left = {
        x["metadata"]["name"]: int(x["status"]["allocatable"].get("nvidia.com/gpu", 0))
        for x in nodes
    }
    pods = []
    for i in range(n):
        job = f"job-{i // 8}"
        gpu = rnd.random() < 0.25
        node = rnd.choice(gpu_nodes if gpu else all_nodes)
        if gpu and gpu_left[node] == 0:
            gpu = False
        req = {
            "cpu": rnd.choice(["250m", "500m", "1", "2"]),
            "memory": rnd.choice(["512Mi", "1Gi", "4Gi"]),
        }
        if gpu:
            req["nvidia.com/gpu"] = "1"
            gpu_left[node] -= 1
        containers = [
            {
                "name": "main",
                "image": "registry.example/trainer:1.2",
                "resources": {"requests": req, "limits": dict(req)},
                "env": [{"name": "RANK", "value": str(i % 8)}],
            }
        ]
        if i % 5 == 0:
            containers.append(
                {
                    "name": "log",
                    "image": "fluent-bit:3",
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                }
            )
        spec: dict[str, Any] = {
            "nodeName": node,
            "schedulerName": "volcano",
            "containers": containers,
            "restartPolicy": "Never",
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        }
        if i % 7 == 0:
            spec["initContainers"] = [
                {
                    "name": "fetch",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "1", "memory": "256Mi"}},
                }
            ]
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{job}-worker-{i % 8}",
                    "namespace": f"team-{i % 20}",
                    "uid": f"uid-pod-{i}",
                    "labels": {"app": job, "corral.dev/gang": job},
                    "annotations": {"scheduling.k8s.io/group-name": job},
                    "creationTimestamp": "2026-11-30T08:00:00Z",
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": job,
                            "uid": f"uid-{job}",
                            "controller": True,
                        }
                    ],
                },
                "spec": spec,
                "status": {"phase": "Running"},
            }
        )
    return pods
