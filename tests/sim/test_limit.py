"""The oracle's exact check (gangplace.sim): proofs against brute force on tiny clusters,
repairs that leave a valid cluster, timeouts counted, and the oracle against a
move-based policy on the same arrivals."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from gangplace.cli import main
from gangplace.engine import PodShape, Snapshot
from gangplace.engine.fragmentation import TargetWorkload
from gangplace.engine.node_pod_records import NodeRecord, PodRecord
from gangplace.engine.policies import PolicyContext, make_policy
from gangplace.mover.search_moves import fit_with_moves
from gangplace.mover.shape_dominance import needs_at_least
from gangplace.sim import exact
from gangplace.sim.arrivals import TracePod
from gangplace.sim.fit_bound import FEASIBLE, INFEASIBLE, TIMEOUT, FitModel, offline_bound
from gangplace.sim.limit import MovesHook, OracleHook
from gangplace.sim.replay import replay
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Solver-backed hypothesis searches: about a minute together.
pytestmark = pytest.mark.slow


MIB = 1 << 20


def node(name: str, cpu: int, gpus: int) -> NodeRecord:
    return NodeRecord(
        name=name,
        allocatable={"cpu": cpu, "memory": 64 * 1024 * MIB, "pods": 110},
        gpu_resource="nvidia.com/gpu" if gpus else None,
        gpu_count=gpus,
        gpu_model="T4" if gpus else "",
    )


def shape(cpu: int, k: int, d: int) -> PodShape:
    return PodShape.of({"cpu": cpu, "memory": 1024 * MIB}, gpus=k, gpu_milli=d if k else None)


def brute_fits(nodes: list[tuple[int, int]], pods: list[tuple[int, int, int]]) -> bool:
    """Exact: some placement of every pod (CPU per node, whole GPUs, shares per GPU)."""
    state = [[cpu, [1000] * g] for cpu, g in nodes]
    order = sorted(pods, key=lambda p: (-p[1] * p[2], -p[0]))

    def go(i: int) -> bool:
        if i == len(order):
            return True
        cpu, k, d = order[i]
        seen: set[Any] = set()
        for st_ in state:
            key = (st_[0], tuple(sorted(st_[1])))
            if key in seen:
                continue
            seen.add(key)
            if st_[0] < cpu:
                continue
            gfree = st_[1]
            if k == 0:
                st_[0] -= cpu
                if go(i + 1):
                    return True
                st_[0] += cpu
            elif d >= 1000:
                full = [g for g, f in enumerate(gfree) if f == 1000][:k]
                if len(full) < k:
                    continue
                st_[0] -= cpu
                for g in full:
                    gfree[g] = 0
                if go(i + 1):
                    return True
                for g in full:
                    gfree[g] = 1000
                st_[0] += cpu
            else:
                tried: set[int] = set()
                for g, f in enumerate(gfree):
                    if f < d or f in tried:
                        continue
                    tried.add(f)
                    st_[0] -= cpu
                    gfree[g] -= d
                    if go(i + 1):
                        return True
                    gfree[g] += d
                    st_[0] += cpu
        return False

    return go(0)


nodes_st = st.lists(
    st.tuples(st.sampled_from([4000, 8000, 16000]), st.integers(0, 2)), min_size=1, max_size=3
)
pods_st = st.lists(
    st.tuples(
        st.sampled_from([1000, 2000, 4000, 6000]),
        st.integers(0, 2),
        st.sampled_from([250, 400, 500, 600, 750, 1000]),
    ).map(lambda t: (t[0], t[1], 1000 if t[1] > 1 else t[2])),
    min_size=1,
    max_size=6,
)


def snap_of(nodes: list[tuple[int, int]]) -> Snapshot:
    return Snapshot([node(f"n{i}", c, g) for i, (c, g) in enumerate(nodes)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=nodes_st, pods=pods_st)
def test_model_proofs_agree_with_brute_force(
    nodes: list[tuple[int, int]], pods: list[tuple[int, int, int]]
) -> None:
    snap = snap_of(nodes)
    counts = Counter(shape(*p) for p in pods)
    model = FitModel(snap, counts, len(pods))
    truth = brute_fits(nodes, pods)
    for milp_limit in (0.0, 10.0):  # the LP alone, then with the integer model
        status, by = model.check(counts, 10.0, milp_limit)
        assert status != TIMEOUT
        if status == INFEASIBLE:
            assert not truth, f"the model ({by}) called a packable set infeasible"
        if truth:
            assert status == FEASIBLE


def run_oracle(
    nodes: list[tuple[int, int]], pods: list[tuple[int, int, int]], **kw: Any
) -> tuple[Snapshot, OracleHook, list[str], list[int], list[tuple[str, int, tuple[int, ...]]]]:
    """Replay ``pods`` on ``nodes`` with the oracle: the snapshot, the hook, what each
    arrival's check ended as, the arrivals placed, and every placed pod's (name, node,
    devices) after each arrival (to see that none is ever dropped)."""
    snap = snap_of(nodes)
    arrivals = [TracePod(f"p{i}", shape(*p)) for i, p in enumerate(pods)]
    hook = OracleHook(snap, arrivals, **kw)
    policy = make_policy("bestfit", PolicyContext(TargetWorkload((), ())))
    ends: list[str] = []
    seen: set[str] = set()

    def watch(ctx: Any) -> None:
        st_ = hook.stats
        before = (st_.placed, st_.proved, st_.timeouts, st_.checks)
        hook(ctx)
        after = (st_.placed, st_.proved, st_.timeouts, st_.checks)
        if after[3] == before[3]:
            ends.append("fits")
        else:
            moved = [k for k in range(3) if after[k] != before[k]]
            assert len(moved) == 1, "a check must end exactly one way"
            ends.append(("placed", "proved", "timeout")[moved[0]])
        now = {p.name for p in snap.pods if p.node >= 0}
        assert seen <= now, f"placed pods dropped: {seen - now}"
        seen.update(now)
        # Never overcommitted, at every step.
        assert (snap.used <= snap.alloc).all()
        assert all(((row >= 0) | (row == -1)).all() for row in snap.gpu_free)

    replay(snap, arrivals, policy, TargetWorkload((), ()), hook=watch)
    bound = {p.name for p in snap.pods if p.node >= 0}
    placed = [i for i in range(len(pods)) if f"p{i}-{i}" in bound]
    return snap, hook, ends, placed, []


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=nodes_st, pods=pods_st, search=st.booleans(), exact_moves=st.booleans())
def test_oracle_is_exact_against_brute_force(
    nodes: list[tuple[int, int]],
    pods: list[tuple[int, int, int]],
    search: bool,
    exact_moves: bool,
) -> None:
    """On clusters small enough to enumerate: no check times out, an arrival is placed
    exactly when some arrangement of the pods placed before it plus it exists, and one
    proved infeasible really has none; the cluster never overcommits and no placed pod
    is dropped."""
    if not any(g for _, g in nodes):
        nodes = [*nodes, (8000, 1)]
    _, hook, ends, placed, _ = run_oracle(
        nodes, pods, time_limit=20.0, search=search, exact_moves=exact_moves
    )
    st_ = hook.stats
    assert st_.timeouts == 0
    assert st_.checks == st_.placed + st_.proved + st_.timeouts
    for i, how in enumerate(ends):
        before = [pods[j] for j in placed if j < i]
        truth = brute_fits(nodes, [*before, pods[i]])
        assert truth == (how in ("fits", "placed")), (i, how, truth)
    assert brute_fits(nodes, [pods[i] for i in placed])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=nodes_st, pods=pods_st)
def test_configuration_path_is_sound_against_brute_force(
    nodes: list[tuple[int, int]], pods: list[tuple[int, int, int]]
) -> None:
    """The path large clusters take (column generation, the residual dive, the restricted
    master, a plan matched to nodes and carried out), forced on small ones: it may time
    out, but what it places packs, what it proves infeasible is, and it never
    overcommits or drops a pod."""
    if not any(g for _, g in nodes):
        nodes = [*nodes, (8000, 1)]
    orig = OracleHook.__init__

    def init(self: OracleHook, *a: Any, **kw: Any) -> None:
        orig(self, *a, **kw)
        self.exact.assign_nodes = 0  # never the assignment model on the whole cluster

    OracleHook.__init__ = init  # type: ignore[method-assign]
    try:
        _, hook, ends, placed, _ = run_oracle(nodes, pods, time_limit=20.0, search=False)
    finally:
        OracleHook.__init__ = orig  # type: ignore[method-assign]
    st_ = hook.stats
    assert st_.checks == st_.placed + st_.proved + st_.timeouts
    for i, how in enumerate(ends):
        before = [pods[j] for j in placed if j < i]
        truth = brute_fits(nodes, [*before, pods[i]])
        if how in ("fits", "placed"):
            assert truth, (i, how)
        elif how == "proved":
            assert not truth, (i, how)
    assert brute_fits(nodes, [pods[i] for i in placed])


def test_oracle_rearranges_across_nodes_where_the_search_cannot() -> None:
    """Two 2-GPU nodes, each GPU half used: a whole GPU exists only if the shares are
    consolidated, which the model finds (and the search limited to one move cannot)."""
    nodes = [(16000, 2), (16000, 2)]
    pods = [(1000, 1, 400), (1000, 1, 400), (1000, 1, 400), (1000, 1, 400)]
    pods += [(1000, 1, 600), (1000, 1, 600), (1000, 1, 1000)]
    _, hook, ends, placed, _ = run_oracle(nodes, pods, search=False)
    assert ends[-1] == "placed" and placed == list(range(len(pods)))
    assert hook.stats.placed_by_model == 1 and hook.stats.pods_moved >= 1


def test_repair_moves_the_fewest_pods_and_keeps_everyone_placed() -> None:
    snap = snap_of([(16000, 1), (16000, 1)])
    policy = make_policy("bestfit", PolicyContext(TargetWorkload((), ())))
    small = [PodRecord("t", f"s{i}", shape(1000, 1, 300)) for i in range(2)]
    snap.place(small[0].shape, 0, (0,), pod=small[0])
    snap.place(small[1].shape, 1, (0,), pod=small[1])
    big = PodRecord("t", "big", shape(1000, 1, 800))
    rep = fit_with_moves(snap, big.shape, policy, big, max_pods=4)
    assert rep is not None and len(rep.moved) == 1
    assert big.node >= 0 and all(p.node >= 0 for p in small)
    assert (snap.gpu_free >= 0).all()
    # No room for a second 800m share whatever moves: the snapshot is left as it was.
    before = snap.state()
    other = PodRecord("t", "big2", shape(1000, 1, 800))
    assert fit_with_moves(snap, other.shape, policy, other, max_pods=4) is None
    assert snap.state() == before


def test_timeouts_are_counted_and_leave_the_arrival_unplaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Out:
        status, x, fun, message = 1, None, None, "time limit reached"

    monkeypatch.setattr(exact, "linprog", lambda *a, **k: Out())
    snap = snap_of([(16000, 1)])
    arrivals = [TracePod("a", shape(1000, 1, 700)), TracePod("b", shape(1000, 1, 700))]
    hook = OracleHook(snap, arrivals, time_limit=0.1, search=False)
    policy = make_policy("bestfit", PolicyContext(TargetWorkload((), ())))
    res = replay(snap, arrivals, policy, TargetWorkload((), ()), hook=hook)
    assert hook.stats.timeouts == 1 and res.pods_unallocated == 1
    assert hook.stats.to_dict()["timed_out_treated_as"] == "not placed"
    assert hook.stats.timeout_gpu_milli == 700


def test_needs_at_least() -> None:
    snap = snap_of([(16000, 2)])
    assert needs_at_least(snap, shape(2000, 1, 800), shape(1000, 1, 700))
    assert needs_at_least(snap, shape(2000, 1, 1000), shape(1000, 1, 700))
    assert not needs_at_least(snap, shape(2000, 1, 600), shape(1000, 1, 700))
    assert not needs_at_least(snap, shape(500, 1, 800), shape(1000, 1, 700))
    assert not needs_at_least(snap, shape(2000, 0, 0), shape(1000, 1, 700))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(
        st.tuples(st.sampled_from([8000, 16000]), st.integers(1, 2)), min_size=2, max_size=3
    ),
    pods=st.lists(
        st.tuples(
            st.sampled_from([1000, 3000]), st.just(1), st.sampled_from([300, 500, 700, 1000])
        ),
        min_size=3,
        max_size=10,
    ),
)
def test_oracle_accepts_first_where_a_move_policy_and_it_part(
    nodes: list[tuple[int, int]], pods: list[tuple[int, int, int]]
) -> None:
    """Until the first arrival on which they decide differently, the oracle and a
    move-based policy hold the same pods; on that arrival the oracle is the one that
    places it (whatever the policy can pack, the oracle's check finds packable, unless
    the check timed out). Later
    they may part either way: greedily placing can block a bigger later pod."""
    arrivals = [TracePod(f"p{i}", shape(*p)) for i, p in enumerate(pods)]

    hooks: list[Any] = []

    def decisions(hook: Any) -> list[bool]:
        snap = snap_of(nodes)
        h = hook(snap)
        hooks.append(h)
        policy = make_policy("bestfit", PolicyContext(TargetWorkload((), ())))
        out: list[bool] = []

        def watch(ctx: Any) -> None:
            h(ctx)
            i = ctx.step - 1
            out.append(any(p.name == f"p{i}-{i}" and p.node >= 0 for p in ctx.pods))

        replay(snap, arrivals, policy, TargetWorkload((), ()), hook=watch)
        return out

    oracle = decisions(lambda s: OracleHook(s, arrivals))
    moves = decisions(lambda s: MovesHook(budget=100, per_arrival=2))
    for o, m in zip(oracle, moves, strict=True):
        if o != m:
            # Only an arrival the oracle could not decide (counted) may go the other way.
            assert (o and not m) or hooks[0].stats.timeouts > 0
            break


def test_offline_bound_is_above_what_fits() -> None:
    snap = snap_of([(16000, 2)])
    counts = Counter({shape(1000, 1, 700): 3, shape(1000, 1, 1000): 1})
    b = offline_bound(snap, counts, 10.0)
    # 700 + 1000 fit; 700 + 700 cannot share one GPU: at most 1700 placed.
    assert b.lp_milli >= b.milp_bound_milli >= 1700 - 1e-6
    assert b.milp_bound_milli <= 1700 + 1e-6


def test_limit_command_prints_the_oracle_and_references(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "nodes.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        + "".join(f"n{i},16000,65536,2,T4\n" for i in range(3))
    )
    rows = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"]
    sizes = [700, 300, 500, 1000, 810, 450, 200, 1000]
    rows += [f"p{i:02d},2000,1024,1,{d}," for i, d in enumerate(sizes)]
    (tmp_path / "pods.csv").write_text("\n".join(rows) + "\n")
    code = main(
        [
            "limit",
            "--nodes",
            str(tmp_path / "nodes.csv"),
            "--pods",
            str(tmp_path / "pods.csv"),
            "--json",
            "--offline-time-limit",
            "5",
            "--relaxed",
        ]
    )
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["checks"]["timed_out_treated_as"] == "not placed"
    assert doc["checks"]["timeouts"] == 0
    assert doc["offline"]["lp_unallocated_gpu_pct"] <= doc["oracle_unallocated_gpu_pct"]
    assert doc["unallocated_gpu_pct"] == doc["oracle_unallocated_gpu_pct"]
    assert doc["relaxed_greedy"]["timeouts"] == 0
    assert main(["limit", "--nodes", str(tmp_path / "nodes.csv"), "--time-limit", "0"]) == 2


def test_relaxed_greedy_takes_what_the_lp_admits() -> None:
    from gangplace.sim.limit import relaxed_greedy

    snap = snap_of([(16000, 1)])
    arrivals = [TracePod(f"p{i}", shape(1000, 1, d)) for i, d in enumerate((700, 700, 300))]
    out = relaxed_greedy(snap, arrivals, Counter())
    # Two shares above half a GPU cannot share it: the second 700m is proved out.
    assert out.proved == 1 and out.timeouts == 0
    assert out.result.pods_unallocated == 1
    assert out.result.allocated.tolist() == [700, 700, 1000]
