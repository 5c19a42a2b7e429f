"""The planner's context: its inputs are fixed when it is built, and a run writes only
its scratch (``ctx.scratch``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from descheduler import DeschedulerConfig, parse_config
from descheduler.planning.strategies.run_order import STRATEGIES
from tests.builders.descheduler_cluster import gang, gpu_node, pod
from tests.builders.plan_context import context


def middle_node_cluster() -> list[Any]:
    """Three 8-GPU nodes at 7/6/7 GPUs used; a 4-GPU job waits."""
    items = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 4), pod("s0a", "n0", 1), pod("s0b", "n0", 1), pod("s0c", "n0", 1)]
    items += [pod("big-1", "n1", 4), pod("s1a", "n1", 1), pod("s1b", "n1", 1)]
    items += [pod("big-2", "n2", 4), pod("s2a", "n2", 1), pod("s2b", "n2", 1), pod("s2c", "n2", 1)]
    items += gang("llm", [], 4, pending=1)
    return items


def test_the_inputs_cannot_be_rebound() -> None:
    ctx = context(middle_node_cluster())
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.config = DeschedulerConfig()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.demands = ()  # type: ignore[misc]


def test_a_run_writes_its_scratch_and_leaves_the_inputs_as_built() -> None:
    ctx = context(middle_node_cluster())
    inputs = {
        "protected": dict(ctx.protected),
        "suspended": dict(ctx.suspended),
        "demands": [d.key for d in ctx.demands],
        "overused": set(ctx.overused),
        "views": list(ctx.views),
    }
    for strategy in STRATEGIES:
        ctx.scratch.moves += strategy(ctx)
    assert sorted(m.unit for m in ctx.scratch.moves) == ["default/pod:s1a", "default/pod:s1b"]
    assert ctx.scratch.moved == {"default/pod:s1a", "default/pod:s1b"}
    assert ctx.blocked() == list(ctx.demands)  # served or not, the planner's check says
    assert inputs == {
        "protected": dict(ctx.protected),
        "suspended": dict(ctx.suspended),
        "demands": [d.key for d in ctx.demands],
        "overused": set(ctx.overused),
        "views": list(ctx.views),
    }


def test_lifted_plans_without_the_limits_and_puts_the_budget_back() -> None:
    ctx = context(middle_node_cluster(), parse_config({"limits": {"max_evictions_per_run": 1}}))
    v = ctx.victim(ctx.views["default/pod:s1a"])
    run = ctx.scratch
    budget = run.budget
    run.budget.take(v.pods, v.view.queue)
    assert ctx.victim_refusal(ctx.victim(ctx.views["default/pod:s1b"])) is not None
    assert run.limited
    run.limited = False
    with ctx.lifted():
        assert run.unlimited and run.budget is not budget
        assert ctx.victim_refusal(ctx.victim(ctx.views["default/pod:s1b"])) is None
        run.limited = True
    assert run.budget is budget and not run.unlimited and not run.limited
