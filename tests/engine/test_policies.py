"""The paper's policies score its worked examples exactly (SIMULATOR.md section 5)."""

from __future__ import annotations

import numpy as np
import pytest
from gangplace.engine import PodRecord, place_pod
from gangplace.engine.fragmentation import TargetWorkload, TaskShape
from gangplace.engine.policies import (
    DEFAULT_POLICY,
    POLICIES,
    BestFitPolicy,
    CorralPolicy,
    DotProdPolicy,
    FgdPolicy,
    GpuClusteringPolicy,
    GpuPackingPolicy,
    PolicyContext,
    RandomPolicy,
    check_policy,
    make_policy,
    policy_names,
)
from gangplace.engine.policies.corral import cpu_per_gpu_milli, cpu_stranded
from gangplace.engine.policies.fgd import fgd_score
from gangplace.sim.go_rand import GoRand

from tests.builders.records import cluster, gpu_node, set_free, shape

TOY = TargetWorkload.of(
    [(TaskShape(8000, 0, 0), 0.2), (TaskShape(4000, 500, 1), 0.5), (TaskShape(12000, 1000, 1), 0.3)]
)
ONE = np.array([0])


def idle_two_gpu():
    return cluster([gpu_node("n", 64000, 2)])


def test_baseline_example_scores() -> None:
    snap, pod = idle_two_gpu(), shape(16000, 1)
    # x = (64000/128000)(16000/128000) + (2000/8000)(1000/8000) = .09375 -> floor(100 (1 - x/2)).
    assert DotProdPolicy().score(snap, pod, ONE).tolist() == [95.0]
    # raw = .5 (48000/128000) + .5 (1000/8000) = .25 -> 75 (before normalisation).
    assert BestFitPolicy().score(snap, pod, ONE).tolist() == [75.0]
    # b = 25 * 6000 div 8000 = 18, +25 for a node with no GPU pods yet.
    assert GpuClusteringPolicy().score(snap, pod, ONE).tolist() == [43.0]
    # Every GPU free: 33 - G.
    assert GpuPackingPolicy().score(snap, pod, ONE).tolist() == [31.0]


def test_fgd_example_picks_node_b_gpu0() -> None:
    snap = cluster([gpu_node("a", 64000, 2), gpu_node("b", 64000, 2)])
    set_free(snap, 1, 64000, [600, 1000])
    pod = shape(4000, 1, 300)
    fgd = FgdPolicy(TOY)
    assert fgd.score(snap, pod, np.array([0, 1])).tolist() == [46.0, 50.0]
    assert place_pod(snap, pod, fgd) == (1, (0,))
    assert snap.gpu_free[1].tolist() == [300, 1000]


def test_fgd_score_is_a_truncated_sigmoid() -> None:
    assert fgd_score(np.array([0.0, -150.0, 150.0, -np.inf])).tolist() == [50.0, 46.0, 53.0, -1.0]


def test_fgd_prefers_the_lowest_device_on_ties() -> None:
    snap = cluster([gpu_node("a", 64000, 2)])
    assert FgdPolicy(TOY).choose_gpus(snap, shape(4000, 1, 300), 0) == (0,)


def test_gpu_packing_cases() -> None:
    snap = cluster([gpu_node("a", 64000, 4)])
    pod = shape(1000, 1, 300)
    set_free(snap, 0, 64000, [500, 1000, 400, 1000])
    # Shared devices first: the tightest eligible is 400 -> 100 - (40 div 10) = 96.
    assert GpuPackingPolicy().score(snap, pod, ONE).tolist() == [96.0]
    set_free(snap, 0, 64000, [100, 1000, 200, 1000])
    # Must open a free device on a used node: 50 - 1.
    assert GpuPackingPolicy().score(snap, pod, ONE).tolist() == [49.0]
    # CPU-only pods score 0.
    assert GpuPackingPolicy().score(snap, shape(1000), ONE).tolist() == [0.0]


