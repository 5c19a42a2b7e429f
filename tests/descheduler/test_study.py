"""The gang study with a descheduler: the moves a hook makes are lived as the cluster
would live them (nothing overcommitted, no partial gang in all-or-nothing modes, the
work of a moved job lost and counted, rooms followed to their gang), HighNodeUtilization
evicts as the kubernetes-sigs descheduler does, corral's hook runs the real planner, and
``corral-descheduler study`` prints, writes and refuses as a user expects."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from gangplace.engine import PodRecord, Snapshot
from gangplace.engine.scoring import BinpackScorer
from gangplace.sim.gang_study import (
    DetailedResult,
    JobMove,
    JobTemplate,
    StudyJob,
    StudyState,
    run_detailed,
)
from gangplace.sim.high_node_utilization import HighNodeUtilization

from descheduler.cli import main
from descheduler.config import DeschedulerConfig, parse_config
from descheduler.study import CorralHook, reason_kind
from tests.builders.records import gpu_node, shape

TEMPLATES = [JobTemplate(shape(8000, 1), 2), JobTemplate(shape(8000, 1), 3)]


def small_cluster() -> Snapshot:
    return Snapshot([gpu_node(f"n{i}", 64000, 4) for i in range(4)])


def check_cluster(snap: Snapshot) -> None:
    """Nothing overcommitted: requests within allocatable, no device over-used."""
    assert (snap.used <= snap.alloc).all()
    gpus = snap.gpu_free[snap.gpu_free >= -1]
    assert (gpus >= 0).sum() == int(snap.gpu_total.sum())
    assert (snap.gpu_free[snap.gpu_free != -1] >= 0).all()


class SuspendAll:
    """Suspends every running job for the first waiting one (``last``: the last one,
    which jobs ahead of it in the queue may overtake), each round: moves galore."""

    def __init__(self, interval: float, last: bool = False) -> None:
        self.interval = interval
        self.last = last
        self.refusals: Counter[str] = Counter()
        self.rounds = 0

    def __call__(self, state: StudyState) -> Sequence[JobMove]:
        check_cluster(state.snap)
        for j in state.waiting:  # all or nothing: a waiting job holds nothing
            assert not j.pods
        self.rounds += 1
        if not state.waiting:
            return []
        first = state.waiting[-1 if self.last else 0].id
        return [
            JobMove(j.id, tuple(p.name for p in j.pods), "suspend", first, 0.5)
            for j in state.running
        ]


def test_moves_are_lived_and_their_lost_work_counted() -> None:
    snap = small_cluster()
    r = run_detailed(snap, TEMPLATES, 0.95, "all-or-nothing", hook=SuspendAll(0.2), jobs=80)
    check_cluster(snap)
    assert r.pods_moved > 0 and r.jobs_moved > 0
    assert r.lost_gpu > 0
    assert r.useful_gpu_pct < r.busy_gpu_pct
    assert r.partial_gpu_pct == 0.0 and r.stuck_partial == 0
    assert r.rooms_made == r.rooms_reached + r.rooms_taken + r.rooms_unused > 0
    again = run_detailed(
        small_cluster(), TEMPLATES, 0.95, "all-or-nothing", hook=SuspendAll(0.2), jobs=80
    )
    assert again == r  # one seed, one run


def test_checkpoints_keep_work() -> None:
    def lost(checkpoint: float | None) -> float:
        hook = SuspendAll(0.3)
        return run_detailed(
            small_cluster(),
            TEMPLATES,
            0.95,
            "all-or-nothing",
            hook=hook,
            checkpoint=checkpoint,
            jobs=80,
        ).lost_gpu

    assert lost(0.1) < lost(None)


def test_held_rooms_are_never_taken() -> None:
    free = run_detailed(
        small_cluster(), TEMPLATES, 0.95, "all-or-nothing", hook=SuspendAll(0.2, True), jobs=80
    )
    held = run_detailed(
        small_cluster(),
        TEMPLATES,
        0.95,
        "all-or-nothing",
        hook=SuspendAll(0.2, True),
        hold_room=True,
        jobs=80,
    )
    assert free.rooms_taken > 0
    assert held.rooms_taken == 0 and held.rooms_made > 0
    assert held.rooms_reached > free.rooms_reached


class SuspendOneForLow:
    """Suspends the smallest running job for the last waiting job of priority 0, each
    round: a room that may not be enough for it, kept while it waits."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.refusals: Counter[str] = Counter()
        self.rounds = 0

    def __call__(self, state: StudyState) -> Sequence[JobMove]:
        low = [j for j in state.waiting if j.priority == 0]
        if not low or not state.running:
            return []
        j = min(state.running, key=lambda j: (len(j.pods), j.id))
        return [JobMove(j.id, tuple(p.name for p in j.pods), "suspend", low[-1].id, 0.5)]


