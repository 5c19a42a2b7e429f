"""The deadlock study: pod-by-pod placement strands GPUs in partial jobs; gangs never do."""

from __future__ import annotations

import pytest
from gangplace.engine import Snapshot
from gangplace.sim.gang_study import JobTemplate, jobs_from_pods, run_load, run_study

from tests.builders.records import gpu_node, shape


def small_cluster() -> Snapshot:
    return Snapshot([gpu_node(f"n{i}", 64000, 4) for i in range(6)])


TEMPLATES = [
    JobTemplate(shape(8000, 1), 3),
    JobTemplate(shape(8000, 1), 5),
    JobTemplate(shape(8000, 1), 8),
]


def test_jobs_from_multi_gpu_pods() -> None:
    jobs = jobs_from_pods([shape(16000, 4), shape(1000, 1), shape(1000, 1, 500)])
    assert len(jobs) == 1
    assert (jobs[0].size, jobs[0].shape.gpu_count) == (4, 4)
    split = jobs_from_pods([shape(16000, 4)], split=True)[0]
    assert (split.size, split.shape.gpu_count, split.shape.request("cpu")) == (4, 1, 4000)
    assert jobs_from_pods([shape(16000, 4)], size=6)[0].size == 6


def test_gangs_never_hold_partial_gpus() -> None:
    r = run_load(small_cluster(), TEMPLATES, 0.95, "all-or-nothing", jobs=300, seed=4)
    assert r.stuck_partial == 0
    assert r.partial_gpu_pct == 0.0
    assert 0 < r.started <= 300


@pytest.mark.slow
def test_pod_by_pod_holds_gpus_idle_at_high_load() -> None:
    pod = run_load(small_cluster(), TEMPLATES, 0.95, "pod-by-pod", jobs=300, seed=4)
    gang = run_load(small_cluster(), TEMPLATES, 0.95, "all-or-nothing", jobs=300, seed=4)
    # Partly placed jobs hold GPUs (8% of the cluster, time-averaged) that do no work...
    assert pod.partial_gpu_pct > 5
    # ...so whole jobs wait longer and fewer start than with gangs.
    assert gang.mean_wait < pod.mean_wait
    assert gang.started > pod.started
    assert gang.busy_gpu_pct > pod.busy_gpu_pct


def test_study_runs_both_modes_per_load() -> None:
    res = run_study(small_cluster, TEMPLATES, [0.5, 0.9], jobs=100)
    assert [(r.load_pct, r.mode) for r in res] == [
        (50, "pod-by-pod"),
        (50, "all-or-nothing"),
        (90, "pod-by-pod"),
        (90, "all-or-nothing"),
    ]
    with pytest.raises(ValueError, match="mode"):
        run_load(small_cluster(), TEMPLATES, 0.5, "sometimes")
    with pytest.raises(ValueError, match="no job templates"):
        run_load(small_cluster(), [], 0.5, "pod-by-pod")


# --- arrivals, run lengths and the figures of a run ----------------------------------------


def test_weights_set_how_often_each_job_comes() -> None:
    from gangplace.sim.gang_study import run_detailed

    few, many = JobTemplate(shape(8000, 1), 2), JobTemplate(shape(1000, 1), 1)
    r = run_detailed(
        small_cluster(), [few, many], 0.5, "all-or-nothing", weights=[1, 9], jobs=400, seed=3
    )
    assert r.gangs == pytest.approx(40, abs=15)
    with pytest.raises(ValueError, match="one positive weight per template"):
        run_detailed(small_cluster(), [few, many], 0.5, "all-or-nothing", weights=[1])


def test_run_lengths_have_mean_one_and_lognormal_a_heavier_tail() -> None:
    import random
    import statistics

    from gangplace.sim.gang_study import _lengths

    draw_exp, draw_logn = _lengths("exp", random.Random(1)), _lengths("lognormal", random.Random(1))
    exp = [draw_exp() for _ in range(40000)]
    logn = [draw_logn() for _ in range(40000)]
    assert statistics.fmean(exp) == pytest.approx(1, abs=0.03)
    assert statistics.fmean(logn) == pytest.approx(1, abs=0.1)
    assert statistics.median(logn) < 0.5 < statistics.median(exp)
    assert max(logn) > 3 * max(exp)
    with pytest.raises(ValueError, match="run lengths must be one of exp, lognormal"):
        _lengths("pareto", random.Random(1))


def test_the_load_is_offered_against_the_given_capacity_after_the_warm_up() -> None:
    from gangplace.sim.gang_study import run_detailed

    t = [JobTemplate(shape(1000, 1), 1)]
    r = run_detailed(small_cluster(), t, 0.6, "all-or-nothing", length=60, warmup=5, seed=2)
    # Single 1-GPU jobs at 60%: nothing waits, the busy GPUs are what was offered.
    assert r.length == 55
    assert r.offered_pct == pytest.approx(60, abs=6)
    assert r.busy_gpu_pct == pytest.approx(r.offered_pct, abs=4)
    half = run_detailed(
        small_cluster(), t, 0.6, "all-or-nothing", length=60, warmup=5, capacity_gpus=12, seed=2
    )
    assert half.jobs == pytest.approx(r.jobs / 2, rel=0.15)
    with pytest.raises(ValueError, match="warmup must be in"):
        run_detailed(small_cluster(), t, 0.6, "all-or-nothing", length=5, warmup=5)


def test_waits_count_jobs_never_started_and_show_a_growing_queue() -> None:
    from gangplace.sim.gang_study import run_detailed

    big = JobTemplate(shape(8000, 1), 24)  # the whole cluster: waits for it to empty
    small = JobTemplate(shape(1000, 1), 1)
    r = run_detailed(
        small_cluster(), [big, small], 1.3, "all-or-nothing", weights=[1, 30], length=30, seed=5
    )
    assert r.never_started > 0
    assert r.p95_wait_gang is not None and r.p95_wait_single is not None
    assert r.p95_wait_gang > r.p95_wait_single
    # Over capacity the queue grows: the whole run's p95 is well above its first half's.
    assert r.p95_wait_half is not None and r.p95_wait > 1.5 * r.p95_wait_half
    started_only = run_detailed(small_cluster(), [small], 0.3, "all-or-nothing", length=20)
    assert started_only.never_started == 0 and started_only.p95_wait_gang is None
