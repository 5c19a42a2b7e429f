"""Each backend's dialect (docs/backends.md's table), on a workload, a bare gang pod and a
single pod: membership, minAvailable, queue and timeout keys, the gang object."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.builders.reviews import (
    annotations,
    bare_pod,
    checked,
    fixture,
    labels,
    pod_template,
    review,
    with_object,
)
from webhook.config import WebhookConfig, parse_config

GPU = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}


def pytorchjob(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "ml", **meta},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": pod_template({"cpu": "2", "memory": "8Gi"})},
                "Worker": {
                    "replicas": 3,
                    "template": pod_template(GPU, nodeSelector={"pool": "gpu"}),
                },
            }
        },
    }


def pt_review(obj: dict[str, Any]) -> dict[str, Any]:
    return review(obj, group="kubeflow.org", version="v1")


def tmpl(obj: dict[str, Any], role: str) -> dict[str, Any]:
    t: dict[str, Any] = obj["spec"]["pytorchReplicaSpecs"][role]["template"]
    return t


# --- volcano (the default) --------------------------------------------------------------


def test_volcano_defaults() -> None:
    cfg = WebhookConfig()
    assert cfg.backend.value == "volcano"
    assert cfg.effective_scheduler_name == "volcano"
    assert cfg.effective_default_queue == "default"
    obj = pytorchjob(annotations={"corral.dev/min-available": "3", "corral.dev/gang-timeout": "1h"})
    res, patched = checked(pt_review(obj), cfg)
    for role in ("Master", "Worker"):
        ann = annotations(tmpl(patched, role))
        assert ann["scheduling.k8s.io/group-name"] == "pytorchjob-bert"
        assert ann["scheduling.volcano.sh/queue-name"] == "default"
        assert ann["volcano.sh/sla-waiting-time"] == "1h"
    (intent,) = res.intents
    assert intent.body == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": "pytorchjob-bert",
            "namespace": "ml",
            "labels": {"app.kubernetes.io/managed-by": "corral"},
            "annotations": {"volcano.sh/sla-waiting-time": "1h"},
        },
        "spec": {
            "minMember": 3,
            "queue": "default",
            # the engine fills minAvailable launcher-first: master + 2 workers
            "minResources": {"cpu": "10", "memory": "40Gi", "nvidia.com/gpu": "2"},
        },
    }
    assert intent.plural == "podgroups"


def test_volcano_priority_class() -> None:
    obj = pytorchjob()
    tmpl(obj, "Worker")["spec"]["priorityClassName"] = "high"
    res, _ = checked(pt_review(obj))
    assert res.intents[0].body["spec"]["priorityClassName"] == "high"


# --- coscheduling -----------------------------------------------------------------------


def test_coscheduling() -> None:
    cfg = parse_config({"backend": "coscheduling", "gangTimeout": "10m"})
    assert cfg.effective_scheduler_name == "scheduler-plugins-scheduler"
    res, patched = checked(pt_review(pytorchjob()), cfg)
    for role in ("Master", "Worker"):
        t = tmpl(patched, role)
        assert labels(t) == {"scheduling.x-k8s.io/pod-group": "pytorchjob-bert"}
        assert annotations(t) == {}
        assert t["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    (intent,) = res.intents
    assert intent.api_version == "scheduling.x-k8s.io/v1alpha1"
    assert intent.body["spec"] == {
        "minMember": 4,
        "minResources": {"cpu": "14", "memory": "56Gi", "nvidia.com/gpu": "3"},
        "scheduleTimeoutSeconds": 600,
    }
    assert "queue" not in json.dumps(intent.body)


def test_coscheduling_scheduler_name_is_configurable_and_queue_is_ignored() -> None:
    cfg = parse_config({"backend": "coscheduling", "schedulerName": "gang-scheduler"})
    pod = bare_pod("a", {"corral.dev/gang": "g", "corral.dev/queue": "q"})
    res, patched = checked(review(pod), cfg)
    assert patched["spec"]["schedulerName"] == "gang-scheduler"
    assert labels(patched) == {"scheduling.x-k8s.io/pod-group": "g"}
    assert any("no queues" in w for w in res.warnings)


def test_coscheduling_refuses_queue_settings() -> None:
    with pytest.raises(ValueError, match="coscheduling backend has no queues"):
        parse_config({"backend": "coscheduling", "defaultQueue": "x"})


# --- yunikorn ---------------------------------------------------------------------------


def test_yunikorn_task_groups() -> None:
    cfg = parse_config({"backend": "yunikorn", "gangTimeout": "15m"})
    obj = pytorchjob(annotations={"corral.dev/min-available": "3", "corral.dev/queue": "root.ml"})
    res, patched = checked(pt_review(obj), cfg)
    assert res.intents == ()  # YuniKorn has no gang object: annotations are the gang
    groups = None
    for role, name in (("Master", "master"), ("Worker", "worker")):
        t = tmpl(patched, role)
        assert t["spec"]["schedulerName"] == "yunikorn"
        assert labels(t) == {"applicationId": "pytorchjob-bert", "queue": "root.ml"}
        ann = annotations(t)
        assert ann["yunikorn.apache.org/task-group-name"] == name
        assert (
            ann["yunikorn.apache.org/schedulingPolicyParameters"]
            == "placeholderTimeoutInSeconds=900"
        )
        this = json.loads(ann["yunikorn.apache.org/task-groups"])
        assert groups is None or this == groups  # every member carries the same list
        groups = this
    assert groups == [
        {"name": "master", "minMember": 1, "minResource": {"cpu": "2", "memory": "8Gi"}},
        {
            "name": "worker",
            "minMember": 2,
            "minResource": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
            "nodeSelector": {"pool": "gpu"},
        },
    ]


def test_yunikorn_default_queue_and_pods() -> None:
    cfg = parse_config({"backend": "yunikorn"})
    _, patched = checked(review(bare_pod("solo")), cfg)
    assert labels(patched) == {"applicationId": "solo", "queue": "root.default"}
    assert annotations(patched) == {}  # a gang of one needs no task groups
    _, patched = checked(fixture("pod-create-llm-worker-0.json"), cfg)
    ann = annotations(patched)
    assert ann["yunikorn.apache.org/task-group-name"] == "members"
    assert json.loads(ann["yunikorn.apache.org/task-groups"]) == [
        {
            "name": "members",
            "minMember": 4,
            "minResource": {"cpu": "12", "memory": "96Gi", "nvidia.com/gpu": "2"},
            "tolerations": fixture("pod-create-llm-worker-0.json")["request"]["object"]["spec"][
                "tolerations"
            ],
        }
    ]


def test_yunikorn_member_pod_keeps_its_task_group() -> None:
    cfg = parse_config({"backend": "yunikorn"})
    _, job = checked(pt_review(pytorchjob()), cfg)
    worker = tmpl(job, "Worker")
    pod = bare_pod("bert-worker-0")
    pod["metadata"].update(copy.deepcopy(worker["metadata"]))
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "bert",
            "uid": "u",
            "controller": True,
        }
    ]
    res, patched = checked(review(pod), cfg)
    assert res.patch == [{"op": "replace", "path": "/spec/schedulerName", "value": "yunikorn"}]
    assert annotations(patched) == annotations(worker)


# --- kueue ------------------------------------------------------------------------------


def test_kueue_workload_gets_a_queue_label_and_nothing_else() -> None:
    cfg = parse_config({"backend": "kueue", "namespaceQueues": {"ml": "ml-local"}})
    assert cfg.effective_scheduler_name is None
    obj = pytorchjob(labels={"team": "nlp"})
    res, patched = checked(pt_review(obj), cfg)
    assert patched["metadata"]["labels"] == {"team": "nlp", "kueue.x-k8s.io/queue-name": "ml-local"}
    assert patched["spec"] == obj["spec"]  # templates untouched, schedulerName unchanged
    assert res.patch == [
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1queue-name", "value": "ml-local"}
    ]
    assert res.intents == ()


def test_kueue_leaves_workload_pods_and_child_workloads_alone() -> None:
    cfg = parse_config({"backend": "kueue"})
    res, _ = checked(fixture("pod-create-from-job-mpi-train.json"), cfg)
    assert res.patch == []
    child = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "js-a-0",
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "js",
                    "uid": "u",
                    "controller": True,
                }
            ],
        },
        "spec": {"parallelism": 2, "template": pod_template()},
    }
    res, _ = checked(review(child, group="batch"), cfg)
    assert res.patch == []


def test_kueue_plain_pod_group() -> None:
    cfg = parse_config({"backend": "kueue"})
    res, patched = checked(fixture("pod-create-llm-worker-0.json"), cfg)
    assert labels(patched) == {
        "app": "llm",
        "kueue.x-k8s.io/pod-group-name": "llm",
        "kueue.x-k8s.io/queue-name": "default",
    }
    assert annotations(patched)["kueue.x-k8s.io/pod-group-total-count"] == "4"
    assert patched["spec"]["schedulerName"] == "default-scheduler"
    assert res.intents == ()
    # a single pod is just a pod in a queue
    _, patched = checked(review(bare_pod("solo")), cfg)
    assert labels(patched) == {"kueue.x-k8s.io/queue-name": "default"}


def test_kueue_timeout_is_reported_as_ignored() -> None:
    cfg = parse_config({"backend": "kueue"})
    pod = bare_pod("a", {"corral.dev/gang": "g", "corral.dev/gang-timeout": "5m"})
    res, _ = checked(review(pod), cfg)
    assert any("gang-timeout is ignored" in w for w in res.warnings)


# --- across backends --------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["volcano", "coscheduling", "yunikorn", "kueue"])
def test_every_backend_is_idempotent_on_every_fixture(backend: str) -> None:
    cfg = parse_config({"backend": backend})
    for name in (
        "job-create-mpi-train.json",
        "pod-create-from-job-mpi-train.json",
        "pod-create-llm-worker-0.json",
        "pod-create-plain-cpu.json",
    ):
        res, _ = checked(fixture(name), cfg)
        assert res.review["response"]["allowed"], (backend, name)


@pytest.mark.parametrize("backend", ["volcano", "coscheduling", "yunikorn", "kueue"])
def test_node_pool_pinning_on_every_backend(backend: str) -> None:
    cfg = parse_config({"backend": backend, "nodePool": {"key": "pool", "value": "batch"}})
    _, patched = checked(review(bare_pod("a", {"corral.dev/gang": "g"})), cfg)
    terms = patched["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch"]}]}]


def test_consistency_fills_missing_keys_only() -> None:
    rev = fixture("pod-create-from-job-mpi-train.json")
    pod = copy.deepcopy(rev["request"]["object"])
    pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "job-mpi-train"
    res, patched = checked(with_object(rev, pod))
    ann = annotations(patched)
    assert ann["scheduling.volcano.sh/queue-name"] == "ai-team"  # filled from corral.dev/queue
    assert {op["path"] for op in res.patch} == {
        "/metadata/annotations/scheduling.volcano.sh~1queue-name",
        "/spec/schedulerName",
    }