def test_a_nominated_room_is_held_against_its_priority_or_lower_only() -> None:
    """hold_higher (capacity_room.nominate): as the kube-scheduler keeps a nominated pod's
    room, a job of higher priority may take it; one of the room's priority may not."""

    def run(high_share: float, higher: bool) -> DetailedResult:
        return run_detailed(
            small_cluster(),
            TEMPLATES,
            0.95,
            "all-or-nothing",
            hook=SuspendOneForLow(0.2),
            hold_room=True,
            hold_higher=higher,
            high_share=high_share,
            jobs=80,
        )

    same = run(0.0, True)  # every job of one priority: held as before
    assert same == run(0.0, False) and same.rooms_taken == 0 and same.rooms_made > 0
    assert run(0.5, False).rooms_taken == 0
    assert run(0.5, True).rooms_taken > 0


def test_without_a_hook_the_figures_are_the_studys() -> None:
    r = run_detailed(small_cluster(), TEMPLATES, 0.9, "all-or-nothing", jobs=60)
    assert (r.pods_moved, r.lost_gpu, r.rounds, r.rooms_made) == (0, 0.0, 0, 0)
    assert r.p95_wait >= r.mean_wait >= 0


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValueError, match="interval must be > 0"):
        run_detailed(small_cluster(), TEMPLATES, 0.9, "all-or-nothing", hook=SuspendAll(0))
    with pytest.raises(ValueError, match="checkpoint must be > 0"):
        run_detailed(small_cluster(), TEMPLATES, 0.9, "all-or-nothing", checkpoint=0)
    with pytest.raises(ValueError, match="high_share must be in"):
        run_detailed(small_cluster(), TEMPLATES, 0.9, "all-or-nothing", high_share=2)


# --- HighNodeUtilization ------------------------------------------------------------------


def _state(
    snap: Snapshot, jobs: Sequence[StudyJob], waiting: Sequence[StudyJob] = ()
) -> StudyState:
    return StudyState(1.0, snap, BinpackScorer(), tuple(jobs), tuple(waiting))


def _run(snap: Snapshot, job: int, node: int, pods: int, gpus: int = 1) -> StudyJob:
    t = JobTemplate(shape(1000, gpus), pods)
    recs = []
    for k in range(pods):
        rec = PodRecord("study", f"job{job}-{k}", t.shape)
        free = np.flatnonzero(snap.gpu_free[node] == 1000)[: t.shape.gpu_count]
        snap.place(t.shape, node, tuple(int(g) for g in free), pod=rec)
        recs.append(rec)
    return StudyJob(job, t, 0.0, 0.5, tuple(recs))


def test_hnu_empties_underused_nodes_least_used_first() -> None:
    snap = Snapshot([gpu_node(f"n{i}", 64000, 8) for i in range(4)])
    busy = [_run(snap, 0, 0, 8), _run(snap, 1, 1, 6)]  # 100% and 75%: not underused
    small = _run(snap, 2, 2, 3)  # 37.5%
    tiny = _run(snap, 3, 3, 1)  # 12.5%: emptied first
    moves = HighNodeUtilization(0.1)(_state(snap, [*busy, small, tiny]))
    # Room left on n0 and n1: 2 GPUs; each eviction takes its GPU off it.
    assert [(m.job, m.pods, m.method) for m in moves] == [
        (2, ("job2-0",), "evict"),
        (3, ("job3-0",), "evict"),
    ]


