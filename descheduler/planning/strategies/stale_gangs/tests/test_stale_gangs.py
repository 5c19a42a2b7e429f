"""release_stale_gangs on its own: a partial gang past its timeout is released with a
reason; one within it, one whose missing members fit now, or one the planner saw
starting is left alone."""

from __future__ import annotations

from typing import Any

from descheduler.planning.strategies.run_order import STRATEGIES
from descheduler.planning.strategies.stale_gangs.stale_gangs import release_stale_gangs
from tests.builders.descheduler_cluster import gang, gpu_node, pod
from tests.builders.plan_context import context, pods_of


def cluster(timeout: str = "30m", hog1: int = 4) -> list[Any]:
    items = [gpu_node("n0", 4), gpu_node("n1", 4)]
    items += gang(
        "mpi",
        ["n0", "n0"],
        1,
        min_member=4,
        pending=2,
        pg_annotations={"corral.dev/gang-timeout": timeout},
    )
    return [*items, pod("hog0", "n0", 2, owner_kind=""), pod("hog1", "n1", hog1, owner_kind="")]


def test_it_runs_first() -> None:
    assert STRATEGIES[0] is release_stale_gangs


def test_a_stale_partial_gang_is_released_with_a_reason() -> None:
    ctx = context(cluster())
    (move,) = release_stale_gangs(ctx)
    assert move.kind == "release-stale" and pods_of([move]) == ["mpi-0", "mpi-1"]
    assert all(pm.target is None for pm in move.pods)
    assert "gang timeout of 30m" in move.reason and "2 of its 4" in move.reason
    # its pods left the snapshot, and the plan's limits count them
    assert not any(p.name.startswith("mpi-") and p.bound for p in ctx.snap.pods)
    ctx.scratch.moves = [move]
    assert ctx.released() == {"default/mpi"}
    assert [d.key for d in ctx.blocked()] == ["default/mpi"]


def test_within_its_timeout_or_able_to_finish_it_stays() -> None:
    assert release_stale_gangs(context(cluster("5h"))) == []
    assert release_stale_gangs(context(cluster("30m", hog1=2))) == []


def test_a_gang_the_planner_saw_starting_stays() -> None:
    ctx = context(cluster())
    ctx.scratch.started = {"default/mpi"}
    assert release_stale_gangs(ctx) == []
