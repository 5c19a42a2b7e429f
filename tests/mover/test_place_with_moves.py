"""The mover (gangplace.mover.place_with_moves): several pods placed all or none, the
caller's rules kept on every move, and the same room however busy the machine is."""

from __future__ import annotations

import itertools
import time
from collections.abc import Hashable, Sequence
from typing import Any

import pytest
from gangplace.engine import PodShape, Snapshot
from gangplace.engine.node_pod_records import PodRecord
from gangplace.mover.place_with_moves import MoverLimits, MoveRules, place_with_moves
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.mover.test_hood_moves import clusters, node, shape, valid

pytestmark = pytest.mark.slow


def full_cluster() -> tuple[Snapshot, list[PodRecord]]:
    """Four 2-GPU nodes, every GPU holding a 600-milli share: a whole GPU fits nowhere,
    and two shares moved onto the GPUs of others make one."""
    snap = Snapshot([node(f"n{i}", 32000, 2) for i in range(4)])
    big = shape((1000, 1, 600))
    small = shape((1000, 1, 300))
    for n in range(4):
        snap.place(big, n, (0,), pod=PodRecord("t", f"b{n}", big))
        snap.place(small, n, (1,), pod=PodRecord("t", f"s{n}", small))
    whole = shape((1000, 1, 1000))
    return snap, [PodRecord("t", "w0", whole), PodRecord("t", "w1", whole)]


def where(snap: Snapshot) -> dict[str, tuple[int, tuple[int, ...]]]:
    return {p.name: (p.node, p.gpus) for p in snap.pods}


def test_a_gang_of_two_is_placed_whole_or_not_at_all() -> None:
    snap, gang = full_cluster()
    room = place_with_moves(snap, gang)
    assert room is not None and all(p.node >= 0 for p in gang)
    assert len(room.moved) == 2
    valid(snap)
    snap2, gang2 = full_cluster()
    before = snap2.state()
    # one pod moved in all cannot make room for both
    assert place_with_moves(snap2, gang2, max_total=1) is None
    assert snap2.state() == before and all(p.node < 0 for p in gang2)


def test_the_callers_rules_are_kept() -> None:
    snap, gang = full_cluster()
    asked: list[list[str]] = []

    def allows(pods: Sequence[PodRecord]) -> str | None:
        asked.append(sorted(p.name for p in pods))
        return None

    pinned = {"s0", "s1", "b2"}
    rules = MoveRules(movable=lambda p: p.name not in pinned, allows=allows)
    room = place_with_moves(snap, gang, rules)
    assert room is not None
    names = {p.name for p in room.moved}
    assert names and not names & pinned
    assert asked == [sorted(names)]  # asked once, of every pod moved
    # refused: nothing changes
    snap2, gang2 = full_cluster()
    before = snap2.state()
    assert place_with_moves(snap2, gang2, MoveRules(allows=lambda pods: "no")) is None
    assert snap2.state() == before


def test_same_room_on_a_busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit is in branch-and-bound nodes: a clock running a thousand times faster
    changes nothing."""
    snap, gang = full_cluster()
    place_with_moves(snap, gang)
    quiet = where(snap)
    real = time.perf_counter
    ticks = itertools.count()
    monkeypatch.setattr(time, "perf_counter", lambda: real() + 1000.0 * next(ticks))
    snap2, gang2 = full_cluster()
    place_with_moves(snap2, gang2)
    assert where(snap2) == quiet


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="node_limit 0"):
        MoverLimits(node_limit=0)
    with pytest.raises(ValueError, match="max_pods -1"):
        MoverLimits(max_pods=-1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters(max_pods=6), pinned=st.sets(st.integers(0, 5)), cap=st.integers(0, 4))
def test_every_move_obeys_the_rules(
    case: tuple[Snapshot, PodShape], pinned: set[int], cap: int
) -> None:
    snap, arrival = case

    def unit(p: PodRecord) -> Hashable:
        return int(p.name[1:]) // 2

    def movable(p: PodRecord) -> bool:
        return int(p.name[1:]) not in pinned

    before = where(snap)
    state = snap.state()
    seen: list[Any] = []
    rules = MoveRules(unit_of=unit, movable=movable, allows=lambda ps: seen.append(ps))
    pods = [PodRecord("t", "a0", arrival), PodRecord("t", "a1", arrival)]
    room = place_with_moves(snap, pods, rules, MoverLimits(max_pods=3), max_total=cap)
    if room is None:
        assert snap.state() == state
        return
    valid(snap)
    assert all(p.node >= 0 for p in pods)
    moved = {p.name for p in room.moved}
    assert len(moved) <= cap
    assert not any(int(n[1:]) in pinned for n in moved), "a pinned pod moved"
    touched = {unit(p) for p in room.moved}
    for p in snap.pods:
        if p.name in before and unit(p) not in touched:
            assert (p.node, p.gpus) == before[p.name], "a pod of an untouched unit moved"
    if moved:
        assert seen and {p.name for p in seen[-1]} == moved