def test_gpu_clustering_rewards_same_type_nodes() -> None:
    snap = cluster([gpu_node("a", 64000, 8), gpu_node("b", 64000, 8), gpu_node("c", 64000, 8)])
    share, whole = shape(1000, 1, 500), shape(1000, 1)
    snap.place(share, 0, (0,), pod=PodRecord("ns", "p0", share))
    snap.place(share, 1, (0,), pod=PodRecord("ns", "p1", share))
    snap.place(whole, 1, (1,), pod=PodRecord("ns", "p2", whole))
    pol = GpuClusteringPolicy()
    # b = 25 (8000 - R) div 8000: node a R=7500 -> 1; b R=6500 -> 4; c idle -> 0.
    assert pol.score(snap, share, np.array([0, 1, 2])).tolist() == [76.0, 54.0, 25.0]
    assert pol.score(snap, shape(1000, 2), np.array([0, 1, 2])).tolist() == [1.0, 4.0, 25.0]


def test_bestfit_normalises_over_the_candidates() -> None:
    snap = cluster([gpu_node(n, 128000, 8) for n in "abc"])
    set_free(snap, 0, 128000, [1000] * 8)
    set_free(snap, 1, 2000, [0] * 7 + [1000])
    set_free(snap, 2, 4000, [0] * 7 + [1000])
    pol = BestFitPolicy()
    pod = shape(1000, 1)
    # a: .5 (127000/128000) + .5 (7000/8000) = .934 -> 6; b: .5 (1000/128000) -> 99;
    # c: .5 (3000/128000) -> 98.
    assert pol.score(snap, pod, np.array([0, 1, 2])).tolist() == [6.0, 99.0, 98.0]
    snap.node_rank = np.array([2, 1, 0])
    # Normalised (s - 6) * 100 div 93: 0, 100, 98 -> b, whatever the ranks.
    assert pol.select(snap, pod, np.array([0, 1, 2])) == 1
    # Equal raw scores all normalise to 0: the lowest rank wins.
    snap2 = cluster([gpu_node(n, 64000, 2) for n in "ab"])
    snap2.node_rank = np.array([1, 0])
    assert pol.select(snap2, pod, np.array([0, 1])) == 1


def test_random_draws_from_the_go_stream() -> None:
    snap = cluster([gpu_node(n, 64000, 2) for n in "abcd"])
    snap.node_rank = np.array([3, 2, 1, 0])
    ref = GoRand(7)
    expect_idx = ref.intn(4)
    order = np.argsort(snap.node_rank)
    pol = RandomPolicy(GoRand(7))
    assert pol.select(snap, shape(1000, 1), np.arange(4)) == int(order[expect_idx])


def test_random_reservoir_picks_a_device_that_fits() -> None:
    snap = cluster([gpu_node("a", 64000, 4)])
    set_free(snap, 0, 64000, [100, 600, 700, 200])
    pol = RandomPolicy(GoRand(3))
    picks = {pol.choose_gpus(snap, shape(1000, 1, 500), 0) for _ in range(40)}
    assert picks == {(1,), (2,)}


def test_cpu_stranding_term() -> None:
    wl = TargetWorkload.of([(TaskShape(12000, 1000, 1), 0.5), (TaskShape(2000, 500, 1), 0.5)])
    # rho = (.5*12000 + .5*2000) / (.5*1000 + .5*500) = 7000 / 750.
    assert cpu_per_gpu_milli(wl) == pytest.approx(7000 / 750)
    # 3000 idle milli-GPU and 14000 milli-CPU: the CPU drives 1500 of it.
    assert cpu_stranded(np.array([3000]), np.array([14000]), 7000 / 750).tolist() == [1500.0]


def test_corral_keeps_cpu_only_pods_off_cpu_tight_gpu_nodes() -> None:
    wl = TargetWorkload.of([(TaskShape(12000, 1000, 1), 0.9), (TaskShape(8000, 0, 0), 0.1)])
    # a: 8 idle GPUs and just enough CPU to drive them; b: 2 idle GPUs and CPU to spare.
    snap = cluster([gpu_node("a", 96000, 8, "G2"), gpu_node("b", 104000, 2, "T4")])
    snap.node_rank = np.array([0, 1])
    cpu_pod = shape(8000)
    # FGD sees no change in F for either node (both keep every shape satisfiable, and a
    # CPU-only pod frees no GPU), so the tie goes to the lower rank: the GPU-heavy node.
    fgd_snap = cluster(list(snap.nodes))
    fgd_snap.node_rank = np.array([0, 1])
    assert place_pod(fgd_snap, cpu_pod, FgdPolicy(wl)) == (0, ())
    # corral sees node a lose 8000 / rho of drivable GPU and sends the pod to b.
    assert place_pod(snap, cpu_pod, CorralPolicy(wl)) == (1, ())


