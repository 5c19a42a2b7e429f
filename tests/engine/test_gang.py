"""All-or-nothing gang placement as a user of the scheduler would see it."""

import pytest
from gangplace.engine import (
    BinpackScorer,
    Gang,
    GangError,
    GangOptions,
    PodShape,
    Snapshot,
    SpreadScorer,
    TaskRole,
    place_gang,
)

from tests.builders.engine_json import node_json, pod_json

GPU1 = PodShape.of({"cpu": 4000, "memory": 2**30}, gpus=1)
GPU4 = PodShape.of({"cpu": 4000, "memory": 2**30}, gpus=4)


def gpu_nodes(busy: list[int], racks: list[str] | None = None) -> Snapshot:
    """8-GPU nodes with ``busy[i]`` GPUs already in use on node i."""
    nodes, pods = [], []
    for i, b in enumerate(busy):
        labels = {"rack": racks[i]} if racks else {}
        nodes.append(node_json(f"n{i}", cpu="64", gpus=8, labels=labels))
        if b:
            pods.append(pod_json(f"p{i}", f"n{i}", "1", "1Gi", gpus=b))
    return Snapshot.from_objects(nodes, pods)


def test_all_or_nothing_leaves_snapshot_unchanged_on_failure() -> None:
    s = gpu_nodes([5, 6, 5])  # 3 + 2 + 3 free GPUs
    before = s.state()
    res = place_gang(s, Gang.uniform("job", GPU4, 1))
    assert not res.ok and res.assignments == []
    assert "0/1 required members fit" in res.reason
    assert "3 insufficient nvidia.com/gpu" in res.reason
    assert s.state() == before


def test_partial_fit_is_rolled_back() -> None:
    s = gpu_nodes([4, 4, 7])  # room for 2 x 4-GPU pods, gang needs 3
    before = s.state()
    res = place_gang(s, Gang.uniform("job", GPU4, 3))
    assert not res.ok
    assert "2/3 required members fit" in res.reason and "worker-2" in res.reason
    assert s.state() == before


def test_success_commits_and_reports_nodes_and_gpus() -> None:
    s = gpu_nodes([4, 0])
    res = place_gang(s, Gang.uniform("job", GPU4, 2))
    assert res.ok and res.placed == 2
    # binpack fills the half-used node first, then the empty one
    assert [(a.node_name, a.gpus) for a in res.assignments] == [
        ("n0", (4, 5, 6, 7)),
        ("n1", (0, 1, 2, 3)),
    ]
    assert s.gpu_free_total().tolist() == [0, 4000]


def test_min_available_then_best_effort_extras() -> None:
    s = gpu_nodes([5])  # 3 free
    res = place_gang(s, Gang.uniform("job", GPU1, 5, min_available=2))
    assert res.ok and res.required == 2 and res.placed == 3
    s2 = gpu_nodes([5])
    res2 = place_gang(
        s2, Gang.uniform("job", GPU1, 5, min_available=2), options=GangOptions(best_effort=False)
    )
    assert res2.placed == 2


def test_without_explain_the_reason_is_short_and_the_result_the_same() -> None:
    s = gpu_nodes([5, 6, 5])
    before = s.state()
    res = place_gang(s, Gang.uniform("job", GPU4, 1), options=GangOptions(explain=False))
    assert not res.ok and res.assignments == [] and s.state() == before
    assert res.reason == "gang job: 0/1 required members fit; no node can host pod worker-0"
    ok = place_gang(s, Gang.uniform("job", GPU1, 3), options=GangOptions(explain=False))
    assert ok.ok and ok.placed == 3


def test_dry_run_reports_without_changing() -> None:
    s = gpu_nodes([0, 0])
    before = s.state()
    res = place_gang(s, Gang.uniform("job", GPU4, 3), options=GangOptions(dry_run=True))
    assert res.ok and res.placed == 3 and s.state() == before


def test_roles_launcher_and_workers() -> None:
    s = gpu_nodes([0, 0])
    launcher = PodShape.of({"cpu": 1000})
    gang = Gang("mpi", (TaskRole("launcher", launcher, 1), TaskRole("worker", GPU4, 4)))
    res = place_gang(s, gang)
    assert res.ok and res.placed == 5
    assert sorted(a.pod for a in res.assignments) == [
        "launcher-0",
        "worker-0",
        "worker-1",
        "worker-2",
        "worker-3",
    ]
    # fewest nodes: the launcher joins a node the workers already use
    assert len(res.nodes()) == 2


def test_required_members_per_role() -> None:
    gang = Gang(
        "g",
        (TaskRole("ps", GPU1, 2, min_member=1), TaskRole("worker", GPU1, 4, min_member=2)),
        min_available=4,
    )
    assert gang.required_per_role() == [2, 2]
    with pytest.raises(GangError, match="minAvailable 9"):
        Gang.uniform("g", GPU1, 8, min_available=9)
    with pytest.raises(GangError, match="min_member"):
        TaskRole("w", GPU1, 2, min_member=3)


def test_fewest_nodes_for_a_gang() -> None:
    # spread alone would put every member on its own node; fewest_nodes keeps them together
    s = gpu_nodes([0, 0, 0, 0])
    res = place_gang(s, Gang.uniform("job", GPU1, 4), SpreadScorer())
    assert len(res.nodes()) == 1
    s2 = gpu_nodes([0, 0, 0, 0])
    res2 = place_gang(
        s2, Gang.uniform("job", GPU1, 4), SpreadScorer(), GangOptions(fewest_nodes=False)
    )
    assert len(res2.nodes()) == 4


def test_topology_key_keeps_gang_in_one_rack() -> None:
    # rack a: 4+4 free GPUs; rack b: 8+4. Binpack alone takes the fuller nodes n0, n1,
    # n3 and spans both racks; a gang of 3 x 4 GPUs fits inside rack b.
    plain = place_gang(gpu_nodes([4, 4, 0, 4]), Gang.uniform("job", GPU4, 3))
    assert set(plain.nodes()) == {"n0", "n1", "n3"}
    s = gpu_nodes([4, 4, 0, 4], racks=["a", "a", "b", "b"])
    res = place_gang(s, Gang.uniform("job", GPU4, 3), options=GangOptions(topology_key="rack"))
    assert res.ok
    assert set(res.nodes()) == {"n2", "n3"}


def test_topology_falls_back_across_domains() -> None:
    s = gpu_nodes([4, 4, 4, 4], racks=["a", "b", "c", "d"])
    res = place_gang(s, Gang.uniform("job", GPU4, 3), options=GangOptions(topology_key="rack"))
    assert res.ok and len(res.nodes()) == 3


def test_placement_is_deterministic() -> None:
    results = []
    for _ in range(2):
        s = gpu_nodes([3, 1, 6, 0, 2, 5])
        res = place_gang(s, Gang.uniform("job", GPU1, 9), BinpackScorer())
        results.append([(a.node_name, a.gpus) for a in res.assignments])
    assert results[0] == results[1]


def test_allowed_restricts_nodes() -> None:
    s = gpu_nodes([0, 0])
    only_n1 = s.gpu_total > 0
    only_n1[0] = False
    res = place_gang(s, Gang.uniform("job", GPU4, 2), allowed=only_n1)
    assert res.ok and res.nodes() == ["n1"]
