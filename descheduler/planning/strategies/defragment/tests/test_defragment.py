"""defragment on its own: when nobody waits and it is enabled it moves lonely pods into
the holes of a busier node, and it moves nothing while a gang waits, when its gain is
too small, when it is off (the default) or when a unit has too much work at risk."""

from __future__ import annotations

from typing import Any

import pytest

from descheduler import parse_config
from descheduler.planning.strategies.defragment.defragment import defragment
from descheduler.planning.strategies.run_order import STRATEGIES
from tests.builders.descheduler_cluster import gang, gpu_node, pod
from tests.builders.plan_context import context, pods_of

ON = {"enabled": True}


def defrag_cluster() -> list[Any]:
    # Two lonely 1-GPU pods keep two 8-GPU nodes from taking 8-GPU jobs; n2 has room.
    items = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("lonely-0", "n0", 1), pod("lonely-1", "n1", 1)]
    items += [pod(f"job8-{i}", "n2", 1, owner_kind="") for i in range(6)]
    items += [pod("w8", "n3", 8, owner_kind=""), gpu_node("n3")]
    return items


def test_it_runs_last() -> None:
    assert STRATEGIES[-1] is defragment


def test_it_packs_the_lonely_pods_when_nobody_waits() -> None:
    ctx = context(defrag_cluster(), parse_config({"defragment": ON}))
    moves = defragment(ctx)
    assert {m.kind for m in moves} == {"defragment"}
    assert pods_of(moves) == ["lonely-0", "lonely-1"]
    assert all(pm.target == "n2" for m in moves for pm in m.pods)
    assert sum(m.gain_gpus for m in moves) > 1


def test_it_moves_nothing_while_a_gang_waits() -> None:
    items = [*defrag_cluster(), *gang("huge", [], 8, pending=2)]
    ctx = context(items, parse_config({"defragment": ON}))
    assert ctx.scratch.waiting_before == ["default/huge"]
    assert defragment(ctx) == []


@pytest.mark.parametrize(
    ("section", "note"),
    [
        ({**ON, "min_total_gain_gpus": 100}, "min_total_gain_gpus"),
        ({"enabled": False}, None),
        ({}, None),  # off by default: it throws work away and starts nothing
    ],
)
def test_too_small_a_gain_or_disabled_moves_nothing(
    section: dict[str, Any], note: str | None
) -> None:
    ctx = context(defrag_cluster(), parse_config({"defragment": section}))
    assert defragment(ctx) == []
    if note is not None:
        assert any(note in n for n in ctx.scratch.notes)


def test_a_unit_with_more_work_at_risk_than_its_cap_stays() -> None:
    """lonely-1 ran 3 hours without a checkpoint: 3 GPU-hours at risk, above the 1 of
    defragment.max_gpu_hours_at_risk; lonely-0 (20 minutes) still moves. Lifting the cap
    moves both."""
    items = defrag_cluster()
    items[4] = pod("lonely-1", "n1", 1, started="2026-12-02T09:00:00Z")
    cfg = {**ON, "min_total_gain_gpus": 0.5}
    moves = defragment(context(items, parse_config({"defragment": cfg})))
    assert pods_of(moves) == ["lonely-0"]
    assert moves[0].at_risk == pytest.approx(1 / 3)
    lifted = {**cfg, "max_gpu_hours_at_risk": None}
    assert pods_of(defragment(context(items, parse_config({"defragment": lifted})))) == [
        "lonely-0",
        "lonely-1",
    ]