def test_hnu_does_nothing_when_all_or_no_nodes_are_underused() -> None:
    snap = Snapshot([gpu_node(f"n{i}", 64000, 8) for i in range(2)])
    jobs = [_run(snap, 0, 0, 1), _run(snap, 1, 1, 1)]
    assert HighNodeUtilization(0.1)(_state(snap, jobs)) == []
    snap = Snapshot([gpu_node(f"n{i}", 64000, 2) for i in range(2)])
    jobs = [_run(snap, 0, 0, 2), _run(snap, 1, 1, 2)]
    assert HighNodeUtilization(0.1)(_state(snap, jobs)) == []


def test_hnu_breaks_gangs_and_the_study_counts_it() -> None:
    snap = small_cluster()
    r = run_detailed(
        snap, TEMPLATES, 0.7, "all-or-nothing", hook=HighNodeUtilization(0.05), jobs=80
    )
    check_cluster(snap)
    assert r.pods_moved > 0 and r.lost_gpu > 0
    assert r.refusals == {}


# --- corral's hook ------------------------------------------------------------------------


def test_corral_suspends_a_gang_that_fits_elsewhere_for_a_waiting_one() -> None:
    snap = Snapshot([gpu_node(f"n{i}", 64000, 4) for i in range(2)])
    a = _run(snap, 0, 0, 1)
    b = _run(snap, 1, 1, 1)  # each node has 3 GPUs free: a 4-GPU pod fits nowhere
    big = StudyJob(2, JobTemplate(shape(1000, 4), 1), 0.9, -1.0, ())
    hook = CorralHook(DeschedulerConfig(), job_hours=2.0)
    moves = hook(_state(snap, [a, b], [big]))
    assert len(moves) == 1
    m = moves[0]
    assert m.method == "suspend" and m.for_job == 2 and m.job in (0, 1)
    assert m.resume_after == pytest.approx(600 / 7200)
    assert hook.refusals == Counter()
    # The planner worked on its own copy: the study's cluster is as it was.
    assert [p.node for p in (*a.pods, *b.pods)] == [0, 1]


def test_corral_counts_why_it_does_not_move() -> None:
    snap = Snapshot([gpu_node(f"n{i}", 64000, 4) for i in range(2)])
    full = [_run(snap, 0, 0, 4), _run(snap, 1, 1, 4)]
    big = StudyJob(2, JobTemplate(shape(1000, 4), 1), 0.9, -1.0, ())
    hook = CorralHook(DeschedulerConfig(), job_hours=2.0)
    assert hook(_state(snap, full, [big])) == []
    assert sum(hook.refusals.values()) == 1
    (why,) = hook.refusals
    assert "<gang>" in why or "<n>" in why


def test_reason_kinds_group_names_and_numbers() -> None:
    a = reason_kind("gang study/job12 was moved 12m0s ago (cool-down 1h0m0s)")
    b = reason_kind("gang study/job3 was moved 5m ago (cool-down 1h)")
    assert a == b == "gang <gang> was moved <duration> ago (cool-down <duration>)"
    c = reason_kind("leave room for 3 of the 4 pods of cpu=4m memory=625Gi gpu=8 it needs")
    assert c == "leave room for <n> of the <n> pods of cpu=<q> memory=<q> gpu=<q> it needs"


def test_corral_in_the_study_keeps_gangs_whole() -> None:
    snap = small_cluster()
    hook = CorralHook(DeschedulerConfig(), job_hours=2.0)
    r = run_detailed(snap, TEMPLATES, 0.95, "all-or-nothing", hook=hook, jobs=40)
    check_cluster(snap)
    assert r.partial_gpu_pct == 0.0 and r.stuck_partial == 0
    assert r.rounds == hook.rounds > 0
    assert r.rooms_made == r.rooms_reached + r.rooms_taken + r.rooms_unused


