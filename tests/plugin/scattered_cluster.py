"""A cluster dump whose idle GPUs are scattered: seven 8-GPU nodes, four of them with 3
GPUs idle (12 in all) and three full, so a gang of 2 x 4 GPUs cannot start though 12
GPUs are idle. Each running pod is a one-pod Job the descheduler may suspend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.builders import objects as b
from tests.kubeapi import objects as o

VOLCANO = "scheduling.k8s.io/group-name"
MODEL = "NVIDIA-A100-SXM4-80GB"
Json = dict[str, Any]


def _job_pod(name: str, node: str, gpus: int, ns: str = "ml") -> list[Json]:
    job = b.job(name, ns, uid=f"uid-{name}")
    pod = o.pod(f"{name}-0", ns, node=node, gpus=gpus, owner=("Job", name))
    pod["metadata"]["ownerReferences"][0]["uid"] = f"uid-{name}"
    pod["metadata"]["labels"] = {"batch.kubernetes.io/job-name": name}
    return [job, pod]


def _podgroup(name: str, min_member: int, ns: str = "ml") -> Json:
    pg = o.volcano_podgroup(name, ns, min_member=min_member)
    pg["status"] = {"phase": "Pending"}
    return pg


def waiting_gang(name: str, pods: int, gpus: int, ns: str = "ml") -> list[Json]:
    """A Volcano gang of ``pods`` pending pods of ``gpus`` GPUs each, and its PodGroup."""
    return [
        _podgroup(name, pods, ns),
        *(
            o.pod(f"{name}-{i}", ns, gpus=gpus, annotations={VOLCANO: name}, scheduler="volcano")
            for i in range(pods)
        ),
    ]


def scattered(
    *, nodes: int = 7, partly_idle: int = 4, model: str = MODEL, gangs: list[Json] | None = None
) -> list[Json]:
    """``partly_idle`` nodes with 3 GPUs idle (a 4-GPU and a 1-GPU Job each), the rest
    full; the gang bert-ft (2 x 4 GPUs) waits, and ``gangs`` are added."""
    items: list[Json] = [o.namespace("ml", {"corral.dev/gang-scheduling": "enabled"})]
    for i in range(nodes):
        items.append(o.node(f"gpu-{i}", gpus=8, gpu_model=model, cpu="64", memory="512Gi"))
        if i < partly_idle:
            items += _job_pod(f"a-{i}", f"gpu-{i}", 4) + _job_pod(f"s-{i}", f"gpu-{i}", 1)
        else:
            items += _job_pod(f"full-{i}", f"gpu-{i}", 8)
    items += waiting_gang("bert-ft", 2, 4)
    return items + (gangs or [])


def write_dump(path: Path, items: list[Json]) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path
