"""The study's job mixes and nodes: the bundled presets read as their sources say, a
bad mix file is refused naming the key and the value, jobs that fit no node are set
apart, gangs are cut to a share of the cluster, and the ceiling tells a mix that can
fill the cluster from one that cannot."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from gangplace.sim.gang_study import JobTemplate
from gangplace.sim.job_mix import (
    PRESETS,
    JobMix,
    MixError,
    MixJob,
    cap_gangs,
    fill_ceiling,
    fitting,
    load_mix,
    trace_nodes,
    usable_gpus,
)

from tests.builders.records import gpu_node, shape


def test_the_trace_mix_is_the_trace_s_shares_and_a_tail_of_gangs() -> None:
    mix = load_mix("trace")
    by_count, by_gpu = mix.gang_share()
    # 98.9% of the default list's GPU pods ask at most one GPU; gangs hold a fifth of
    # the GPU demand and are about one job in 200.
    singles = [j for j in mix.jobs if not j.is_gang]
    one = sum(j.weight for j in singles if j.template.shape.gpu_count == 1)
    assert one / sum(j.weight for j in singles) == pytest.approx(0.9894, abs=1e-3)
    assert by_gpu == pytest.approx(0.20, abs=1e-3)
    assert 0.003 < by_count < 0.01
    assert {j.template.size for j in mix.jobs if j.is_gang} == {2, 4, 8}
    assert "openb_pod_list_default.csv" in mix.source and "ATC '23" in mix.source


def test_presets_cite_their_source() -> None:
    for name in PRESETS:
        mix = load_mix(name)
        assert mix.name == name and mix.jobs and len(mix.source) > 40
    squared = load_mix("squared")
    assert all(j.template.size == j.template.shape.gpu_count for j in squared.jobs)
    tail = load_mix("gang-tail")
    assert tail.gang_share()[0] == pytest.approx(0.06)


def test_trace_nodes_keep_the_node_list_s_proportions() -> None:
    nodes = trace_nodes(120)
    assert len(nodes) == 120
    gpus = Counter(n.gpu_count for n in nodes)
    # The list: 617 8-GPU, 518 2-GPU, 54 4-GPU, 24 1-GPU nodes of 1213.
    assert gpus[8] == pytest.approx(617 * 120 / 1213, abs=1)
    assert gpus[2] == pytest.approx(518 * 120 / 1213, abs=1)
    assert len({n.name for n in nodes}) == 120
    assert len(trace_nodes(7)) == 7


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ({"workers": 0, "gpus": 1, "cpu": "1", "memory": "1Gi", "weight": 1}, "jobs[0].workers: 0"),
        ({"workers": 1, "gpus": 1, "cpu": "1", "memory": "1Gi", "weight": -2}, "weight: -2"),
        ({"workers": 1, "gpus": 1, "cpu": "x", "memory": "1Gi", "weight": 1}, "jobs[0].cpu: 'x'"),
        ({"workers": 1, "gpus": 1, "cpu": "1", "memory": "1Gi", "share": 1}, "unknown key 'share'"),
    ],
)
def test_a_bad_mix_file_is_refused_naming_key_and_value(
    tmp_path: Path, job: dict[str, object], message: str
) -> None:
    f = tmp_path / "mix.json"
    f.write_text(json.dumps({"name": "m", "jobs": [job]}))
    with pytest.raises(MixError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_mix(str(f))


def test_a_missing_or_broken_mix_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(MixError, match=r"--mix /no/such\.json: .*preset: trace"):
        load_mix("/no/such.json")
    f = tmp_path / "broken.json"
    f.write_text("{")
    with pytest.raises(MixError, match="not JSON"):
        load_mix(str(f))
    f.write_text(json.dumps({"jobs": []}))
    with pytest.raises(MixError, match="non-empty list"):
        load_mix(str(f))


def _mix(*jobs: tuple[int, int, int, float]) -> JobMix:
    """(workers, GPUs, CPU milli, weight) each."""
    return JobMix("m", "", tuple(MixJob(JobTemplate(shape(c, g), w), wt) for w, g, c, wt in jobs))


def test_jobs_that_fit_no_node_are_set_apart_and_gangs_cut() -> None:
    nodes = [gpu_node(f"n{i}", 64000, 8) for i in range(4)] + [gpu_node("s", 8000, 2)]
    mix = _mix((1, 1, 4000, 9), (2, 8, 120000, 1), (3, 8, 32000, 1), (1, 2, 32000, 1))
    kept, left = fitting(mix, nodes)
    assert [j.describe() for j in left] == ["2 x (cpu=120 memory=1Gi gpu=8)"]
    assert len(kept.jobs) == 3
    cut, which = cap_gangs(kept, 10)
    assert [(j.template.size, n) for j, n in which] == [(3, 1)]
    assert [j.template.size for j in cut.jobs] == [1, 1, 1]
    # The small node can hold a 1-GPU job of the mix; without it, its GPUs are unusable.
    assert usable_gpus(kept, nodes) == 34
    assert usable_gpus(_mix((1, 8, 32000, 1)), nodes) == 32


def test_the_ceiling_tells_a_mix_that_cannot_fill_the_cluster() -> None:
    nodes = [gpu_node(f"n{i}", 64000, 8) for i in range(6)]
    small = _mix((1, 1, 1000, 1))
    big = _mix((1, 1, 1000, 1), (5, 8, 1000, 3))  # two big gangs never fit at once
    assert fill_ceiling(small, nodes) == 100.0
    assert fill_ceiling(big, nodes) < 100.0
