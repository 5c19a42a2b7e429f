"""The exact neighbourhood move (gangplace.mover.hood_moves): on clusters small enough to
enumerate, the fewest pods moved against brute force; the cluster left valid, no pod
dropped, whole units only, the budget kept, the same answer twice."""

from __future__ import annotations

import itertools
import json
from collections.abc import Hashable
from typing import Any

import numpy as np
import pytest
from gangplace.cli import main
from gangplace.engine import PodShape, Snapshot
from gangplace.engine.fragmentation import TargetWorkload
from gangplace.engine.node_pod_records import NodeRecord, PodRecord
from gangplace.engine.policies import PolicyContext, make_policy
from gangplace.mover.hood_moves import fit_in_neighbourhood, neighbourhood
from gangplace.sim.arrivals import TracePod
from gangplace.sim.limit import MovesHook
from gangplace.sim.replay import replay
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

MIB = 1 << 20

Spec = tuple[int, int, int]  # (cpu milli, GPUs, thousandths of each)


def node(name: str, cpu: int, gpus: int, model: str = "T4") -> NodeRecord:
    return NodeRecord(
        name=name,
        allocatable={"cpu": cpu, "memory": 64 * 1024 * MIB, "pods": 110},
        gpu_resource="nvidia.com/gpu" if gpus else None,
        gpu_count=gpus,
        gpu_model=model if gpus else "",
    )


def shape(spec: Spec) -> PodShape:
    cpu, k, d = spec
    return PodShape.of({"cpu": cpu, "memory": 1024 * MIB}, gpus=k, gpu_milli=d if k else None)


def options(snap: Snapshot, s: PodShape) -> list[tuple[int, tuple[int, ...]]]:
    """Every (node, devices) where one pod of ``s`` fits now, by hand."""
    out: list[tuple[int, tuple[int, ...]]] = []
    vec, _ = snap.vector(s)
    for n in range(snap.n_nodes):
        if ((snap.alloc[n] - snap.used[n]) < vec).any():
            continue
        G = int(snap.gpu_total[n])
        if not s.is_gpu:
            out.append((n, ()))
        elif s.gpu_milli >= 1000:
            out += [
                (n, gs)
                for gs in itertools.combinations(range(G), s.gpu_count)
                if all(snap.gpu_free[n, g] >= 1000 for g in gs)
            ]
        else:
            out += [(n, (g,)) for g in range(G) if snap.gpu_free[n, g] >= s.gpu_milli]
    return out


def fewest_moves(snap: Snapshot, arrival: PodShape, unit_of: Any = id) -> int | None:
    """Brute force: the fewest placed pods whose (node, devices) change in any packing of
    every placed pod plus one of ``arrival`` (whole units only); None if none packs."""
    pods = [p for p in snap.pods if p.node >= 0]
    start = {id(p): (p.node, p.gpus) for p in pods}
    units: dict[Hashable, list[PodRecord]] = {}
    for p in pods:
        units.setdefault(unit_of(p), []).append(p)
    best: list[int | None] = [None]
    with snap.what_if():
        for p in pods:
            snap.remove(p)

        def place_all(todo: list[PodRecord], cost: int, k: int) -> None:
            if k == len(todo):
                go(cost)
                return
            p = todo[k]
            for n, gs in options(snap, p.shape):
                snap.place(p.shape, n, gs, pod=p)
                place_all(todo, cost, k + 1)
                snap.remove(p)

        def go(cost: int) -> None:
            for n, gs in options(snap, arrival):
                snap.place(arrival, n, gs)
                best[0] = cost
                snap.unplace(arrival, n, gs)
                return

        def choose(us: list[list[PodRecord]], i: int, moving: list[PodRecord]) -> None:
            cost = len(moving)
            if best[0] is not None and cost >= best[0]:
                return
            if i == len(us):
                place_all(moving, cost, 0)
                return
            u = us[i]
            fits_back = True
            placed: list[PodRecord] = []
            for p in u:  # the unit stays where it is
                n, gs = start[id(p)]
                if (n, gs) not in options(snap, p.shape):
                    fits_back = False
                    break
                snap.place(p.shape, n, gs, pod=p)
                placed.append(p)
            if fits_back:
                choose(us, i + 1, moving)
            for p in placed:
                snap.remove(p)
            choose(us, i + 1, moving + u)

        choose(list(units.values()), 0, [])
    return best[0]


specs = st.tuples(
    st.sampled_from([1000, 2000, 4000, 6000]),
    st.integers(0, 2),
    st.sampled_from([250, 400, 500, 600, 750, 1000]),
).map(lambda t: (t[0], t[1], 1000 if t[1] != 1 else t[2]))
nodes_st = st.lists(
    st.tuples(st.sampled_from([4000, 8000, 16000]), st.integers(0, 2)), min_size=1, max_size=3
)


