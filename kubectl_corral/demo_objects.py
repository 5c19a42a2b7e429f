"""The Kubernetes objects of ``kubectl corral demo``, as plain data: the Job it makes,
and what it reads from nodes, pods, PodGroups and the descheduler's report. Kept apart
from the story (demo.py) so that the story reads as steps; nothing here calls the
cluster."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "GPU",
    "GROUP",
    "OPT_IN",
    "TAINT",
    "WEBHOOK_CONFIGURATION",
    "Json",
    "allocatable_gpus",
    "bound_pods",
    "gpus_of",
    "is_control_plane",
    "job_manifest",
    "job_of",
    "moved_pods",
    "podgroup_phase",
    "running_pods",
    "unschedulable_why",
]

Json = dict[str, Any]
GPU = "nvidia.com/gpu"
OPT_IN = "corral.dev/gang-scheduling"
TAINT = "corral.dev/demo-placing"
WEBHOOK_CONFIGURATION = "corral-webhook"
GROUP = "scheduling.k8s.io/group-name"


def gpus_of(pod: Json) -> int:
    """The GPUs a pod asks for, over its containers."""
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or ():
        req = ((c.get("resources") or {}).get("requests") or {}).get(GPU)
        total += int(req or 0)
    return total


def job_manifest(
    name: str, namespace: str, gpus: int, workers: int = 1, *, backoff_limit: int = 6
) -> Json:
    """A Job of ``workers`` pods asking ``gpus`` GPUs each: what a user writes, no gang
    keys (corral's webhook adds them where the namespace opted in)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"corral.dev/demo": "1"}},
        "spec": {
            "parallelism": workers,
            "completions": workers,
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "command": ["sleep", "3600"],
                            "resources": {
                                "requests": {"cpu": "10m", "memory": "16Mi", GPU: str(gpus)},
                                "limits": {GPU: str(gpus)},
                            },
                        }
                    ],
                },
            },
        },
    }


def is_control_plane(node: Json) -> bool:
    """A control-plane node: the demo places nothing there."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return "node-role.kubernetes.io/control-plane" in labels


def allocatable_gpus(node: Json) -> int:
    """The node's allocatable GPUs (0 when unset or unreadable)."""
    raw = ((node.get("status") or {}).get("allocatable") or {}).get(GPU, "0")
    try:
        return int(raw)
    except ValueError:
        return 0


def bound_pods(pods: Sequence[Json]) -> list[Json]:
    return [p for p in pods if (p.get("spec") or {}).get("nodeName")]


def running_pods(pods: Sequence[Json]) -> list[Json]:
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]


def job_of(pod: Json) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get("job-name", "-"))


def podgroup_phase(pg: Json) -> str:
    return str((pg.get("status") or {}).get("phase") or "")


def unschedulable_why(pg: Json) -> str:
    """Why Volcano keeps the PodGroup waiting (its Unschedulable condition), or "-"."""
    for c in (pg.get("status") or {}).get("conditions") or ():
        if c.get("type") == "Unschedulable" and c.get("status") == "True":
            return str(c.get("message") or c.get("reason") or "")
    return "-"


def moved_pods(report: Json) -> list[str]:
    """The pods a descheduler run moved (evicted, or gone with their suspended Job), from
    its JSON report (``run.outcomes``)."""
    outcomes = (report.get("run") or {}).get("outcomes") or ()
    return [
        str(p.get("name"))
        for o in outcomes
        for p in o.get("pods") or ()
        if p.get("outcome") in ("evicted", "suspended")
    ]
