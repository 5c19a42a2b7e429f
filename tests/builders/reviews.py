"""Helpers for the webhook tests: fixtures, hand-built reviews, and a checked admit()
that applies the patch with a JSON-patch library and proves a second pass is a no-op."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import jsonpatch
from gangplace.thirdparty import ADMISSION_FIXTURES, locate

from webhook.admission.cluster_fit import ClusterCapacity
from webhook.admission.entry import admit
from webhook.admission.review import AdmitResult, decode_patch
from webhook.config import WebhookConfig

REPO = Path(__file__).resolve().parents[2]
# The recorded reviews of the data folder ($CORRAL_DATA or ../shared), else the bundled copies.
SHARED_FIXTURES = locate(ADMISSION_FIXTURES, "*.json", REPO) or REPO / "webhook" / "fixtures"
BUNDLED_FIXTURES = REPO / "webhook" / "fixtures"
FIXTURE_NAMES = (
    "job-create-mpi-train.json",
    "pod-create-from-job-mpi-train.json",
    "pod-create-llm-worker-0.json",
    "pod-create-plain-cpu.json",
    "pod-create-dry-gpu-dryrun.json",
)


def fixture(name: str) -> dict[str, Any]:
    """A captured AdmissionReview: from the data folder when present, else the bundled copy."""
    folder = SHARED_FIXTURES if (SHARED_FIXTURES / name).exists() else BUNDLED_FIXTURES
    doc: dict[str, Any] = json.loads((folder / name).read_text())
    return doc


def review(
    obj: dict[str, Any],
    *,
    group: str = "",
    version: str = "v1",
    kind: str | None = None,
    namespace: str = "ml",
    operation: str = "CREATE",
    dry_run: bool = False,
) -> dict[str, Any]:
    """An AdmissionReview v1 for ``obj`` as the API server sends it."""
    kind = kind or obj["kind"]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
            "namespace": namespace,
            "name": (obj.get("metadata") or {}).get("name"),
            "operation": operation,
            "dryRun": dry_run,
            "object": obj,
            "oldObject": None,
        },
    }


def with_object(rev: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(rev)
    out["request"]["object"] = obj
    out["request"]["uid"] = str(uuid.uuid4())
    return out


def checked(
    rev: dict[str, Any],
    config: WebhookConfig | None = None,
    cluster: ClusterCapacity | None = None,
) -> tuple[AdmitResult, dict[str, Any]]:
    """admit() and the object after its patch; asserts the response is well-formed, the
    request object was not modified, and reinvocation on the patched object patches
    nothing and decides the same."""
    cfg = config or WebhookConfig()
    before = copy.deepcopy(rev)
    result = admit(rev, cluster, cfg)
    assert rev == before, "admit() must not modify the review it was given"
    resp = result.review["response"]
    assert result.review["apiVersion"] == "admission.k8s.io/v1"
    assert result.review["kind"] == "AdmissionReview"
    assert resp["uid"] == rev["request"]["uid"]
    obj = rev["request"].get("object")
    if not resp["allowed"]:
        assert "patch" not in resp
        return result, copy.deepcopy(obj)
    ops = decode_patch(resp)
    assert ops == result.patch
    if ops:
        assert resp["patchType"] == "JSONPatch"
    patched = jsonpatch.apply_patch(obj, ops) if ops else copy.deepcopy(obj)
    again = admit(with_object(rev, patched), cluster, cfg)
    assert again.review["response"]["allowed"]
    assert again.patch == [], f"second pass patched again: {again.patch}"
    return result, patched


def annotations(obj: dict[str, Any], *path: str) -> dict[str, str]:
    node: Any = obj
    for p in path:
        node = node[p]
    return dict((node.get("metadata") or {}).get("annotations") or {})


def labels(obj: dict[str, Any], *path: str) -> dict[str, str]:
    node: Any = obj
    for p in path:
        node = node[p]
    return dict((node.get("metadata") or {}).get("labels") or {})


def container(resources: dict[str, str] | None = None, name: str = "main") -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox"}
    if resources:
        c["resources"] = {"requests": dict(resources)}
    return c


def pod_template(
    resources: dict[str, str] | None = None,
    annotations_: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    t: dict[str, Any] = {"spec": {"containers": [container(resources)], **spec}}
    if annotations_:
        t["metadata"] = {"annotations": dict(annotations_)}
    return t


def bare_pod(
    name: str = "p",
    annotations_: dict[str, str] | None = None,
    resources: dict[str, str] | None = None,
    **extra_meta: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", **extra_meta}
    if annotations_ is not None:
        meta["annotations"] = dict(annotations_)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [container(resources)], "schedulerName": "default-scheduler"},
    }


def node(name: str, gpus: int, **labels: str) -> dict[str, Any]:
    """A node of 64 CPUs, 512Gi and ``gpus`` GPUs (none: a CPU node)."""
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": alloc},
    }


def running(name: str, node_name: str, gpus: int) -> dict[str, Any]:
    """A Running pod of another namespace holding ``gpus`` GPUs of ``node_name``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "other"},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }
