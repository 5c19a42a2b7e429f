"""Writes descheduler/data/sample-fragmented.json: a small fragmented GPU cluster with
waiting gangs, as `kubectl get nodes,pods,pdb,podgroups,queues,priorityclasses -A -o json`
would list it. Deterministic: run it again and the file does not change
(``.venv/bin/python -m scripts.make_descheduler_sample``).

- Three 8-GPU A100 nodes at 7/6/7 GPUs used cannot admit a waiting 4-GPU job (Volcano
  issue 3948); moving the two 1-GPU notebooks off the middle node fixes it.
- Four 8-GPU H100 nodes at 4 GPUs used each cannot admit a waiting 2 x 8-GPU gang;
  two small sweep gangs must move, whole, onto the other two nodes. The third sweep is
  under a disruption budget that allows no disruption, the fourth job opts out.
- Two 4-GPU T4 nodes hold a partial MPI gang (2 of 4 members running for hours, past
  its 30m gang timeout): it is released. The T4 inference queue is not reclaimable.
- DaemonSet pods on every node, a static pod, and a CPU node with Spark executors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.builders import objects as b

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "descheduler/data/sample-fragmented.json"
TAKEN = "2026-12-01T12:00:00Z"
MODEL = "nvidia.com/gpu.product"


def node(name: str, gpus: int, model: str, cpu: int = 96, mem_gi: int = 1024) -> Any:
    alloc = {"cpu": str(cpu), "memory": f"{mem_gi}Gi", "pods": "110"}
    labels = {"kubernetes.io/hostname": name}
    if gpus:
        alloc[b.GPU] = str(gpus)
        labels[MODEL] = model
    return b.node(name, alloc, labels=labels)


def pod(
    ns: str,
    name: str,
    node_name: str,
    gpus: int,
    *,
    owner: tuple[str, str],
    created: str,
    cpu: str = "8",
    mem: str = "64Gi",
    model: str | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    priority_class: str | None = None,
    priority: int = 0,
) -> Any:
    req: dict[str, str] = {"cpu": cpu, "memory": mem}
    if gpus:
        req[b.GPU] = str(gpus)
    kind, owner_name = owner
    api = "v1" if kind == "Node" else None  # else the registered kind's apiVersion
    return b.pod(
        name,
        ns,
        requests=req,
        limits=True,
        node=node_name,
        image="trainer:1",
        scheduler="volcano",
        priority=priority,
        priority_class=priority_class or None,
        node_selector={MODEL: model} if model else None,
        uid=f"uid-{ns}-{name}",
        labels=labels or {},
        annotations=annotations or {},
        created=created,
        owner=b.owner_ref(kind, owner_name, api=api, uid=f"uid-{kind.lower()}-{owner_name}")
        if kind
        else None,
    )


def podgroup(
    ns: str,
    name: str,
    min_member: int,
    queue: str,
    phase: str,
    created: str,
    *,
    api: str = b.VOLCANO_API,
    annotations: dict[str, str] | None = None,
) -> Any:
    return b.podgroup(
        name,
        ns,
        min_member=min_member,
        api=api,
        queue=queue,
        uid=f"uid-pg-{ns}-{name}",
        created=created,
        annotations=annotations or {},
        phase=phase,
    )


def volcano_member(
    ns: str, gang: str, i: int, node_name: str, gpus: int, queue: str, created: str, model: str
) -> Any:
    return pod(
        ns,
        f"{gang}-{i}",
        node_name,
        gpus,
        owner=("Job", gang),
        created=created,
        model=model,
        annotations={
            "scheduling.k8s.io/group-name": gang,
            "scheduling.volcano.sh/queue-name": queue,
        },
        labels={"app": gang},
    )


def main() -> None:
    items: list[Any] = []
    for i in range(3):
        items.append(node(f"a100-{i}", 8, "A100-SXM4-80GB"))
    for i in range(4):
        items.append(node(f"h100-{i}", 8, "H100-SXM5-80GB"))
    for i in range(2):
        items.append(node(f"t4-{i}", 4, "Tesla-T4", cpu=32, mem_gi=192))
    items.append(node("cpu-0", 0, "", cpu=64, mem_gi=256))
    nodes = [n["metadata"]["name"] for n in items]

    for q, weight, reclaimable in (
        ("research", 1, True),
        ("training", 2, True),
        ("inference", 1, False),
    ):
        items.append(b.queue(q, weight, reclaimable=reclaimable))
    for name, value in (
        ("system-node-critical", 2000001000),
        ("system-cluster-critical", 2000000000),
        ("batch-high", 100000),
    ):
        items.append(b.priority_class(name, value))

    # Every node runs the device plugin (a DaemonSet); cpu-0 runs a static pod.
    for n in nodes:
        items.append(
            pod(
                "kube-system",
                f"nvidia-device-plugin-{n}",
                n,
                0,
                owner=("DaemonSet", "nvidia-device-plugin"),
                created="2026-11-01T00:00:00Z",
                cpu="100m",
                mem="128Mi",
                priority_class="system-node-critical",
                priority=2000001000,
            )
        )
    items.append(
        pod(
            "kube-system",
            "etcd-backup-cpu-0",
            "cpu-0",
            0,
            owner=("Node", "cpu-0"),
            created="2026-11-01T00:00:00Z",
            cpu="500m",
            mem="1Gi",
            annotations={"kubernetes.io/config.mirror": "3f1c"},
        )
    )

    # A100s: 7/6/7 GPUs used (Volcano issue 3948). Notebooks are one-pod jobs.
    a100 = "A100-SXM4-80GB"
    layout = {0: ("eval-a", 3), 1: ("eval-b", 2), 2: ("eval-c", 3)}
    nb = 0
    for i, (job, small) in layout.items():
        items.append(
            pod(
                "research",
                f"{job}-0",
                f"a100-{i}",
                4,
                owner=("Job", job),
                created="2026-12-01T02:00:00Z",
                model=a100,
                annotations={"scheduling.volcano.sh/queue-name": "research"},
            )
        )
        for _ in range(small):
            items.append(
                pod(
                    "research",
                    f"notebook-{nb}",
                    f"a100-{i}",
                    1,
                    owner=("StatefulSet", f"notebook-{nb}"),
                    created=f"2026-12-01T{9 + nb % 3:02d}:00:00Z",
                    cpu="4",
                    mem="32Gi",
                    model=a100,
                    annotations={"scheduling.volcano.sh/queue-name": "research"},
                )
            )
            nb += 1
    items.append(podgroup("research", "llm-finetune", 1, "research", "Inqueue", TAKEN))
    items.append(volcano_member("research", "llm-finetune", 0, "", 4, "research", TAKEN, a100))

    # H100s: 4 GPUs used on each; a 2 x 8-GPU gang waits.
    h100 = "H100-SXM5-80GB"
    for gang, n, created in (
        ("sweep-a", "h100-0", "2026-12-01T10:30:00Z"),
        ("sweep-b", "h100-1", "2026-12-01T11:00:00Z"),
    ):
        items.append(podgroup("training", gang, 2, "training", "Running", created))
        for i in range(2):
            items.append(volcano_member("training", gang, i, n, 2, "training", created, h100))
    # sweep-c: scheduler-plugins coscheduling, under a budget that allows no disruption.
    items.append(
        podgroup(
            "training",
            "sweep-c",
            4,
            "training",
            "Running",
            "2026-12-01T11:00:00Z",
            api="scheduling.x-k8s.io/v1alpha1",
        )
    )
    for i in range(4):
        items.append(
            pod(
                "training",
                f"sweep-c-{i}",
                "h100-2",
                1,
                owner=("Job", "sweep-c"),
                created="2026-12-01T11:00:00Z",
                model=h100,
                labels={"scheduling.x-k8s.io/pod-group": "sweep-c", "app": "sweep-c"},
            )
        )
    items.append(
        b.pdb(
            "sweep-c",
            "training",
            match_labels={"app": "sweep-c"},
            min_available=4,
            generation=1,
            status={
                "disruptionsAllowed": 0,
                "currentHealthy": 4,
                "desiredHealthy": 4,
                "expectedPods": 4,
                "observedGeneration": 1,
            },
        )
    )
    items.append(
        pod(
            "training",
            "finetune-d-0",
            "h100-3",
            4,
            owner=("Job", "finetune-d"),
            created="2026-12-01T06:00:00Z",
            model=h100,
            annotations={"corral.dev/evictable": "false"},
        )
    )
    items.append(podgroup("training", "pretrain", 2, "training", "Pending", TAKEN))
    for i in range(2):
        items.append(volcano_member("training", "pretrain", i, "", 8, "training", TAKEN, h100))

    # T4s: a partial MPI gang, 2 of 4 running since 09:00, gang timeout 30m.
    t4 = "Tesla-T4"
    items.append(
        podgroup(
            "speech",
            "mpi-stale",
            4,
            "research",
            "Running",
            "2026-12-01T09:00:00Z",
            annotations={"corral.dev/gang-timeout": "30m"},
        )
    )
    for i in range(4):
        items.append(
            volcano_member(
                "speech",
                "mpi-stale",
                i,
                "t4-0" if i < 2 else "",
                1,
                "research",
                "2026-12-01T09:00:00Z",
                t4,
            )
        )
    items.append(
        pod(
            "speech",
            "asr-0",
            "t4-0",
            2,
            owner=("Job", "asr"),
            created="2026-12-01T07:00:00Z",
            cpu="8",
            mem="32Gi",
            model=t4,
        )
    )
    items.append(
        pod(
            "inference",
            "tts-serve-0",
            "t4-1",
            4,
            owner=("ReplicaSet", "tts-serve-6d9f"),
            created="2026-11-20T00:00:00Z",
            cpu="16",
            mem="64Gi",
            model=t4,
            annotations={"scheduling.volcano.sh/queue-name": "inference"},
        )
    )

    for i in range(4):
        items.append(
            pod(
                "etl",
                f"spark-exec-{i}",
                "cpu-0",
                0,
                owner=("ReplicaSet", "spark-exec"),
                created="2026-12-01T08:00:00Z",
                cpu="8",
                mem="32Gi",
            )
        )

    # The waiting gangs outrank the running batch work (batch-high), so it may move.
    for x in items:
        gang = (x["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")
        if x["kind"] == "Pod" and gang in ("llm-finetune", "pretrain"):
            x["spec"]["priority"] = 100000
            x["spec"]["priorityClassName"] = "batch-high"
    # The Jobs: training must not retry blindly (backoffLimit 0); the sweeps and the
    # stale MPI job carry the podFailurePolicy rule that does not count an eviction.
    for ns, name, parallelism, limit, ignore in (
        ("research", "eval-a", 1, 0, False),
        ("research", "eval-b", 1, 0, False),
        ("research", "eval-c", 1, 0, False),
        ("research", "llm-finetune", 1, 0, True),
        ("training", "sweep-a", 2, 0, True),
        ("training", "sweep-b", 2, 0, True),
        ("training", "sweep-c", 4, 0, True),
        ("training", "finetune-d", 1, 0, False),
        ("training", "pretrain", 2, 0, True),
        ("speech", "mpi-stale", 4, 0, True),
        ("speech", "asr", 1, 3, False),
    ):
        items.append(
            b.job(
                name,
                ns,
                backoff_limit=limit,
                parallelism=parallelism,
                ignore_disruption=ignore,
                uid=f"uid-job-{name}",
                created="2026-12-01T00:00:00Z",
            )
        )

    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": "", "annotations": {"corral.dev/snapshot-time": TAKEN}},
        "items": items,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT} ({len(items)} objects)")


if __name__ == "__main__":
    main()
