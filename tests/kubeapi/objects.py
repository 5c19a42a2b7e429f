"""Builders for Kubernetes objects in the shape the API server returns them.

The small builders make test objects, on the shared builders of ``tests.builders.objects``;
:func:`full_pod` and :func:`full_node` make objects as large as a real cluster's
(managed fields, status, env, volumes), for the informer benchmark.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from typing import Any

from tests.builders import objects as b

Json = dict[str, Any]

__all__ = [
    "cosched_podgroup",
    "full_node",
    "full_pod",
    "namespace",
    "node",
    "pdb",
    "pod",
    "priority_class",
    "volcano_podgroup",
    "volcano_queue",
]

_TS = "2024-05-01T12:00:00Z"


def namespace(name: str, labels: Mapping[str, str] | None = None) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/metadata.name": name, **(labels or {})},
        },
    }


def node(
    name: str,
    *,
    cpu: str = "32",
    memory: str = "128Gi",
    pods: str = "110",
    gpus: int = 0,
    gpu_resource: str = "nvidia.com/gpu",
    gpu_model: str = "",
    labels: Mapping[str, str] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> Json:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    lab = {"kubernetes.io/hostname": name, **(labels or {})}
    if gpus:
        alloc[gpu_resource] = str(gpus)
        if gpu_model:
            lab["nvidia.com/gpu.product"] = gpu_model
    return b.node(name, alloc, labels=lab, unschedulable=unschedulable, ready=ready)


def pod(
    name: str,
    namespace: str = "default",
    *,
    node: str | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    gpus: int = 0,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    phase: str | None = None,
    ready: bool = True,
    owner: tuple[str, str] | None = None,
    scheduler: str = "default-scheduler",
) -> Json:
    """A pod; bound to ``node`` and Running (and Ready) when a node is given, else Pending."""
    requests = {"cpu": cpu, "memory": memory}
    if gpus:
        requests[b.GPU] = str(gpus)
    phase = phase or ("Running" if node else "Pending")
    return b.pod(
        name,
        namespace,
        requests=requests,
        node=node or "",
        phase=phase,
        image="busybox",
        scheduler=scheduler,
        labels=labels or {},
        annotations=annotations or None,
        owner=b.owner_ref(
            owner[0], owner[1], uid=str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{namespace}/{owner[1]}"))
        )
        if owner
        else None,
        ready=ready if phase == "Running" else None,
    )


def pdb(
    name: str,
    namespace: str = "default",
    *,
    match_labels: Mapping[str, str] | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> Json:
    return b.pdb(
        name,
        namespace,
        match_labels=match_labels,
        min_available=min_available,
        max_unavailable=max_unavailable,
    )


def priority_class(name: str, value: int, global_default: bool = False) -> Json:
    return b.priority_class(name, value, global_default=global_default)


def volcano_podgroup(
    name: str, namespace: str = "default", *, min_member: int = 1, queue: str = "default"
) -> Json:
    return b.podgroup(name, namespace, min_member=min_member, queue=queue)


def volcano_queue(
    name: str, *, weight: int = 1, capability: Mapping[str, str] | None = None
) -> Json:
    return b.queue(name, weight=weight, capability=capability)


def cosched_podgroup(
    name: str, namespace: str = "default", *, min_member: int = 1, timeout: int = 0
) -> Json:
    return b.podgroup(
        name,
        namespace,
        min_member=min_member,
        api="scheduling.x-k8s.io/v1alpha1",
        schedule_timeout=timeout or None,
    )


# --- full-size objects, for the benchmark ---------------------------------------------


def full_node(i: int, *, gpus: int = 0, rng: random.Random | None = None) -> Json:
    """A node object of realistic size (labels, conditions, images, node info)."""
    rng = rng or random.Random(i)
    name = f"node-{i:05d}"
    n = node(
        name,
        cpu=str(rng.choice((32, 64, 96))),
        memory=f"{rng.choice((128, 256, 512))}Gi",
        gpus=gpus,
        gpu_model="NVIDIA-A100-SXM4-80GB" if gpus else "",
        labels={
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "p4d.24xlarge" if gpus else "m6i.16xlarge",
            "topology.kubernetes.io/region": "eu-west-1",
            "topology.kubernetes.io/zone": f"eu-west-1{'abc'[i % 3]}",
        },
    )
    n["metadata"]["annotations"] = {
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    n["spec"] = {"podCIDR": f"10.{i // 256 % 256}.{i % 256}.0/24", "providerID": f"aws:///{name}"}
    st = n["status"]
    st["conditions"] = [
        {
            "type": t,
            "status": "True" if t == "Ready" else "False",
            "lastHeartbeatTime": _TS,
            "lastTransitionTime": _TS,
            "reason": f"Kubelet{t}",
            "message": f"kubelet reports {t}",
        }
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
    ]
    st["addresses"] = [
        {"type": "InternalIP", "address": f"10.0.{i // 256 % 256}.{i % 256}"},
        {"type": "Hostname", "address": name},
    ]
    st["nodeInfo"] = {
        "architecture": "amd64",
        "containerRuntimeVersion": "containerd://1.7.11",
        "kernelVersion": "6.1.0",
        "kubeProxyVersion": "v1.31.0",
        "kubeletVersion": "v1.31.0",
        "operatingSystem": "linux",
        "osImage": "Ubuntu 22.04.4 LTS",
        "machineID": uuid.UUID(int=rng.getrandbits(128)).hex,
        "systemUUID": str(uuid.UUID(int=rng.getrandbits(128))),
        "bootID": str(uuid.UUID(int=rng.getrandbits(128))),
    }
    st["images"] = [
        {"names": [f"registry.example.com/team/image-{k}@sha256:{k:064x}"], "sizeBytes": 10**8 + k}
        for k in range(8)
    ]
    return n


def full_pod(i: int, node_name: str, *, gpus: int = 0, rng: random.Random | None = None) -> Json:
    """A pod of realistic size: a Job's worker with env, mounts, a projected token volume,
    managed fields and a full status."""
    rng = rng or random.Random(i)
    job = f"train-{i // 8:05d}"
    ns = f"team-{i % 50:02d}"
    name = f"{job}-worker-{i % 8}-{uuid.UUID(int=rng.getrandbits(128)).hex[:5]}"
    p = pod(
        name,
        ns,
        node=node_name,
        cpu=f"{rng.choice((1, 2, 4, 8))}",
        memory=f"{rng.choice((4, 8, 16, 32))}Gi",
        gpus=gpus,
        labels={
            "app.kubernetes.io/name": "trainer",
            "batch.kubernetes.io/controller-uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, job)),
            "batch.kubernetes.io/job-name": job,
            "job-name": job,
            "corral.dev/gang": job,
            "batch.kubernetes.io/job-completion-index": str(i % 8),
        },
        annotations={
            "batch.kubernetes.io/job-completion-index": str(i % 8),
            "scheduling.k8s.io/group-name": job,
        },
        owner=("Job", job),
        scheduler="volcano",
    )
    meta = p["metadata"]
    meta["generateName"] = f"{job}-worker-{i % 8}-"
    meta["creationTimestamp"] = _TS
    meta["managedFields"] = [
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "manager": "kube-controller-manager",
            "operation": "Update",
            "time": _TS,
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:job-name": {}}, "f:ownerReferences": {}},
                "f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}, "f:image": {}}}},
            },
        },
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "manager": "kubelet",
            "operation": "Update",
            "subresource": "status",
            "time": _TS,
            "fieldsV1": {"f:status": {"f:conditions": {}, "f:phase": {}, "f:podIP": {}}},
        },
    ]
    c = p["spec"]["containers"][0]
    c["image"] = "registry.example.com/ml/trainer:2024.05.1"
    c["command"] = ["python", "-m", "trainer"]
    c["args"] = ["--epochs=10", f"--rank={i % 8}", "--world-size=8"]
    c["env"] = [
        {"name": "MASTER_ADDR", "value": f"{job}-worker-0"},
        {"name": "MASTER_PORT", "value": "29500"},
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    c["ports"] = [{"containerPort": 29500, "protocol": "TCP"}]
    c["resources"]["limits"] = dict(c["resources"]["requests"])
    c["volumeMounts"] = [
        {"mountPath": "/data", "name": "data"},
        {
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            "name": "kube-api-access",
            "readOnly": True,
        },
    ]
    c["terminationMessagePath"] = "/dev/termination-log"
    c["imagePullPolicy"] = "IfNotPresent"
    spec = p["spec"]
    spec.update(
        dnsPolicy="ClusterFirst",
        enableServiceLinks=True,
        preemptionPolicy="PreemptLowerPriority",
        priority=0,
        restartPolicy="Never",
        securityContext={},
        serviceAccountName="default",
        terminationGracePeriodSeconds=30,
        tolerations=[
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
        ],
        volumes=[
            {"name": "data", "persistentVolumeClaim": {"claimName": f"{job}-data"}},
            {
                "name": "kube-api-access",
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                    ],
                },
            },
        ],
    )
    if gpus:
        spec["tolerations"].append(
            {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}
        )
    ip = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}"
    p["status"] = {
        "phase": "Running",
        "qosClass": "Guaranteed",
        "hostIP": f"10.0.{rng.randrange(256)}.{rng.randrange(256)}",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": _TS,
        "conditions": [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": _TS}
            for t in (
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            )
        ],
        "containerStatuses": [
            {
                "name": "main",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "image": c["image"],
                "imageID": f"registry.example.com/ml/trainer@sha256:{rng.getrandbits(256):064x}",
                "containerID": f"containerd://{rng.getrandbits(256):064x}",
                "state": {"running": {"startedAt": _TS}},
                "lastState": {},
            }
        ],
    }
    return p
