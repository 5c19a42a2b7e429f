"""The one rule for nodes whose pods do not add up: which nodes, what is wrong, and that
such a node is measured but never a place to put a pod; and the warnings every reader
of a dump prints about them and about pods in odd phases."""

from __future__ import annotations

from typing import Any

from gangplace.engine import EngineConfig, PodShape, Snapshot, explain, fits, static_mask
from gangplace.engine.dump_checks import dump_warnings
from gangplace.engine.fragmentation import typical_workload
from gangplace.engine.report import fragmentation_report

from tests.builders.engine_json import node_json, pod_json

SHARE = "alibabacloud.com/gpu-milli"
INDEX = "alibabacloud.com/gpu-index"


def snap(nodes: list[Any], pods: list[Any], config: EngineConfig | None = None) -> Snapshot:
    return Snapshot.from_objects(nodes, pods, config)


def gpu_over() -> Snapshot:
    """gpu-3 has 8 GPUs; eight 1-GPU pods and an unowned static pod hold 9."""
    pods = [pod_json(f"w{i}", "gpu-3", "1", "1Gi", gpus=1) for i in range(8)]
    pods.append(pod_json("static-hog", "gpu-3", "1", "1Gi", gpus=1))
    return snap([node_json("gpu-3", gpus=8), node_json("gpu-4", gpus=8)], pods)


def test_a_node_whose_pods_hold_more_gpus_than_it_has_is_named() -> None:
    s = gpu_over()
    i = s.node_index["gpu-3"]
    assert s.problems == {i: "pods hold 9 GPUs of 8 allocatable"}
    assert s.fenced.tolist() == [True, False]
    assert dump_warnings(s) == ["node gpu-3: pods hold 9 GPUs of 8 allocatable; left out of moves"]


def test_nothing_is_placed_on_it_but_it_is_still_measured() -> None:
    s = gpu_over()
    cpu_only = PodShape.of({"cpu": 1000})
    # it has CPU to spare, but no pod goes there: its figures are not a packing
    assert static_mask(s, cpu_only).tolist() == [False, True]
    assert fits(s, cpu_only).tolist() == [False, True]
    assert "1 overcommitted" in explain(s, PodShape.of({"cpu": 1000}, gpus=1), "p")
    report = fragmentation_report(s, typical_workload(s))
    assert report.total.nodes == 2 and report.total.gpus == 16


def test_requests_beyond_allocatable_name_the_resource_and_both_figures() -> None:
    nodes = [node_json("a", cpu="64", memory="8Gi", pods="2")]
    pods = [pod_json(f"p{i}", "a", "30", "4Gi") for i in range(3)]
    s = snap(nodes, pods)
    assert s.problems == {
        0: "pods request 90 cpu of 64 allocatable, pods request 12Gi memory of 8Gi "
        "allocatable, 3 pods of 2 allowed"
    }


def test_a_full_node_is_not_a_problem() -> None:
    pods = [pod_json(f"w{i}", "gpu-3", "4", "32Gi", gpus=1) for i in range(8)]
    s = snap([node_json("gpu-3", cpu="32", memory="256Gi", gpus=8)], pods)
    assert s.problems == {} and not s.fenced.any() and dump_warnings(s) == []


def test_overcommit_counts_before_a_node_is_over() -> None:
    nodes = [node_json("a", cpu="64")]
    pods = [pod_json(f"p{i}", "a", "30", "1Gi") for i in range(3)]
    assert snap(nodes, pods, EngineConfig(overcommit={"cpu": 1.5})).problems == {}
    less = snap(nodes, pods, EngineConfig(overcommit={"cpu": 0.5})).problems
    assert less == {0: "pods request 90 cpu of 32 allocatable (after overcommit)"}


def test_a_gpu_pod_on_a_node_without_gpus() -> None:
    s = snap([node_json("cpu-1")], [pod_json("p", "cpu-1", "1", "1Gi", gpus=1)])
    assert s.problems == {0: "pods hold 1 GPU of 0 allocatable"}


def test_a_device_shared_beyond_one_gpu() -> None:
    # two shares pinned to GPU 0 by their index annotation: 1.4 GPUs on one device
    pods = [
        pod_json(f"s{i}", "n", "1", "1Gi", annotations={SHARE: "700", INDEX: "0"}) for i in range(2)
    ]
    s = snap([node_json("n", gpus=2)], pods)
    assert s.problems == {0: "GPU 0 is held by pods asking for 1.4 GPUs"}


def test_a_pod_on_fewer_devices_than_it_asks_for() -> None:
    # a 2-GPU pod whose device annotation names one GPU
    pod = pod_json("two", "n", "1", "1Gi", gpus=2, annotations={INDEX: "1"})
    s = snap([node_json("n", gpus=4)], [pod])
    assert s.problems == {0: "pod default/two holds 1 of the 2 GPU devices it asks for"}


def test_pods_in_odd_phases_are_counted_as_the_scheduler_counts_them() -> None:
    nodes = [node_json("n", gpus=2)]
    pods = [
        pod_json("weird", "n", "1", "1Gi", gpus=1, phase="Evicted"),
        pod_json("gone", "n", "1", "1Gi", gpus=1, phase="Succeeded"),
    ]
    lost = pod_json("adrift", "", "1", "1Gi")
    lost["status"]["phase"] = "Running"  # no node, yet Running
    s = snap(nodes, [*pods, lost])
    # a phase Kubernetes does not have holds what it asks; a finished pod holds nothing
    assert s.gpu_free_total().tolist() == [1000]
    assert [p.name for p in s.pending] == ["adrift"]
    assert dump_warnings(s) == [
        "1 pod(s) in phase Running with no node (spec.nodeName), counted as waiting to be "
        "scheduled, as the scheduler does: default/adrift",
        "1 pod(s) in a phase Kubernetes does not have (allowed: Pending, Running, Succeeded, "
        "Failed, Unknown), counted as live where they are bound: default/weird ('Evicted')",
    ]


def test_a_pod_on_a_missing_node_is_said_for_a_dump_and_for_a_cluster() -> None:
    s = snap([node_json("n")], [pod_json("orphan", "gone")])
    assert dump_warnings(s) == [
        "1 pod(s) bound to a node that is not in the dump, left out of the figures: "
        "default/orphan on gone (dump nodes and pods together: kubectl get nodes,pods -A -o json)"
    ]
    assert dump_warnings(s, live=True) == [
        "1 pod(s) bound to a node that is not in the cluster, left out of the figures: "
        "default/orphan on gone (a node deleted before its pods)"
    ]
