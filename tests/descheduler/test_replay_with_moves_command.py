"""``corral-descheduler simulate``: the trace replay with the planner's moves, its
limits and invariants, its output and clear errors (exit 2); and the defragment
strategy's CPU-stranding moves."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gangplace.engine import Snapshot
from gangplace.sim.arrivals import TracePod
from gangplace.sim.replay import ReplayContext, arrival_steps
from gangplace.sim.trace_csv import load_nodes, load_pods
from gangplace.sim.trace_run import prepare_trace, run_trace
from gangplace.thirdparty import trace_dir

from descheduler import DeschedulerConfig, parse_config, plan, state_from_list
from descheduler.cli import main
from descheduler.replay_with_moves import PlannerHook, replay_with_moves
from descheduler.replay_with_moves_command import trace_config
from tests.builders.descheduler_cluster import as_list, gpu_node, pod

TRACE = trace_dir(Path(__file__).parent)  # tests marked `trace` run only when it is found
needs_trace = pytest.mark.trace
EVERY_10 = [10.0 * i for i in range(1, 14)]


def sampled(n_nodes: int, n_pods: int, seed: int) -> tuple[list[Any], list[TracePod]]:
    assert TRACE is not None
    rnd = random.Random(seed)
    nodes = rnd.sample(load_nodes(TRACE / "openb_node_list_gpu_node.csv"), n_nodes)
    pods = rnd.sample(load_pods(TRACE / "openb_pod_list_default.csv"), n_pods)
    return nodes, pods


@pytest.mark.slow
@needs_trace
def test_moves_help_later_arrivals_within_the_limit_and_place_everyone_again() -> None:
    nodes, pods = sampled(40, 300, 3)
    without = run_trace(Snapshot(nodes), pods, "fgd", 42)
    run = prepare_trace(Snapshot(nodes), pods, "fgd", 42)
    cap = run.capacity_milli
    points = arrival_steps(run.arrivals.pods, cap, EVERY_10)
    hook = PlannerHook(trace_config(DeschedulerConfig(), 3), points, cap)
    rounds_seen: list[int] = []

    arrived = np.cumsum([p.shape.gpu_demand_milli for p in run.arrivals.pods]).tolist()

    def checked(ctx: ReplayContext) -> None:
        assert ctx.arrived_milli == arrived[ctx.step - 1]  # the replay counts demand
        placed = [p.key for p in ctx.pods if p.node >= 0]
        n = len(hook.rounds)
        hook(ctx)
        if len(hook.rounds) == n:
            return
        rounds_seen.append(ctx.step)
        assert hook.rounds[-1].pods_moved <= 3
        # Nobody placed before the round is left without a node after it.
        assert [p.key for p in ctx.pods if p.node >= 0] == placed
        snap = ctx.snap
        assert ((snap.alloc - snap.used) >= 0).all()
        real = snap.gpu_free[snap.gpu_free >= 0]
        assert (real <= 1000).all()
        # Failed pods stay failed: every arrival is placed or failed, once.
        assert len(ctx.pods) + len(ctx.failed) == ctx.step

    res = run.replay(hook=checked)
    assert rounds_seen and len(rounds_seen) == len(hook.rounds)
    assert hook.pods_moved > 0
    assert res.pods == without.pods
    assert res.final.unallocated_gpu_pct <= without.final.unallocated_gpu_pct
    moved = [p for p in run.snap.pods if "corral.dev/last-moved" in p.annotations]
    assert len(moved) == len(hook.moved_pods) > 0
    # The same run again moves the same pods to the same places.
    again, hook2 = replay_with_moves(
        Snapshot(nodes), pods, "fgd", 42, 1.3, trace_config(DeschedulerConfig(), 3), EVERY_10
    )
    assert [r.to_dict() | {"seconds": 0} for r in hook2.rounds] == [
        r.to_dict() | {"seconds": 0} for r in hook.rounds
    ]
    assert again.final == res.final


def test_plan_points_are_the_first_arrivals_reaching_each_share() -> None:
    from tests.builders.records import shape

    arrivals = [TracePod(f"p{i}", shape(1000, 1, 500)) for i in range(8)]  # 0.5 GPU each
    # Capacity 2 GPUs: 25% after the 1st arrival, 50% after the 2nd, 100% after the 4th.
    assert arrival_steps(arrivals, 2000, [25, 50, 60, 100, 500]) == [1, 2, 3, 4]
    assert arrival_steps(arrivals, 2000, [24.9, 25]) == [1]


# --- the command ---------------------------------------------------------------------

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"n{i},32000,131072,{2 if i % 2 else 4},{'T4' if i % 2 else 'G2'}\n" for i in range(8)
)
GPUS, MILLI = [0, 1, 1, 1, 1], [0, 450, 1000, 300, 810]
PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n" + "".join(
    f"p{i:03d},{2000 + 2500 * (i % 3)},4096,{GPUS[i % 5]},{MILLI[i % 5]},\n" for i in range(60)
)


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    n, p = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    n.write_text(NODES)
    p.write_text(PODS)
    return ["--nodes", str(n), "--pods", str(p)]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_simulate_json_has_gangplace_keys_and_the_moves(
    files: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, *files, "--policy", "fgd", "--json", "--compare")
    assert code == 0
    doc = json.loads(out)
    for key in ("trace", "seed", "inflate", "policy", "pods", "allocated_gpu_pct",
                "unallocated_gpu_pct", "fragmented_gpu_pct", "frag_rate_pct",
                "failed_gpu_pct", "pods_unallocated", "seconds", "curve",
                "pods_moved", "pods_total", "rounds", "without_moves"):  # fmt: skip
        assert key in doc, key
    assert doc["pods_total"] == doc["pods"]
    assert len(doc["rounds"]) == 12  # every 10% up to 130%, the last point past the end
    assert all(r["pods_moved"] <= 50 for r in doc["rounds"])
    assert doc["pods_moved"] == sum(r["pods_moved"] for r in doc["rounds"])
    # the replay's pods are ReplicaSet pods: every move is an eviction, counted by method
    assert doc["pods_moved_by_method"] == {"evict": doc["pods_moved"], "suspend": 0}
    assert all(sum(r["pods_moved_by_method"].values()) == r["pods_moved"] for r in doc["rounds"])
    w = doc["without_moves"]
    assert doc["unallocated_gain_pct"] == pytest.approx(
        w["unallocated_gpu_pct"] - doc["unallocated_gpu_pct"], abs=0.011
    )


def test_simulate_at_points_and_text(files: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, *files, "--plan-at", "50,90%", "--every", "50")
    assert code == 0
    assert "policy corral" in out and "% arrived: allocated" in out
    assert "pods moved" in out and "in 2 planning rounds of at most 50" in out
    assert "moves by method: " in out and " pods evicted" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--plan-every", "abc"], "--plan-every 'abc'"),
        (["--plan-every", "0%"], "--plan-every '0%'"),
        (["--plan-at", ","], "--plan-at ','"),
        (["--plan-at", "90,x"], "--plan-at 'x'"),
        (["--max-moves", "-1"], "--max-moves -1"),
        (["--min-gain", "-0.5"], "--min-gain -0.5"),
        (["--config", "/no/such.yaml"], "--config: config /no/such.yaml"),
        (["--policy", "nope"], "--policy nope: unknown"),
        (["--inflate", "-1"], "--inflate -1.0"),
        (["--every", "0"], "--every 0"),
        (["--pods", "/no/such.csv"], "--pods: /no/such.csv"),
    ],
)
def test_simulate_bad_input_exits_2_naming_the_flag(
    files: list[str], capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code, _, err = run_cli(capsys, *files, *extra)
    assert code == 2
    assert message in err
    assert err.startswith("corral-descheduler simulate: ")


def test_simulate_config_file_errors_name_the_key(
    files: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("defragment:\n  stranding_weight: -1\n")
    code, _, err = run_cli(capsys, *files, "--config", str(cfg))
    assert code == 2 and "defragment.stranding_weight" in err


def test_trace_config_keeps_what_the_file_sets() -> None:
    base = parse_config(
        {"limits": {"max_evictions_per_node": 2}, "defragment": {"min_gain_gpus": 1}}
    )
    cfg = trace_config(base, 7, 0.05)
    assert cfg.limits.max_evictions_per_run == 7
    assert cfg.limits.max_evictions_per_node == 2
    assert cfg.limits.max_evictions_per_namespace is None
    assert cfg.defragment.min_gain_gpus == 1
    assert trace_config(DeschedulerConfig(), 7, 0.05).defragment.min_gain_gpus == 0.05


# --- defragment: GPUs stranded for want of CPU -----------------------------------------


def stranded_cluster() -> dict[str, Any]:
    """n0: four 1-GPU pods and a 60-core CPU-only pod leave 4 GPUs idle with 4 cores
    free; n1: every GPU busy, 64 cores free. Moving the CPU-only pod frees the GPUs."""
    items = [gpu_node("n0"), gpu_node("n1")]
    items += [pod(f"a{i}", "n0", 1, cpu="8") for i in range(4)]
    items += [pod("hog", "n0", 0, cpu="60")]
    items += [pod(f"b{i}", "n1", 1, cpu="4") for i in range(8)]
    return as_list(items)


def test_cpu_only_pod_leaves_the_gpu_node_whose_cpu_it_exhausts() -> None:
    from tests.builders.descheduler_cluster import NOW

    cfg = parse_config({"scheduling": {"policy": "fgd"}, "defragment": {"enabled": True}})
    p = plan(state_from_list(stranded_cluster(), NOW), cfg)
    assert [(pm.name, pm.node, pm.target) for m in p.moves for pm in m.pods] == [
        ("hog", "n0", "n1")
    ]
    assert p.moves[0].kind == "defragment" and "CPU-stranded" in p.moves[0].reason
    weight0 = {
        "scheduling": {"policy": "fgd"},
        "defragment": {"enabled": True, "stranding_weight": 0},
    }
    off = parse_config({**weight0, "exact_moves": {"enabled": False}})
    assert plan(state_from_list(stranded_cluster(), NOW), off).moves == []
    # F(M) alone sees no gain, but a typical pod (1 GPU, 8 cores) fits nowhere: the
    # exact moves make room for it, with the same move
    p = plan(state_from_list(stranded_cluster(), NOW), parse_config(weight0))
    assert [(pm.name, pm.node, pm.target) for m in p.moves for pm in m.pods] == [
        ("hog", "n0", "n1")
    ]
    assert "typical shape cpu=8 gpu=1, which fits nowhere" in p.moves[0].reason