@st.composite
def clusters(draw: Any, max_pods: int = 5) -> tuple[Snapshot, PodShape]:
    """A tiny cluster with pods placed anywhere they fit (hypothesis picks where), and an
    arrival shape."""
    nodes = draw(nodes_st)
    snap = Snapshot([node(f"n{i}", c, g) for i, (c, g) in enumerate(nodes)])
    for i, spec in enumerate(draw(st.lists(specs, min_size=0, max_size=max_pods))):
        s = shape(spec)
        opts = options(snap, s)
        if opts:
            n, gs = draw(st.sampled_from(opts))
            snap.place(s, n, gs, pod=PodRecord("t", f"p{i}", s))
    return snap, shape(draw(specs))


def describe(snap: Snapshot) -> str:
    nodes = [(int(snap.alloc[n, 0]), int(snap.gpu_total[n])) for n in range(snap.n_nodes)]
    pods = [
        (p.shape.request("cpu"), p.shape.gpu_count, p.shape.gpu_milli, p.node, p.gpus)
        for p in snap.pods
        if p.node >= 0
    ]
    return f"nodes {nodes} pods {pods}"


def valid(snap: Snapshot) -> None:
    assert (snap.used <= snap.alloc).all()
    for n in range(snap.n_nodes):
        assert (snap.gpu_free[n, : int(snap.gpu_total[n])] >= 0).all()
    # The arrays agree with the pods bound.
    used = np.zeros_like(snap.used)
    gfree = np.where(snap.gpu_free >= 0, 1000, -1)
    for p in snap.pods:
        if p.node >= 0:
            used[p.node] += snap.vector(p.shape)[0]
            for g in p.gpus:
                gfree[p.node, g] -= p.shape.gpu_milli
    assert (used == snap.used).all()
    assert (gfree == snap.gpu_free).all()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters(), cap=st.integers(0, 6))
def test_fewest_moves_against_brute_force(case: tuple[Snapshot, PodShape], cap: int) -> None:
    snap, arrival = case
    truth = fewest_moves(snap, arrival)
    placed = [p for p in snap.pods if p.node >= 0]
    where = {id(p): (p.node, p.gpus) for p in placed}
    before = snap.state()
    pod = PodRecord("t", "arrival", arrival)
    rep = fit_in_neighbourhood(
        snap, arrival, pod, max_pods=cap, sizes=(1, 2, 4), node_limit=100_000, move_room=True
    )
    if truth is None or truth > cap:
        assert rep is None
        assert snap.state() == before, "a failed move changed the cluster"
        return
    assert rep is not None, f"brute force: {truth} moves, model: none; {describe(snap)}"
    valid(snap)
    assert pod.node >= 0, "success reported, the arrival not placed"
    assert all(p.node >= 0 for p in placed), "a placed pod was dropped"
    changed = {id(p) for p in placed if (p.node, p.gpus) != where[id(p)]}
    assert {id(p) for p in rep.moved} == changed, "the moves reported are not those made"
    # The neighbourhoods of 4 nodes hold the whole cluster: the fewest is found.
    assert len(rep.moved) == truth


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters(max_pods=6))
def test_units_move_whole(case: tuple[Snapshot, PodShape]) -> None:
    snap, arrival = case

    def unit(p: PodRecord) -> Hashable:
        return int(p.name[1:]) // 2  # p0 and p1 together, p2 and p3, ...

    truth = fewest_moves(snap, arrival, unit)
    placed = [p for p in snap.pods if p.node >= 0]
    where = {id(p): (p.node, p.gpus) for p in placed}
    pod = PodRecord("t", "arrival", arrival)
    rep = fit_in_neighbourhood(
        snap, arrival, pod, max_pods=8, sizes=(4,), unit_of=unit, move_room=True
    )
    if truth is None:
        assert rep is None
        return
    assert rep is not None
    valid(snap)
    # Every pod of a unit a move touched was taken off; the others are where they were.
    touched = {unit(p) for p in rep.moved}
    for p in placed:
        if unit(p) not in touched:
            assert (p.node, p.gpus) == where[id(p)]
    # A unit is moved whole, but a pod of it may land back where it was (not a move).
    assert len(rep.moved) <= truth


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters(max_pods=6), cap=st.integers(0, 6))
def test_default_neighbourhoods_leave_a_valid_cluster(
    case: tuple[Snapshot, PodShape], cap: int
) -> None:
    snap, arrival = case
    truth = fewest_moves(snap, arrival)
    placed = [p for p in snap.pods if p.node >= 0]
    where = {id(p): (p.node, p.gpus) for p in placed}
    before = snap.state()
    pod = PodRecord("t", "arrival", arrival)
    rep = fit_in_neighbourhood(snap, arrival, pod, max_pods=cap)
    if rep is None:
        assert snap.state() == before
        assert pod.node < 0
        return
    valid(snap)
    assert pod.node >= 0 and all(p.node >= 0 for p in placed)
    changed = {id(p) for p in placed if (p.node, p.gpus) != where[id(p)]}
    assert {id(p) for p in rep.moved} == changed
    assert truth is not None and truth <= len(rep.moved) <= cap


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters())
def test_same_answer_twice(case: tuple[Snapshot, PodShape]) -> None:
    snap, arrival = case
    states = []
    for _ in range(2):
        with snap.what_if():
            rep = fit_in_neighbourhood(snap, arrival, PodRecord("t", "a", arrival), max_pods=6)
            states.append((snap.state(), None if rep is None else [p.name for p in rep.moved]))
    assert states[0] == states[1]


