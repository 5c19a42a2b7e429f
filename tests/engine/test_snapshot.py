"""Snapshots read the API's JSON, account requests per node and GPU, and undo exactly."""

import numpy as np
import pytest
from gangplace.engine import EngineConfig, PodShape, Snapshot, SnapshotError
from pydantic import ValidationError

from tests.builders.engine_json import node_json, pod_json

GI = 2**30


def small() -> Snapshot:
    nodes = [node_json("n2", gpus=8), node_json("n1", gpus=4), node_json("cpu", cpu="64")]
    pods = [
        pod_json("a", "n1", "4", "16Gi", gpus=2),
        pod_json("b", "n1", "2", "8Gi"),
        pod_json("c", "n2", "1", "1Gi", annotations={"alibabacloud.com/gpu-milli": "300"}),
        pod_json("d", "n2", "1", "1Gi", annotations={"alibabacloud.com/gpu-milli": "500"}),
        pod_json("done", "n2", "30", "1Gi", phase="Succeeded"),
        pod_json("waiting", "", "1", "1Gi", gpus=1),
    ]
    return Snapshot.from_objects(nodes, pods)


def test_nodes_sorted_and_requests_accounted() -> None:
    s = small()
    assert s.node_names == ["cpu", "n1", "n2"]
    cpu, mem, pods = (s.res_index[r] for r in ("cpu", "memory", "pods"))
    n1 = s.node_index["n1"]
    assert s.used[n1, cpu] == 6000 and s.used[n1, mem] == 24 * GI and s.used[n1, pods] == 2
    # a finished pod holds nothing
    assert s.used[s.node_index["n2"], cpu] == 2000


def test_gpu_devices_whole_and_shared() -> None:
    s = small()
    n1, n2 = s.node_index["n1"], s.node_index["n2"]
    assert list(s.gpu_free[n1, :4]) == [0, 0, 1000, 1000]
    # two shares pack onto one device (tightest fit), leaving seven whole GPUs
    assert sorted(s.gpu_free[n2].tolist()) == [200, 1000, 1000, 1000, 1000, 1000, 1000, 1000]
    assert list(s.gpu_free[s.node_index["cpu"]]) == [-1] * 8
    assert s.gpu_free_total().tolist() == [0, 2000, 7200]


def test_pending_pods_are_listed_not_bound() -> None:
    s = small()
    assert [p.name for p in s.pending] == ["waiting"]
    assert s.pending[0].node == -1


def test_from_list_ignores_other_kinds() -> None:
    doc = {
        "kind": "List",
        "items": [node_json("n"), pod_json("p", "n"), {"kind": "PodDisruptionBudget"}],
    }
    s = Snapshot.from_list(doc)
    assert s.n_nodes == 1 and len(s.pods) == 1


def test_overcommit_scales_allocatable_but_never_gpus() -> None:
    s = Snapshot.from_objects(
        [node_json("n", cpu="10")], config=EngineConfig(overcommit={"cpu": 1.5})
    )
    assert s.alloc[0, s.res_index["cpu"]] == 15000
    assert s.capacity[0, s.res_index["cpu"]] == 10000
    with pytest.raises(ValidationError, match="cannot be overcommitted"):
        EngineConfig(overcommit={"nvidia.com/gpu": 2.0})
    with pytest.raises(ValidationError, match="overcommit"):
        EngineConfig(overcommit={"cpu": -1})


def test_fork_revert_restores_exactly() -> None:
    s = small()
    before = s.state()
    shape = PodShape.of({"cpu": 1000}, gpus=1)
    t = s.fork()
    s.place(shape, s.node_index["n2"], (3,))
    victim = next(p for p in s.pods if p.name == "a")
    s.remove(victim)
    assert victim.node == -1 and s.state() != before
    s.revert(t)
    assert s.state() == before and victim.node == s.node_index["n1"]


def test_nested_forks_and_commit() -> None:
    s = small()
    before = s.state()
    shape = PodShape.of({"cpu": 1000})
    outer = s.fork()
    s.place(shape, 0)
    inner = s.fork()
    s.place(shape, 0)
    s.commit(inner)
    assert s.used[0, s.res_index["cpu"]] == 2000
    s.revert(outer)
    assert s.state() == before


