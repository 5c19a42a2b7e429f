"""Filters over every node at once, and explanations in the scheduler's manner."""

import pytest
from gangplace.engine import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodShape,
    Snapshot,
    Toleration,
    explain,
    fits,
    member_capacity,
)

from tests.builders.engine_json import node_json, pod_json


def cluster() -> Snapshot:
    taint = [{"key": "gpu", "value": "reserved", "effect": "NoSchedule"}]
    nodes = [
        node_json("a", gpus=8, labels={"zone": "z1", "gpus": "8", "pool": "train"}),
        node_json("b", gpus=8, labels={"zone": "z2", "gpus": "8"}),
        node_json("c", gpus=4, labels={"zone": "z1", "gpus": "4"}, taints=taint),
        node_json("d", cpu="4", labels={"zone": "z3"}),
        node_json("e", gpus=8, unschedulable=True),
        node_json("f", gpus=8, ready=False),
        node_json("g", gpus=8, pods="1"),
        node_json("h"),
    ]
    pods = [pod_json("busy", "b", "1", "1Gi", gpus=6), pod_json("only", "g", "1", "1Gi")]
    return Snapshot.from_objects(nodes, pods)


def names(s: Snapshot, mask: object) -> list[str]:
    return [n for n, ok in zip(s.node_names, mask, strict=True) if ok]  # type: ignore[call-overload]


def test_resources_gpus_cordon_readiness_taints_pod_count() -> None:
    s = cluster()
    assert names(s, fits(s, PodShape.of({"cpu": 1000}, gpus=4))) == ["a"]
    assert names(s, fits(s, PodShape.of({"cpu": 1000}, gpus=2))) == ["a", "b"]
    assert names(s, fits(s, PodShape.of({"cpu": 8000}))) == ["a", "b", "h"]


def test_toleration_opens_tainted_node() -> None:
    s = cluster()
    tol = (Toleration("gpu", "Equal", "reserved", "NoSchedule"),)
    assert "c" in names(s, fits(s, PodShape.of({"cpu": 1000}, gpus=1, tolerations=tol)))
    wrong = (Toleration("gpu", "Equal", "other", "NoSchedule"),)
    assert "c" not in names(s, fits(s, PodShape.of({"cpu": 1000}, gpus=1, tolerations=wrong)))
    everything = (Toleration(operator="Exists"),)
    # tolerating everything also tolerates the cordon taint
    got = names(s, fits(s, PodShape.of({"cpu": 1000}, gpus=1, tolerations=everything)))
    assert got == ["a", "b", "c", "e"]


def test_node_selector() -> None:
    s = cluster()
    shape = PodShape.of({"cpu": 100}, node_selector=(("zone", "z1"),))
    assert names(s, fits(s, shape)) == ["a"]
    none = PodShape.of({"cpu": 100}, node_selector=(("zone", "mars"),))
    assert names(s, fits(s, none)) == []


@pytest.mark.parametrize(
    ("op", "values", "expected"),
    [
        ("In", ("z1", "z3"), ["a", "d"]),
        ("NotIn", ("z1",), ["b", "d", "h"]),  # nodes without the label match NotIn
        ("Exists", (), ["a", "b", "d"]),
        ("DoesNotExist", (), ["h"]),
    ],
)
def test_affinity_operators(op: str, values: tuple[str, ...], expected: list[str]) -> None:
    s = cluster()
    term = NodeSelectorTerm((NodeSelectorRequirement("zone", op, values),))
    assert names(s, fits(s, PodShape.of({"cpu": 100}, affinity=(term,)))) == expected


def test_affinity_gt_lt_and_terms_are_ored() -> None:
    s = cluster()
    gt = NodeSelectorTerm((NodeSelectorRequirement("gpus", "Gt", ("4",)),))
    assert names(s, fits(s, PodShape.of({"cpu": 100}, affinity=(gt,)))) == ["a", "b"]
    lt = NodeSelectorTerm((NodeSelectorRequirement("gpus", "Lt", ("8",)),))
    assert names(s, fits(s, PodShape.of({"cpu": 100}, affinity=(lt,)))) == []  # c is tainted
    pool = NodeSelectorTerm((NodeSelectorRequirement("pool", "In", ("train",)),))
    z3 = NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("z3",)),))
    assert names(s, fits(s, PodShape.of({"cpu": 100}, affinity=(pool, z3)))) == ["a", "d"]


def test_match_fields_on_node_name() -> None:
    s = cluster()
    term = NodeSelectorTerm((), (NodeSelectorRequirement("metadata.name", "In", ("b",)),))
    assert names(s, fits(s, PodShape.of({"cpu": 100}, affinity=(term,)))) == ["b"]


def test_unknown_resource_fits_nowhere() -> None:
    s = cluster()
    shape = PodShape.of({"cpu": 100, "example.com/fpga": 1})
    assert not fits(s, shape).any()
    assert "insufficient example.com/fpga" in explain(s, shape, "p")


def test_gpu_model_constraint() -> None:
    nodes = [
        node_json("t4", gpus=2, labels={"nvidia.com/gpu.product": "T4"}),
        node_json("v100", gpus=2, labels={"nvidia.com/gpu.product": "V100"}),
    ]
    s = Snapshot.from_objects(nodes)
    shape = PodShape.of({"cpu": 100}, gpus=1, gpu_milli=500, gpu_models=("V100",))
    assert names(s, fits(s, shape)) == ["v100"]


def test_member_capacity_counts_copies_per_node() -> None:
    s = cluster()
    cap = member_capacity(s, PodShape.of({"cpu": 4000}, gpus=2))
    assert dict(zip(s.node_names, cap.tolist(), strict=True)) == {
        "a": 4,
        "b": 1,
        "c": 0,
        "d": 0,
        "e": 0,
        "f": 0,
        "g": 0,
        "h": 0,
    }


def test_explain_counts_reasons_like_the_scheduler() -> None:
    s = cluster()
    msg = explain(s, PodShape.of({"cpu": 1000}, gpus=8), "worker", limit=10)
    assert msg.startswith("1/8 nodes can host pod worker: ")
    assert "1 insufficient nvidia.com/gpu" in msg  # b has 2 free
    assert "1 untolerated taint gpu=reserved" in msg
    assert "1 unschedulable" in msg and "1 not ready" in msg and "1 too many pods" in msg
    assert "2 no nvidia.com/gpu" in msg
    short = explain(s, PodShape.of({"cpu": 1000}, gpus=8), "worker", limit=2)
    assert short.endswith("4 other")


def test_explain_of_a_feasible_pod_has_no_reasons_list() -> None:
    s = Snapshot.from_objects([node_json("a")])
    assert explain(s, PodShape.of({"cpu": 100}), "p") == "1/1 nodes can host pod p"
