"""The CSV loader, a short replay of a sampled trace, and the replay hook."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from gangplace.engine import Snapshot
from gangplace.engine.fragmentation import TargetWorkload, node_fragmentation
from gangplace.engine.policies import PolicyContext, make_policy
from gangplace.sim.arrivals import TracePod, paper_arrivals
from gangplace.sim.replay import ReplayContext, replay
from gangplace.sim.trace_csv import TraceError, load_nodes, load_pods
from gangplace.thirdparty import trace_dir

NODES_CSV = "sn,cpu_milli,memory_mib,gpu,model\n"
PODS_CSV = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"


def write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text)
    return p


def test_loader_reads_units_and_constraints(tmp_path: Path) -> None:
    nodes = load_nodes(
        write(tmp_path, "n.csv", NODES_CSV + "n1,64000,262144,2,P100\nc1,32000,1024,0,\n")
    )
    assert nodes[0].allocatable["memory"] == 262144 << 20
    assert (nodes[0].gpu_count, nodes[0].gpu_model, nodes[1].gpu_count) == (2, "P100", 0)
    pods = load_pods(
        write(
            tmp_path,
            "p.csv",
            PODS_CSV
            + "a,4000,1024,1,460,\nb,8000,2048,2,1000,V100M16|V100M32\nc,1000,512,0,300,T4\n"
            + "d,1000,512,1,1200,\n",
        )
    )
    a, b, c, d = (p.shape for p in pods)
    assert (a.gpu_count, a.gpu_milli, a.gpu_resource) == (1, 460, None)
    assert (b.gpu_count, b.gpu_milli, b.gpu_models) == (2, 1000, ("V100M16", "V100M32"))
    assert (c.gpu_count, c.gpu_milli, c.gpu_models) == (0, 0, ())  # CPU-only: no GPU fields
    assert d.gpu_milli == 1000  # clamped


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name,cpu_milli\n", "missing column"),
        (PODS_CSV + "a,lots,1,0,0,\n", ":2: cpu_milli='lots' is not a number"),
        (PODS_CSV + "a,1,1,-1,0,\n", ":2: negative request"),
        (PODS_CSV + "a,1,1,2,500,\n", "shares a GPU"),
        (PODS_CSV, "no pods"),
    ],
)
def test_loader_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "bad.csv", text)
    with pytest.raises(TraceError, match=r"bad\.csv") as e:
        load_pods(path)
    assert message in str(e.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nope\.csv"):
        load_nodes(tmp_path / "nope.csv")


TRACE = trace_dir(Path(__file__).parent)  # tests marked `trace` run only when it is found


def sampled(n_nodes: int = 60, n_pods: int = 500, seed: int = 3):
    assert TRACE is not None
    rnd = random.Random(seed)
    nodes = rnd.sample(load_nodes(TRACE / "openb_node_list_gpu_node.csv"), n_nodes)
    pods = rnd.sample(load_pods(TRACE / "openb_pod_list_default.csv"), n_pods)
    return nodes, pods


def run(nodes, pods, policy: str, seed: int = 42, hook=None):
    snap = Snapshot(nodes)
    arr = paper_arrivals(pods, snap.n_nodes, int(snap.gpu_total.sum()) * 1000, seed)
    snap.node_rank = arr.node_rank
    wl = TargetWorkload.from_shapes([p.shape for p in pods])
    res = replay(snap, arr.pods, make_policy(policy, PolicyContext(wl, arr.rng)), wl, hook=hook)
    return snap, wl, res


@pytest.mark.slow
@pytest.mark.trace
def test_short_replay_of_a_sampled_trace() -> None:
    nodes, pods = sampled()
    out = {}
    for policy in ("random", "bestfit", "fgd", "corral"):
        snap, wl, res = run(nodes, pods, policy)
        cap = res.capacity_milli
        # Bookkeeping agrees with the snapshot.
        assert res.allocated[-1] == cap - int(np.maximum(snap.gpu_free, 0).sum())
        assert res.fragmented[-1] == pytest.approx(float(node_fragmentation(snap, wl).sum()))
        assert (np.diff(res.arrived) >= 0).all()
        assert (res.allocated <= res.arrived).all()
        assert (snap.gpu_free[snap.gpu_free >= 0] <= 1000).all()
        assert ((snap.alloc - snap.used) >= 0).all()
        f = res.final
        assert f.arrived_pct == 130
        assert f.unallocated_gpu_pct == pytest.approx(100 - f.allocated_gpu_pct)
        assert 0 < f.unallocated_gpu_pct < 100
        assert [p.arrived_pct for p in res.curve] == sorted(p.arrived_pct for p in res.curve)
        assert res.pods_unallocated > 0
        out[policy] = f.unallocated_gpu_pct
    # Random packs worst, even on a small sample.
    assert out["random"] > max(out["fgd"], out["corral"])


@pytest.mark.slow
@pytest.mark.trace
def test_hook_moves_pods_and_the_curve_follows() -> None:
    nodes, pods = sampled(30, 250)
    calls: list[int] = []

    def evict_oldest(ctx: ReplayContext) -> None:
        calls.append(ctx.step)
        bound = ctx.bound()
        if ctx.step % 50 == 0 and bound:
            victim = bound[0]
            ctx.evict(victim)
            assert victim.node == -1
            ctx.place(victim)  # back where the policy says

    snap, wl, res = run(nodes, pods, "fgd", hook=evict_oldest)
    assert calls == list(range(1, res.pods + 1))
    assert res.allocated[-1] == res.capacity_milli - int(np.maximum(snap.gpu_free, 0).sum())
    assert res.fragmented[-1] == pytest.approx(float(node_fragmentation(snap, wl).sum()))


def test_replay_without_trace_data() -> None:
    from tests.builders.records import gpu_node, shape

    snap = Snapshot([gpu_node("a", 16000, 2), gpu_node("b", 16000, 2)])
    arrivals = [TracePod(f"p{i}", shape(4000, 1, 600)) for i in range(6)]
    wl = TargetWorkload.from_shapes([p.shape for p in arrivals])
    res = replay(snap, arrivals, make_policy("fgd", PolicyContext(wl)), wl)
    # Four 600m pods fit (one per device, 400 left on each), CPU allows four per node.
    assert res.pods_unallocated == 2
    assert res.allocated[-1] == 2400
    assert res.final.allocated_gpu_pct == 60.0