def test_corral_sees_the_jobs_checkpoints_teams_and_start_times() -> None:
    snap = Snapshot([gpu_node(f"n{i}", 64000, 4) for i in range(2)])
    job = _run(snap, 0, 0, 2)
    job = StudyJob(0, job.template, 0.0, 0.5, job.pods, queue=2)
    fresh = StudyJob(1, _run(snap, 1, 1, 1).template, 0.8, 0.8, snap.pods_on(1), queue=0)
    hook = CorralHook(DeschedulerConfig(), job_hours=2.0)
    state = StudyState(0.9, snap, BinpackScorer(), (job, fresh), (), checkpoint=0.25)
    cluster = hook.cluster_state(state, hook._time(0.9))
    w = next(v for k, v in cluster.workloads.items() if k.endswith("job0"))
    assert w.namespace == "study-2"
    # Started 1 h into the clock, checkpoints every 30 min: the last one at 1 h 30 min.
    assert w.annotations == {
        "corral.dev/checkpoint-interval": "30m",
        "corral.dev/last-checkpoint": "2026-01-01T01:30:00Z",
    }
    pods = {p.name: p for p in cluster.snapshot.pods_on(0)}
    assert {p.namespace for p in pods.values()} == {"study-2"}
    assert {p.started for p in pods.values()} == {"2026-01-01T01:00:00Z"}
    assert {p.annotations["scheduling.volcano.sh/queue-name"] for p in pods.values()} == {"study-2"}
    # A job that has not reached its first checkpoint says only how often it takes them.
    other = next(v for k, v in cluster.workloads.items() if k.endswith("job1"))
    assert other.namespace == "study" and "corral.dev/last-checkpoint" not in other.annotations
    plain = hook.cluster_state(StudyState(0.9, snap, BinpackScorer(), (job,), ()), hook._time(0.9))
    assert all(not w.annotations for w in plain.workloads.values())


# --- the command ----------------------------------------------------------------------------

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"n{i},64000,262144,4,G2\n" for i in range(4)
)
JOBS = ["--job", "2:gpus=1,cpu=4,memory=8Gi", "--job", "3:gpus=1,cpu=4,memory=8Gi"]


@pytest.fixture
def nodes(tmp_path: Path) -> Path:
    n = tmp_path / "nodes.csv"
    n.write_text(NODES)
    return n


