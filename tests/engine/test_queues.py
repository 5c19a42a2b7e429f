"""Deserved shares by weight with caps, DRF, and the order waiting gangs are served."""

import pytest
from gangplace.engine import Queue, WaitingGang, deserved_shares, dominant_share, order_waiting

TOTAL = {"cpu": 100, "nvidia.com/gpu": 40}


def test_weights_split_the_cluster() -> None:
    qs = [Queue("a", weight=3), Queue("b", weight=1)]
    want = {"cpu": 1000, "nvidia.com/gpu": 1000}
    waiting = [WaitingGang("ga", "a", want), WaitingGang("gb", "b", want)]
    st = deserved_shares(qs, TOTAL, {}, waiting)
    assert st["a"].deserved == pytest.approx({"cpu": 75, "nvidia.com/gpu": 30})
    assert st["b"].deserved == pytest.approx({"cpu": 25, "nvidia.com/gpu": 10})


def test_capped_queue_leaves_the_rest_to_others() -> None:
    qs = [Queue("a", weight=1, capability={"nvidia.com/gpu": 5}), Queue("b", weight=1)]
    want = {"cpu": 10, "nvidia.com/gpu": 40}
    waiting = [WaitingGang("ga", "a", want), WaitingGang("gb", "b", want)]
    st = deserved_shares(qs, TOTAL, {}, waiting)
    assert st["a"].deserved["nvidia.com/gpu"] == pytest.approx(5)
    assert st["b"].deserved["nvidia.com/gpu"] == pytest.approx(35)
    # neither asks for more than 10 cpu, so neither deserves more
    assert st["a"].deserved["cpu"] == pytest.approx(10)
    assert st["b"].deserved["cpu"] == pytest.approx(10)


def test_share_and_overuse() -> None:
    qs = [Queue("a"), Queue("b")]
    alloc = {"a": {"cpu": 80, "nvidia.com/gpu": 30}, "b": {"cpu": 10}}
    waiting = [WaitingGang("gb", "b", {"cpu": 50, "nvidia.com/gpu": 20})]
    st = deserved_shares(qs, TOTAL, alloc, waiting)
    assert st["a"].overused and not st["b"].overused
    assert st["a"].share > 1.0 > st["b"].share


def test_dominant_share() -> None:
    assert dominant_share({"cpu": 10, "nvidia.com/gpu": 8}, TOTAL) == pytest.approx(0.2)
    assert dominant_share({}, TOTAL) == 0.0


def test_order_serves_lowest_share_then_priority_then_smaller() -> None:
    qs = [Queue("rich"), Queue("poor")]
    alloc = {"rich": {"cpu": 60}, "poor": {"cpu": 5}}
    waiting = [
        WaitingGang("rich-1", "rich", {"cpu": 10}),
        WaitingGang("poor-big", "poor", {"cpu": 30}),
        WaitingGang("poor-small", "poor", {"cpu": 5}),
        WaitingGang("poor-urgent", "poor", {"cpu": 30}, priority=10),
    ]
    st = deserved_shares(qs, {"cpu": 100}, alloc, waiting)
    order = [g.name for g in order_waiting(waiting, st, {"cpu": 100})]
    assert order == ["poor-urgent", "poor-small", "poor-big", "rich-1"]


def test_queues_are_served_by_weighted_dominant_share() -> None:
    # a holds 30% of the GPUs (its dominant resource), b with weight 2 holds 26% of the
    # CPU: 0.13 per unit of weight. DRF serves b first, though a is further below what
    # it deserves (0.6 of it against b's 0.83).
    qs = [Queue("a", weight=1), Queue("b", weight=2)]
    alloc = {"a": {"cpu": 15, "nvidia.com/gpu": 12}, "b": {"cpu": 26, "nvidia.com/gpu": 5}}
    waiting = [
        WaitingGang("ga", "a", {"cpu": 24, "nvidia.com/gpu": 8}),
        WaitingGang("gb", "b", {"cpu": 24, "nvidia.com/gpu": 1}),
    ]
    st = deserved_shares(qs, TOTAL, alloc, waiting)
    assert st["a"].dominant_share(TOTAL) == pytest.approx(0.3)
    assert st["b"].dominant_share(TOTAL) == pytest.approx(0.13)
    assert st["a"].share == pytest.approx(0.6) and st["b"].share == pytest.approx(0.8333, rel=1e-3)
    assert [g.name for g in order_waiting(waiting, st, TOTAL)] == ["gb", "ga"]


def test_bad_weight() -> None:
    with pytest.raises(ValueError, match="weight"):
        Queue("q", weight=0)
