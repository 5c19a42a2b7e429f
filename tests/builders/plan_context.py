"""A planning context as ``plan()`` hands it to its strategies: the waiting gangs that
start now placed on the snapshot, those that cannot named, no moves yet. A strategy
test calls one strategy on it, as the planner would."""

from __future__ import annotations

from typing import Any

from gangplace.engine import place_gang

from descheduler import DeschedulerConfig, state_from_list
from descheduler.planning.context import PlanContext
from descheduler.planning.plan_model import Move
from descheduler.planning.what_if import evaluate_waiting
from tests.builders.descheduler_cluster import NOW, as_list


def context(items: list[Any], config: DeschedulerConfig | None = None) -> PlanContext:
    ctx = PlanContext.build(state_from_list(as_list(items), NOW), config or DeschedulerConfig())
    started, ctx.scratch.waiting_before = evaluate_waiting(ctx, ctx.demands)
    ctx.scratch.started = set(started)
    for d in ctx.demands:
        if d.key in ctx.scratch.started:
            place_gang(ctx.snap, d.gang, ctx.scorer, ctx.options)
    return ctx


def pods_of(moves: list[Move]) -> list[str]:
    return sorted(pm.name for m in moves for pm in m.pods)