@pytest.mark.slow
def test_study_command(nodes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "loose.yaml"
    cfg.write_text("limits:\n  max_evictions_per_namespace: null\n")
    png = tmp_path / "study.png"
    base = ["study", "--nodes", str(nodes), *JOBS, "--loads", "70,90", "--seeds", "2"]
    short = ["--length", "2", "--warmup", "0.5", "--workers", "1"]
    args = [*base, *short, "--config", str(cfg), "--png", str(png), "--pod-by-pod"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    modes = {r["mode"] for r in out["summary"]}
    assert modes == {
        "pod-by-pod",
        "all-or-nothing",
        "aon+HighNodeUtilization",
        "aon+corral",
        "aon+corral(loose)",
    }
    assert len(out["runs"]) == 2 * 2 * 5
    row = out["summary"][0]
    assert set(row["busy_gpu_pct"]) == {"median", "min", "max", "per_seed"}
    assert row["seeds"] == [42, 43]
    assert out["setup"]["checkpoint_hours"] == 0.5 and out["setup"]["usable_gpus"] == 16
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Two processes give the same runs as one.
    assert main([*base, *short[:-1], "2", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [r for r in again["runs"] if r["mode"] != "pod-by-pod"] == [
        r for r in out["runs"] if r["label"] in {x["label"] for x in again["runs"]}
    ]
    assert main([*base, *short, "--seeds", "1", "--hold-room"]) == 0
    text = capsys.readouterr().out
    assert "load 90%" in text and "aon+corral+hold" in text and "p95 wait" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_study_reports_jobs_that_fit_no_node_once_and_fits_100_columns(
    nodes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mix = tmp_path / "mix.json"
    job = {"workers": 1, "gpus": 1, "cpu": "4", "memory": "8Gi", "weight": 9}
    huge = {"workers": 2, "gpus": 8, "cpu": "4", "memory": "8Gi", "weight": 1}
    mix.write_text(json.dumps({"name": "mine", "source": "made up", "jobs": [job, huge]}))
    run = ["study", "--nodes", str(nodes), "--mix", str(mix), "--loads", "80", "--seeds", "2"]
    assert main([*run, "--length", "2", "--warmup", "0.5", "--checkpoint", "none"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    left = [line for line in lines if line.startswith("left out")]
    assert left == ["left out, fit no node (10.00% of jobs): 2 x (cpu=4 memory=8Gi gpu=8)"]
    assert "no checkpoints" in text and "mix mine" in text and "source: made up" in text
    assert max(len(line) for line in lines) <= 100
    assert "per seed -- p95 wait, all jobs:" in text


def test_png_without_matplotlib_keeps_the_finished_table(
    nodes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as when not installed
    png = tmp_path / "study.png"
    argv = ["study", "--nodes", str(nodes), *JOBS, "--loads", "80", "--seeds", "1"]
    assert main([*argv, "--length", "1", "--warmup", "0.2", "--png", str(png)]) == 1
    out, err = capsys.readouterr()
    assert "== load 80%" in out and "per seed" in out
    assert err.strip().splitlines() == [
        f"corral-descheduler study: --png {png}: not written: matplotlib is not installed "
        "(pip install -c constraints.txt -e '.[plot]'); the table above is the run's"
    ]
    assert not png.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--loads", "abc"], "--loads 'abc'"),
        (["--seeds", "0"], "--seeds 0: must be >= 1"),
        (["--job-hours", "0"], "--job-hours 0.0: must be > 0"),
        (["--high-share", "1.5"], "--high-share 1.5: must be in [0, 1]"),
        (["--config", "/no/such.yaml"], "/no/such.yaml"),
        (["--policy", "fgd"], "--policy fgd"),
        (["--checkpoint", "soon"], "--checkpoint 'soon'"),
        (["--checkpoint", "0"], "--checkpoint '0': must be above 0"),
        (["--queues", "0"], "--queues 0: must be >= 1"),
        (["--length", "0"], "--length 0.0: must be > 0"),
    ],
)
def test_study_bad_input(
    nodes: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["study", "--nodes", str(nodes), *JOBS, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_study_refuses_a_bad_mix_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mix = tmp_path / "mix.json"
    mix.write_text(json.dumps({"jobs": [{"workers": 1, "gpus": 1, "weight": 0}]}))
    assert main(["study", "--mix", str(mix), "--quick"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"corral-descheduler study: {mix}: jobs[0].weight: 0: expected a number above 0"
    ]


def test_the_summary_keeps_each_seed_and_tells_a_growing_queue() -> None:
    from dataclasses import replace

    from descheduler.study_table import render, stable, summarize

    r = run_detailed(small_cluster(), TEMPLATES, 0.5, "all-or-nothing", length=6, seed=1)
    calm = replace(r, p95_wait=0.5, p95_wait_half=0.45, p95_wait_gang=None)
    grown = replace(r, seed=2, p95_wait=2.0, p95_wait_half=0.5, p95_wait_gang=None)
    assert stable(calm) and not stable(grown)
    (row,) = summarize([calm, grown], job_hours=2.0)
    assert row["seeds"] == [1, 2] and row["stable_seeds"] == 1
    assert row["p95_wait"] == {"median": 1.25, "min": 0.5, "max": 2.0, "per_seed": [0.5, 2.0]}
    assert row["p95_wait_gang"] is None
    text = render([row], gpus=16)
    assert "all-or-nothing 1/2" in text and "gangs p95" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_a_capacity_room_is_lived_for_hold_for_not_resume_after() -> None:
    """Both 4-GPU jobs fill the cluster; the 8-GPU job has waited 12 minutes: with the capacity
    room both are suspended for it, and queue again after hold_for (not resume_after)."""
    snap = Snapshot([gpu_node(f"n{i}", 64000, 4) for i in range(2)])
    a = _run(snap, 0, 0, 1, gpus=4)
    b = _run(snap, 1, 1, 1, gpus=4)
    big = StudyJob(2, JobTemplate(shape(1000, 4), 2), 0.9, -1.0, ())
    room = {"enabled": True, "equal_priority": True, "after": "5m", "hold_for": "30m"}
    hook = CorralHook(parse_config({"capacity_room": room}), job_hours=2.0)
    moves = hook(_state(snap, [a, b], [big]))
    assert sorted(m.job for m in moves) == [0, 1], hook.refusals
    assert all(m.method == "suspend" and m.for_job == 2 for m in moves)
    assert [m.resume_after for m in moves] == [pytest.approx(1800 / 7200)] * 2
