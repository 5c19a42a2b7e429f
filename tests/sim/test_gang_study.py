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
