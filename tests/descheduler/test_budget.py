"""The limits and disruption budgets one plan keeps to: the config's limits, named by
their keys; a move refused or admitted whole; what earlier moves used counts; the
planner and the evictor read one check, and neither counts a terminal or pending pod
against a disruption budget (the Eviction API does not)."""

from __future__ import annotations

import pytest
from gangplace.engine import PodRecord, PodShape
from gangplace.engine.eviction_budget import EvictionTarget, Limits, check_disruption
from gangplace.engine.objects import PdbRecord, pdb_from_json

from descheduler import parse_config
from descheduler.planning.budget import PlanBudget, limits_of
from descheduler.planning.state import EvictedPod
from tests.builders.descheduler_cluster import pdb


def rec(name: str, node: str = "n0", *, gpus: int = 1, ns: str = "default", **kw: str) -> PodRecord:
    labels = {"app": kw.pop("app", "train")}
    phase = kw.pop("phase", "Running")
    return PodRecord(
        ns, name, PodShape.of({"cpu": 1}, gpus=gpus), node_name=node, labels=labels, phase=phase
    )


def budget(pdbs: list[PdbRecord] | None = None, **limits: float) -> PlanBudget:
    return PlanBudget(parse_config({"limits": limits}).limits, pdbs or [])


def pdbs(allowed: int) -> list[PdbRecord]:
    return [pdb_from_json(pdb("train", {"app": "train"}, allowed))]


@pytest.mark.parametrize(
    ("limits", "pods", "why"),
    [
        ({"max_evictions_per_run": 2}, 3, "max_evictions_per_run (2)"),
        ({"max_evictions_per_node": 1}, 2, "max_evictions_per_node (1, node n0)"),
        (
            {"max_evictions_per_namespace": 2},
            3,
            "max_evictions_per_namespace (2, namespace default)",
        ),
        ({"max_evictions_per_queue": 1}, 2, "max_evictions_per_queue (1, queue q1)"),
        ({"max_gpus_disrupted_per_run": 1.5}, 2, "max_gpus_disrupted_per_run (1.5)"),
    ],
)
def test_each_limit_refuses_a_move_whole_and_names_its_key(
    limits: dict[str, float], pods: int, why: str
) -> None:
    b = budget(**limits)
    move = [rec(f"p{i}") for i in range(pods)]
    assert b.refusal(move, "q1") == why
    assert b.refusal(move[:1], "q1") is None


def test_what_moves_took_and_a_cut_short_run_evicted_counts() -> None:
    b = budget(max_evictions_per_run=3)
    b.carry([EvictedPod("default", "gone", "n9", "q1", 1000)])
    first = [rec("a"), rec("b")]
    assert b.refusal(first, "q1") is None and not b.exhausted()
    saved = b.snapshot()
    b.take(first, "q1")
    assert b.exhausted() and b.refusal([rec("c")], "q1") == "max_evictions_per_run (3)"
    b.restore(saved)  # a search that tried the move and gave it up
    assert not b.exhausted() and b.refusal([rec("c")], "q1") is None


def test_disruption_budgets_count_what_earlier_moves_used() -> None:
    b = budget(pdbs(3))
    b.take([rec("a"), rec("b")], "q1")
    two = [rec("c"), rec("d")]
    assert b.refusal(two, "q1") == (
        "disruption budget default/train allows 1 more disruption(s); the move needs 2"
    )
    assert b.refusal(two[:1], "q1") is None


@pytest.mark.parametrize("phase", ["Succeeded", "Failed", "Pending"])
def test_terminal_and_pending_pods_are_not_counted_against_disruption_budgets(phase: str) -> None:
    """As ``canIgnorePDB`` in the Eviction API: the planner and the evictor alike."""
    done = [rec(f"p{i}", phase=phase) for i in range(3)]
    assert budget(pdbs(0)).refusal(done, "q1") is None
    assert check_disruption([EvictionTarget.from_record(p) for p in done], pdbs(0)).allowed
    running = [rec("r")]
    assert budget(pdbs(0)).refusal(running, "q1") is not None
    assert not check_disruption([EvictionTarget.from_record(p) for p in running], pdbs(0)).allowed


def test_the_evictor_holds_the_same_limits_under_the_same_names() -> None:
    cfg = parse_config(
        {"limits": {"max_evictions_per_node": 1, "max_gpus_disrupted_per_run": 0.5}}
    ).limits
    limits = Limits(limits_of(cfg))
    two = [EvictionTarget("default", f"p{i}", node="n0", gpu_milli=0) for i in range(2)]
    name, message = limits.blocking(two) or ("", "")
    assert name == "max_evictions_per_node"
    assert (
        message == "max_evictions_per_node limit 1 for n0 would be exceeded: 0 used, 2 more needed"
    )
    gpu = [EvictionTarget("default", "g", node="n1", gpu_milli=1000)]
    hit = limits.hit(gpu)
    assert hit is not None and hit.short == "max_gpus_disrupted_per_run (0.5)"


def test_limits_set_to_null_cap_nothing() -> None:
    keys = (
        "max_evictions_per_run",
        "max_evictions_per_node",
        "max_evictions_per_namespace",
        "max_evictions_per_queue",
        "max_gpus_disrupted_per_run",
    )
    cfg = parse_config({"limits": dict.fromkeys(keys)}).limits
    assert limits_of(cfg) == []
    assert [b.name for b in limits_of(parse_config({}).limits)] == [
        "max_evictions_per_run",
        "max_gpus_disrupted_per_run",
        "max_evictions_per_queue",
        "max_evictions_per_node",
        "max_evictions_per_namespace",
    ]
    b = PlanBudget(cfg)
    assert b.refusal([rec(f"p{i}") for i in range(500)], "q1") is None and not b.exhausted()