def test_pods_the_caller_pins_stay_and_other_gpu_models_are_not_used() -> None:
    snap = Snapshot([node("a", 16000, 2), node("b", 16000, 2), node("c", 16000, 2, "V100")])
    half = shape((1000, 1, 500))
    for n, g in [(0, 0), (0, 1), (1, 0), (1, 1)]:
        snap.place(half, n, (g,), pod=PodRecord("t", f"p{n}{g}", half))
    t4 = PodShape.of({"cpu": 1000}, gpus=1, gpu_models=("T4",))
    pod = PodRecord("t", "arrival", t4)
    # Pinning every pod on node a: the GPU is freed on b (a pod of b may land on a).
    pinned = {p.name: (p.node, p.gpus) for p in snap.pods if p.node == 0}
    rep = fit_in_neighbourhood(snap, t4, pod, movable=lambda p: p.node != 0)
    assert rep is not None and len(rep.moved) == 1
    assert pod.node == 1 and rep.moved[0].name.startswith("p1")
    assert {p.name: (p.node, p.gpus) for p in snap.pods if p.name in pinned} == pinned
    assert snap.nodes[pod.node].gpu_model == "T4"
    # Nothing movable at all: no move.
    other = PodRecord("t", "arrival2", t4)
    assert fit_in_neighbourhood(snap, t4, other, movable=lambda p: False) is None
    assert other.node < 0


def test_neighbourhood_holds_nodes_near_fitting_and_nodes_with_room() -> None:
    nodes = [node(f"n{i}", 16000, 2) for i in range(6)]
    snap = Snapshot(nodes)
    s = shape((1000, 1, 1000))
    for n in range(4):
        for g in range(2):
            snap.place(s, n, (g,), pod=PodRecord("t", f"p{n}{g}", s))
    got = neighbourhood(snap, s, 4)
    assert len(got) == 4 and len(set(got)) == 4
    assert {4, 5} <= set(got), "the nodes with idle GPUs belong to the neighbourhood"


def test_moves_hook_keeps_the_budget_and_counts_every_move() -> None:
    nodes = [node(f"n{i}", 32000, 2) for i in range(6)]
    rng = np.random.default_rng(3)
    arrivals = []
    for i in range(60):
        spec = [(1000, 1, 300), (1000, 1, 600), (2000, 1, 1000), (1000, 0, 0)][int(rng.integers(4))]
        arrivals.append(TracePod(f"a{i}", shape(spec)))
    workload = TargetWorkload.from_shapes([a.shape for a in arrivals])
    results = {}
    for method in ("search", "exact", "both"):
        for budget in (0, 2, 5, 50):
            sn = Snapshot(nodes)
            policy = make_policy("corral", PolicyContext(workload, np.random.default_rng(0)))
            hook = MovesHook(budget, per_arrival=4, method=method)
            res = replay(sn, arrivals, policy, workload, hook=hook)
            valid(sn)
            assert hook.pods_moved <= budget
            # A budget that never cut a search short replays the same as any larger one.
            if budget == 0:
                assert hook.budget_bound == (res.pods_unallocated > 0)
            assert hook.rescued == sum(hook.rescued_by.values())
            placed = sum(1 for p in sn.pods if p.node >= 0)
            assert placed == res.pods - res.pods_unallocated
            results[method, budget] = (res.pods_unallocated, hook.pods_moved, hook.rescued)
    assert results["exact", 0] == results["search", 0]
    # Shares spread over the GPUs leave whole-GPU arrivals out: moves rescue some.
    assert results["exact", 50][2] > 0 and results["exact", 50][1] > 0
    assert results["exact", 2][1] <= 2


def test_moves_hook_rejects_an_unknown_method() -> None:
    with pytest.raises(ValueError, match="method 'magic'"):
        MovesHook(10, method="magic")


def test_limit_command_with_exact_moves(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``gangplace limit --exact-moves``: the oracle places the arrivals the neighbourhood
    moves rescue (a whole GPU once the shares are packed), and says how."""
    (tmp_path / "nodes.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        + "".join(f"n{i},16000,65536,2,T4\n" for i in range(2))
    )
    rows = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"]
    sizes = [500, 500, 500, 500, 1000]
    rows += [f"p{i:02d},1000,1024,1,{d}," for i, d in enumerate(sizes)]
    (tmp_path / "pods.csv").write_text("\n".join(rows) + "\n")
    args = ["limit", "--nodes", str(tmp_path / "nodes.csv"), "--pods", str(tmp_path / "pods.csv")]
    # Spread puts the shares on every GPU, so the whole-GPU arrival needs moves.
    flags = ["--json", "--offline-time-limit", "0", "--no-search", "--exact-moves"]
    code = main([*args, *flags, "--policy", "spread", "--seed", "2"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["checks"]["timeouts"] == 0
    assert doc["checks"]["placed_how"] == {"neighbourhood moves": 1}
    assert doc["checks"]["pods_moved"] >= 1
