"""FGD's fragmentation measure, on clusters small enough to work out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from gangplace.engine.fragmentation import (
    TargetWorkload,
    TaskShape,
    fragmentation,
    fragmentation_rate,
    node_fragmentation,
    node_satisfiable,
    stranded_gpus,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders.records import cluster, gpu_node, set_free, shape

# The toy workload of SIMULATOR.md section 5.
TOY = TargetWorkload.of(
    [(TaskShape(8000, 0, 0), 0.2), (TaskShape(4000, 500, 1), 0.5), (TaskShape(12000, 1000, 1), 0.3)]
)


def two_nodes():
    snap = cluster([gpu_node("a", 64000, 2), gpu_node("b", 64000, 2)])
    set_free(snap, 1, 64000, [600, 1000])
    return snap


def test_worked_example_of_the_paper() -> None:
    snap = two_nodes()
    # A: idle [1000, 1000]: only the CPU-only shape sees fragment: .2 * 2000.
    # B: [600, 1000]: CPU-only .2 * 1600, the 500m share fits (600 >= 500, nothing < 500),
    #    the whole GPU fits on GPU1 but GPU0's 600 is a sliver: .3 * 600.
    assert node_fragmentation(snap, TOY).tolist() == pytest.approx([400.0, 500.0])
    assert fragmentation(snap, TOY) == pytest.approx(0.9)
    assert fragmentation_rate(snap, TOY) == pytest.approx(100 * 900 / 3600)


def test_what_if_arrays_replace_the_node_state() -> None:
    snap = two_nodes()
    nodes = np.array([0, 1])
    after = node_fragmentation(
        snap,
        TOY,
        nodes,
        free_cpu=np.array([60000, 60000]),
        gpu_free=np.array([[700, 1000], [300, 1000]]),
    )
    # A after: .2 * 1700 + .3 * 700 = 550; B after: .2 * 1300 + .5 * 300 + .3 * 300 = 500.
    assert after.tolist() == pytest.approx([550.0, 500.0])
    # The snapshot itself is untouched.
    assert node_fragmentation(snap, TOY).tolist() == pytest.approx([400.0, 500.0])


def test_lack_of_cpu_makes_all_idle_gpu_fragment() -> None:
    snap = cluster([gpu_node("a", 64000, 2)])
    set_free(snap, 0, 3000, [1000, 1000])
    # Every GPU shape lacks CPU (4000, 12000 > 3000), the CPU-only shape lacks it too:
    # (.2 + .5 + .3) * 2000.
    assert node_fragmentation(snap, TOY).tolist() == pytest.approx([2000.0])
    assert stranded_gpus(snap, TOY).tolist() == [2000.0]
    assert not node_satisfiable(snap, TOY)[0]


def test_model_constraint_makes_the_node_no_access() -> None:
    wl = TargetWorkload.of([(TaskShape(1000, 1000, 1, ("V100",)), 1.0)])
    snap = cluster([gpu_node("t4", 64000, 2, "T4"), gpu_node("v100", 64000, 2, "V100")])
    assert node_fragmentation(snap, wl).tolist() == [2000.0, 0.0]


def test_multi_gpu_shape_needs_k_devices() -> None:
    wl = TargetWorkload.of([(TaskShape(1000, 1000, 2), 1.0)])
    snap = cluster([gpu_node("a", 64000, 4)])
    set_free(snap, 0, 64000, [1000, 400, 0, 0])
    # One full device only: the 2-GPU shape cannot start, all 1400 idle is fragment.
    assert node_fragmentation(snap, wl).tolist() == [1400.0]
    set_free(snap, 0, 64000, [1000, 1000, 400, 0])
    # It fits now; only the 400 sliver is fragment.
    assert node_fragmentation(snap, wl).tolist() == [400.0]


def test_target_workload_from_pods() -> None:
    small, big, cpu_only = shape(2000, 1, 500), shape(8000, 1), shape(4000)
    pods = [small] * 6 + [big] * 3 + [cpu_only] * 1
    wl = TargetWorkload.from_shapes(pods, coverage=0.9)
    # 6 + 3 = 9 of 10 pods reach 90%: the CPU-only shape is dropped, p renormalised.
    assert [s.cpu for s in wl.shapes] == [2000, 8000]
    assert wl.weights == pytest.approx((6 / 9, 3 / 9))


def test_target_workload_ties_go_to_the_larger_shape() -> None:
    pods = [shape(1000, 1, 300)] * 2 + [shape(1000, 1, 700)] * 2 + [shape(5000)] * 2
    wl = TargetWorkload.from_shapes(pods, coverage=0.5)
    # All counts tie; larger cpu first, then larger GPU share.
    assert [(s.cpu, s.gpu_milli) for s in wl.shapes] == [(5000, 0), (1000, 700)]
    assert wl.weights == pytest.approx((0.5, 0.5))


def test_full_coverage_keeps_plain_frequencies() -> None:
    wl = TargetWorkload.from_shapes([shape(1000)] * 3 + [shape(2000, 1)], coverage=1.0)
    assert wl.weights == pytest.approx((0.75, 0.25))


# --- properties --------------------------------------------------------------------

device = st.integers(min_value=0, max_value=1000)
node_state = st.tuples(
    st.integers(min_value=0, max_value=96000),
    st.lists(device, min_size=1, max_size=8),
    st.sampled_from(["T4", "G2"]),
)
task = st.tuples(
    st.integers(min_value=0, max_value=32000),
    st.sampled_from([0, 100, 250, 500, 810, 1000]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([(), ("T4",), ("G2",)]),
)


def workload_of(tasks, weights):
    shapes = [
        TaskShape(c, d, k if d == 1000 else (1 if d else 0), m if d else ()) for c, d, k, m in tasks
    ]
    return TargetWorkload.of(list(zip(shapes, weights, strict=True)))


@settings(max_examples=60, deadline=None)
@given(
    states=st.lists(node_state, min_size=1, max_size=5),
    tasks=st.lists(task, min_size=1, max_size=6),
    data=st.data(),
)
def test_fragment_is_never_negative_nor_above_idle(states, tasks, data) -> None:
    weights = data.draw(st.lists(st.floats(0.01, 1.0), min_size=len(tasks), max_size=len(tasks)))
    wl = workload_of(tasks, weights)
    nodes = [gpu_node(f"n{i}", 96000, len(g), m) for i, (_, g, m) in enumerate(states)]
    snap = cluster(nodes)
    for i, (cpu, g, _) in enumerate(states):
        set_free(snap, i, cpu, g)
    frag = node_fragmentation(snap, wl)
    idle = np.maximum(snap.gpu_free, 0).sum(axis=1)
    assert (frag >= 0).all()
    assert (frag <= idle + 1e-6).all()


@settings(max_examples=60, deadline=None)
@given(
    states=st.lists(node_state, min_size=2, max_size=5),
    tasks=st.lists(task, min_size=1, max_size=6),
    pick=st.data(),
)
def test_placing_a_pod_changes_only_its_node(states, tasks, pick) -> None:
    wl = workload_of(tasks, [1.0] * len(tasks))
    nodes = [gpu_node(f"n{i}", 96000, len(g), m) for i, (_, g, m) in enumerate(states)]
    snap = cluster(nodes)
    for i, (cpu, g, _) in enumerate(states):
        set_free(snap, i, cpu, g)
    before = node_fragmentation(snap, wl)
    target = pick.draw(st.integers(0, len(states) - 1))
    free = snap.gpu_free[target]
    ok = np.flatnonzero(free >= 100)
    if ok.size:
        snap.place(shape(0, 1, 100), target, (int(ok[0]),))
    else:
        snap.place(shape(0), target, ())
    after = node_fragmentation(snap, wl)
    others = np.arange(len(states)) != target
    assert np.array_equal(before[others], after[others])
