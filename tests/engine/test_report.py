"""The fragmentation report: per node, per model, before/after, largest gang."""

from __future__ import annotations

import pytest
from gangplace.engine.fragmentation import TargetWorkload, TaskShape
from gangplace.engine.report import (
    compare_reports,
    fragmentation_report,
    largest_gang,
    render_comparison,
    render_nodes,
    render_report,
)

from tests.builders.records import cluster, gpu_node, set_free, shape

WL = TargetWorkload.of([(TaskShape(8000, 1000, 1), 0.5), (TaskShape(2000, 500, 1), 0.5)])


def snap_of():
    s = cluster(
        [
            gpu_node("g2-a", 96000, 8, "G2"),
            gpu_node("t4-a", 104000, 2, "T4"),
            gpu_node("cpu", 64000, 0),
        ]
    )
    set_free(s, s.node_index["g2-a"], 4000, [1000, 1000, 300, 0, 0, 0, 0, 0])  # CPU nearly gone
    set_free(s, s.node_index["t4-a"], 104000, [1000, 700])
    return s


def test_per_model_and_per_node_figures() -> None:
    rep = fragmentation_report(snap_of(), WL)
    by = {m.model: m for m in rep.models}
    # G2: idle 2.3; no shape has CPU (8000, 2000 > ... 4000 >= 2000 so the share fits:
    # frag = .5 * 2300 (whole GPU lacks CPU) + .5 * 300 (sliver < 500) = 1300 -> 1.3.
    assert by["G2"].idle == pytest.approx(2.3)
    assert by["G2"].fragmented == pytest.approx(1.3)
    assert by["G2"].stranded == 0.0  # the 500m shape can still start
    # T4: idle 1.7; whole GPU fits (700 is a sliver for it), share fits everywhere.
    assert by["T4"].fragmented == pytest.approx(0.35)
    assert rep.total.gpus == 10
    assert rep.total.allocated == pytest.approx(6.0)
    assert [n.node for n in rep.nodes] == ["g2-a", "t4-a"]
    assert rep.nodes[0].free_cpu == 4000
    assert "g2-a" in render_nodes(rep)
    assert "G2" in render_report(rep)


def test_stranded_when_no_shape_can_start() -> None:
    s = snap_of()
    set_free(s, s.node_index["g2-a"], 1000, [1000, 1000, 300, 0, 0, 0, 0, 0])
    rep = fragmentation_report(s, WL)
    assert {m.model: m.stranded for m in rep.models}["G2"] == pytest.approx(2.3)


def test_before_and_after() -> None:
    s = snap_of()
    before = fragmentation_report(s, WL, [shape(8000, 1)])
    s.place(shape(2000, 1, 300), s.node_index["g2-a"], (2,))  # fill the G2 sliver
    after = fragmentation_report(s, WL, [shape(8000, 1)])
    deltas = {d.model: d for d in compare_reports(before, after)}
    # G2 before: .5 * 2300 (whole GPU lacks CPU) + .5 * 300 (sliver) = 1.3; after, with
    # 2000 CPU and [1000, 1000, 0]: .5 * 2000 + 0 = 1.0.
    assert deltas["G2"].freed_fragment == pytest.approx(0.3)
    assert deltas["all"].after.idle == pytest.approx(before.total.idle - 0.3)
    text = render_comparison(before, after)
    assert "before" in text and "G2" in text


def test_largest_gang_uses_the_engine() -> None:
    s = snap_of()
    # G2: 2 full devices but only 4 CPU -> 0 pods of 8 CPU; T4: 1 full device -> 1.
    assert largest_gang(s, shape(8000, 1)) == 1
    # G2: 4 halves of GPU but CPU for 2; T4: [1000, 700] -> 2 + 1.
    assert largest_gang(s, shape(2000, 1, 500)) == 2 + 3
    state = s.state()
    largest_gang(s, shape(1000, 1))
    assert s.state() == state  # dry run