def test_registry_builds_every_policy() -> None:
    ctx = PolicyContext(TOY, GoRand(1))
    for name in POLICIES:
        snap = cluster([gpu_node("a", 64000, 2), gpu_node("b", 64000, 4)])
        pol = make_policy(name, ctx)
        # A GPU share, two whole GPUs, a CPU-only pod: each lands, on devices it may use.
        share, pair, cpu = shape(1000, 1, 300), shape(2000, 2), shape(500)
        placed = [place_pod(snap, pod, pol) for pod in (share, pair, cpu)]
        assert all(p is not None for p in placed), name
        (n1, g1), (n2, g2), (n3, g3) = (p for p in placed if p is not None)
        assert len(g1) == 1 and len(set(g2)) == 2 and g3 == (), name
        assert {n1, n2, n3} <= {0, 1}, name
        # The snapshot holds what was placed: 700 left on the shared device, the pair taken.
        assert snap.gpu_free[n1, g1[0]] == 700 and (n1, g1[0]) not in {(n2, g) for g in g2}
        assert all(snap.gpu_free[n2, g] == 0 for g in g2), name
        assert int(snap.used[:, snap.res_index["cpu"]].sum()) == 3500, name
        assert sum(int(snap.gpu_free_total()[n]) for n in (0, 1)) == 6000 - 300 - 2000, name
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        make_policy("nope", ctx)
    # Placement outside a replay chooses from the same registry, Random aside.
    assert policy_names(random_stream=False) == tuple(n for n in POLICIES if n != "random")
    assert check_policy("fgd") == "fgd" and DEFAULT_POLICY in POLICIES
    with pytest.raises(ValueError, match=r'^"rnd" is not a placement policy; allowed: dotprod,'):
        check_policy("rnd")
    with pytest.raises(ValueError, match="random stream"):
        check_policy("random")
    # binpack takes the configured weights: node b has two GPUs in use, and the same CPU free.
    snap = cluster([gpu_node("a", 64000, 2), gpu_node("b", 64000, 4)])
    set_free(snap, 1, 64000, [0, 0, 1000, 1000])
    pod, both = shape(1000, 1), np.array([0, 1])
    by_gpu = make_policy("binpack", PolicyContext(TOY, weights={"gpu": 1.0}))
    by_cpu = make_policy("binpack", PolicyContext(TOY, weights={"cpu": 1.0}))
    a, b = by_gpu.score(snap, pod, both).tolist()
    assert b > a
    a, b = by_cpu.score(snap, pod, both).tolist()
    assert a == b
    # The engine owns no random source: Random needs the replay's stream.
    with pytest.raises(ValueError, match="policy random: draws from the replay's random stream"):
        make_policy("random", PolicyContext(TOY))


def test_cached_scores_follow_node_changes() -> None:
    snap = cluster([gpu_node("a", 64000, 2), gpu_node("b", 64000, 2)])
    fgd = FgdPolicy(TOY)
    pod = shape(4000, 1, 300)
    first = fgd.score(snap, pod, np.array([0, 1])).tolist()
    set_free(snap, 1, 64000, [600, 1000])
    assert first == [46.0, 46.0]
    assert fgd.score(snap, pod, np.array([0, 1])).tolist() == [46.0, 50.0]
    token = snap.fork()
    snap.place(pod, 1, (0,))
    changed = fgd.score(snap, pod, np.array([1])).tolist()
    snap.revert(token)
    assert changed != [50.0]
    assert fgd.score(snap, pod, np.array([0, 1])).tolist() == [46.0, 50.0]
