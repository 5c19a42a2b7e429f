"""The paper's arrival sequence: shuffle, resample tail, tune down, node ranks."""

from __future__ import annotations

from pathlib import Path

import pytest
from gangplace.sim.arrivals import TracePod, paper_arrivals
from gangplace.sim.go_rand import GoRand
from gangplace.sim.trace_csv import load_pods
from gangplace.thirdparty import trace_dir

from tests.builders.records import shape


def pods(spec: list[tuple[str, int, int]]) -> list[TracePod]:
    return [TracePod(n, shape(1000, k, d) if k else shape(1000)) for n, k, d in spec]


def test_tune_up_appends_copies_after_the_shuffled_originals() -> None:
    base = pods([("p0", 1, 500), ("p1", 1, 1000), ("p2", 0, 0)])
    arr = paper_arrivals(base, n_nodes=3, capacity_milli=4000, seed=5, inflate=1.0)
    assert sorted(p.name for p in arr.pods[:3]) == ["p0", "p1", "p2"]
    assert arr.originals == 3
    assert arr.demand_milli <= 4000
    assert arr.demand_milli == sum(p.shape.gpu_demand_milli for p in arr.pods)
    assert sorted(arr.node_rank.tolist()) == [0, 1, 2]
    # Replaying the draws by hand: Int, Shuffle(3), then Intn(3) per copy.
    r = GoRand(5)
    r.int_()
    order = sorted(base, key=lambda p: p.name)
    xs = list(order)
    r.shuffled(xs)
    assert [p.name for p in arr.pods[:3]] == [p.name for p in xs]
    demand = 1500
    tail = []
    while True:
        pick = order[r.intn(3)]
        if demand + pick.shape.gpu_milli > 4000:
            break
        tail.append(pick.name)
        demand += pick.shape.gpu_demand_milli
    assert [p.name for p in arr.pods[3:]] == tail
    assert arr.node_rank.tolist() == r.perm(3)


def test_stop_test_uses_the_per_gpu_share() -> None:
    # One 2-GPU pod: its copy is admitted while D + 1000 <= T, although it adds 2000.
    base = pods([("big", 2, 1000)])
    arr = paper_arrivals(base, n_nodes=1, capacity_milli=1000, seed=1, inflate=3.0)
    # 2000 -> (2000+1000 <= 3000) 4000 -> (4000+1000 > 3000) stop.
    assert len(arr.pods) == 2
    assert arr.demand_milli == 4000


def test_tune_down_removes_random_pods() -> None:
    base = pods([(f"p{i}", 1, 1000) for i in range(10)])
    arr = paper_arrivals(base, n_nodes=2, capacity_milli=4000, seed=9, inflate=1.0)
    assert len(arr.pods) == 4
    assert arr.originals == 4


def test_cpu_only_lists_do_not_loop() -> None:
    arr = paper_arrivals(pods([("c", 0, 0)]), n_nodes=1, capacity_milli=1000, seed=1)
    assert len(arr.pods) == 1


TRACE = trace_dir(Path(__file__).parent)  # tests marked `trace` run only when it is found


@pytest.mark.slow
@pytest.mark.trace
@pytest.mark.parametrize(
    ("trace", "seed", "expect"),
    [
        # From a Go program doing the paper's draws on the CSV: arrivals, demand, first two
        # and last two names, perm[0], perm[1], perm[1212], then the next Intn(1000).
        ("default", 42, (10866, 8075080, "openb-pod-0255", "openb-pod-1685",
                         "openb-pod-7197", "openb-pod-5877", 620, 1012, 124, 767)),
        ("default", 51, (10859, 8074900, "openb-pod-7151", "openb-pod-7598",
                         "openb-pod-7689", "openb-pod-1596", 977, 873, 821, 373)),
        ("multigpu40", 42, (7435, 8067610, "openb-pod-4816", "openb-pod-0356",
                            "openb-pod-1825", "openb-pod-5282", 1045, 509, 295, 259)),
    ],
)  # fmt: skip
def test_matches_the_go_simulator_draws(trace: str, seed: int, expect: tuple[object, ...]) -> None:
    assert TRACE is not None
    base = load_pods(TRACE / f"openb_pod_list_{trace}.csv")
    a = paper_arrivals(base, 1213, 6212 * 1000, seed)
    p = a.pods
    names = (p[0].name, p[1].name, p[-2].name, p[-1].name)
    ranks = (int(a.node_rank[0]), int(a.node_rank[1]), int(a.node_rank[1212]))
    got = (len(p), a.demand_milli, *names, *ranks, a.rng.intn(1000))
    assert got == expect