def test_what_if_context_reverts() -> None:
    s = small()
    before = s.state()
    with s.what_if():
        s.place(PodShape.of({"cpu": 1000}), 0)
    assert s.state() == before


def test_placing_a_new_pod_record_is_undone_too() -> None:
    s = small()
    before = s.state()
    waiting = s.pending[0]
    with s.what_if():
        s.place(waiting.shape, s.node_index["n1"], (2,), pod=waiting)
        assert waiting.node == s.node_index["n1"]
    assert waiting.node == -1 and s.state() == before


def test_revert_without_fork_is_an_error() -> None:
    with pytest.raises(ValueError, match="no open fork"):
        small().revert()


def test_bad_objects_name_themselves() -> None:
    with pytest.raises(SnapshotError, match=r"metadata\.name"):
        Snapshot.from_objects([{"metadata": {}}])
    bad = node_json("n9", cpu="many")
    with pytest.raises(SnapshotError, match=r"node n9: .*'many'"):
        Snapshot.from_objects([bad])
    with pytest.raises(SnapshotError, match="pod default/p"):
        Snapshot.from_objects([node_json("n")], [pod_json("p", "n", cpu="x")])
    with pytest.raises(SnapshotError, match="items"):
        Snapshot.from_list({"kind": "List"})
    with pytest.raises(SnapshotError, match="two nodes with the same name: n; allowed: one"):
        Snapshot.from_objects([node_json("n"), node_json("m"), node_json("n")])


def test_a_fraction_of_a_gpu_or_a_priority_that_is_no_number_is_one_line() -> None:
    half = pod_json("half", "n", gpus=1)
    half["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "0.5"
    with pytest.raises(SnapshotError) as e:
        Snapshot.from_objects([node_json("n", gpus=8)], [half])
    assert str(e.value) == (
        'pod default/half: spec.containers[0].resources.requests["nvidia.com/gpu"]: "0.5" '
        'is not a whole number of GPUs; allowed: a whole number, such as "1" (a share of a '
        "GPU is asked for with the alibabacloud.com/gpu-milli annotation)"
    )
    high = pod_json("high", "n", spec={"priority": "high"})
    with pytest.raises(SnapshotError) as e:
        Snapshot.from_objects([node_json("n")], [high])
    assert str(e.value) == (
        "pod default/high: spec.priority: 'high' is not an integer; allowed: a whole number "
        "(the API server sets it from the pod's PriorityClass)"
    )


def test_unknown_node_and_not_ready() -> None:
    s = Snapshot.from_objects(
        [node_json("a", ready=False), node_json("b")], [pod_json("p", "gone")]
    )
    assert s.ready.tolist() == [False, True]
    assert s.pods[0].node == -1 and not s.used.any()
    assert np.all(s.used == 0)


def test_a_gpu_request_past_any_count_is_one_line_not_an_overflow() -> None:
    """Found by the junk-input property: "1Ei" GPUs overflowed the per-node sums."""
    huge = pod_json("huge", "n", gpus=1)
    huge["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1Ei"
    with pytest.raises(SnapshotError) as e:
        Snapshot.from_objects([node_json("n", gpus=8)], [huge])
    assert str(e.value) == (
        'pod default/huge: spec.containers[0].resources.requests["nvidia.com/gpu"]: "1Ei" '
        "is not a GPU count a pod can ask for; allowed: a whole number up to 65536"
    )
    big = pod_json("big", "", gpus=300)
    snap = Snapshot.from_objects([node_json("n", gpus=8)], [big])
    assert [p.name for p in snap.pending] == ["big"]


def test_a_huge_gpu_count_annotation_is_one_line_not_an_overflow() -> None:
    """The shape itself bounds its GPU count, whatever said it (here the share annotation)."""
    shared = pod_json("shared", "n")
    shared["metadata"]["annotations"] = {
        "alibabacloud.com/gpu-milli": "1000",
        "alibabacloud.com/gpu-count": str(2**60),
    }
    with pytest.raises(SnapshotError) as e:
        Snapshot.from_objects([node_json("n", gpus=8)], [shared])
    assert str(e.value) == (
        f'pod default/shared: alibabacloud.com/gpu-count: "{2**60}" is not a GPU count a pod '
        "can ask for; allowed: a whole number up to 65536"
    )
