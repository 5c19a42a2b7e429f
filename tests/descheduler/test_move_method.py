"""How each gang may move, per top-level owner: suspended (Jobs, JobSets, Kubeflow jobs,
RayJobs), evicted (ReplicaSets, StatefulSets, Jobs whose podFailurePolicy ignores
DisruptionTarget or whose backoffLimit leaves room), or not at all, with the reason;
priority as a rule; what admins already say; suspended workloads are not waiting; bad
dump items are refused; the resumption rules (only corral's own suspensions, healed
after a crash)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from gangplace.engine.objects import RecordError
from gangplace.engine.owners import (
    ANNOTATION_SUSPEND_IGNORED as IGNORED,
)
from gangplace.engine.owners import workload_from_json
from gangplace.engine.quirks.job_disruption import ignores_disruption
from hypothesis import given, settings
from hypothesis import strategies as st

from descheduler import StateError, parse_config, plan, state_from_list
from descheduler.cli import main
from descheduler.planning.resume import Mark, due_resumptions, mark_text, read_mark
from tests.builders import objects as b
from tests.builders.descheduler_cluster import NOW, as_list, gang, gpu_node, pod, podgroup
from tests.builders.workload_crds import workload_crd

IGNORE = dict(b.IGNORE_DISRUPTION)
EXIT = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [143]}}


def job_pod(name: str, node: str, gpus: int, job: str, **kw: Any) -> dict[str, Any]:
    return pod(name, node, gpus, owner_kind="Job", owner=job, **kw)


def job_obj(name: str, **kw: Any) -> dict[str, Any]:
    return b.job(name, uid=f"uid-owner-{name}", **kw)


def case_767(*extra: Any, jobs: dict[str, dict[str, Any]] | None = None) -> list[Any]:
    """Three 8-GPU nodes at 7/6/7 GPUs; n1's two 1-GPU pods are what can make room for a
    waiting 4-GPU gang (of priority 1000). ``jobs``: the two are Jobs with these fields
    (else ReplicaSet pods)."""
    items: list[Any] = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 7, owner_kind=""), pod("big-2", "n2", 7, owner_kind="")]
    items += [pod("big-1", "n1", 4, owner_kind="")]
    for name in ("s1", "s2"):
        if jobs is not None:
            items += [job_pod(name, "n1", 1, name), job_obj(name, **jobs.get(name, {}))]
        else:
            items.append(pod(name, "n1", 1))
    items += gang("llm", [], 4, pending=1, phase="Inqueue")
    items += list(extra)
    return items


def replace_pod(items: list[Any], name: str, new: dict[str, Any]) -> list[Any]:
    return [new if x["kind"] == "Pod" and x["metadata"]["name"] == name else x for x in items]


def state(items: list[Any]) -> Any:
    return state_from_list(as_list(items), NOW)


def how(p: Any) -> dict[str, tuple[str, list[str]]]:
    return {m.unit: (m.method, m.workload_names()) for m in p.moves}


# --- the method, per owner ----------------------------------------------------------------


def test_replicaset_pods_are_evicted() -> None:
    p = plan(state(case_767()))
    assert how(p) == {"default/pod:s1": ("evict", []), "default/pod:s2": ("evict", [])}
    assert p.waiting_after == []


def test_jobs_with_backoff_limit_0_are_suspended_never_evicted() -> None:
    p = plan(state(case_767(jobs={"s1": {"backoff_limit": 0}, "s2": {"backoff_limit": 0}})))
    assert how(p) == {
        "default/pod:s1": ("suspend", ["Job default/s1"]),
        "default/pod:s2": ("suspend", ["Job default/s2"]),
    }
    assert p.by_method() == {"suspend": 2, "evict": 0}
    # without suspending, they have no way to move at all
    no_suspend = parse_config({"moves": {"suspend": False}})
    p = plan(state(case_767(jobs={"s1": {"backoff_limit": 0}, "s2": {}})), no_suspend)
    assert p.moves == [] and p.waiting_after == ["default/llm"]
    reasons = {x.unit: x.reason for x in p.not_moved}
    assert reasons["default/pod:s1"] == (
        "Job default/s1 has backoffLimit 0 with 0 failed: evicting 1 pod(s) would fail it, "
        "and its podFailurePolicy does not ignore DisruptionTarget"
    )


def test_jobs_evicted_only_with_headroom_or_the_disruption_rule() -> None:
    no_suspend = parse_config({"moves": {"suspend": False}})
    items = case_767(
        jobs={"s1": {"backoff_limit": 0, "ignore_disruption": True}, "s2": {"backoff_limit": 1}}
    )
    assert how(plan(state(items), no_suspend)) == {
        "default/pod:s1": ("evict", []),
        "default/pod:s2": ("evict", []),
    }
    # one failure already spent: no room left for the eviction
    items = case_767(
        jobs={"s1": {"ignore_disruption": True}, "s2": {"backoff_limit": 1, "failed": 1}}
    )
    p = plan(state(items), no_suspend)
    assert p.moves == []
    assert (
        "backoffLimit 1 with 1 failed" in {x.unit: x.reason for x in p.not_moved}["default/pod:s2"]
    )


def test_a_job_missing_from_the_state_is_not_moved() -> None:
    items = [x for x in case_767(jobs={}) if x["kind"] != "Job"]
    p = plan(state(items))
    assert p.moves == []
    assert {x.unit: x.reason for x in p.not_moved}["default/pod:s1"] == (
        "Job default/s1 is not in the cluster state: whether an eviction would fail it "
        "cannot be told"
    )


def test_unknown_owners_and_kubeflow_pods_are_not_evicted() -> None:
    items = replace_pod(case_767(), "s1", pod("s1", "n1", 1, owner_kind="Workflow", owner="wf"))
    items = replace_pod(items, "s2", pod("s2", "n1", 1, owner_kind="PyTorchJob", owner="pt"))
    p = plan(state(items))
    assert p.moves == []
    reasons = {x.unit: x.reason for x in p.not_moved}
    assert reasons["default/pod:s1"] == (
        "owner Workflow default/wf is not known to make an evicted pod again without loss"
    )
    assert reasons["default/pod:s2"].startswith(
        "an evicted pod of PyTorchJob default/pt is not made again without loss"
    )
    # a PyTorchJob in the state is suspended as a whole, through spec.runPolicy.suspend
    ptj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt", "namespace": "default", "uid": "uid-owner-pt"},
        "spec": {"runPolicy": {"suspend": False}},
    }
    items = replace_pod(items, "s1", pod("s1", "n1", 1))
    p = plan(state([*items, ptj, workload_crd("PyTorchJob")]))
    assert how(p) == {
        "default/pod:s1": ("evict", []),
        "default/pod:s2": ("suspend", ["PyTorchJob default/pt"]),
    }


def test_a_suspend_that_would_not_take_effect_is_never_chosen() -> None:
    """The served CRD without the switch (training-operator before v1.7 prunes it), no
    CRD to check, a mark of a suspend its controller ignored: not movable, and why."""
    items = replace_pod(case_767(), "s2", pod("s2", "n1", 1, owner_kind="PyTorchJob", owner="pt"))
    items = replace_pod(items, "s1", pod("s1", "n1", 1))
    ptj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt", "namespace": "default", "uid": "uid-owner-pt"},
        "spec": {"runPolicy": {}},
    }
    cases = {
        "the served PyTorchJob CRD has no spec.runPolicy.suspend": [
            ptj,
            workload_crd("PyTorchJob", switch=False),
        ],
        "whether the served PyTorchJob CRD has spec.runPolicy.suspend could not be checked": [ptj],
        "its controller ignored a suspend before (corral.dev/suspend-ignored: ": [
            {**ptj, "metadata": {**ptj["metadata"], "annotations": {IGNORED: '{"why":"x"}'}}},
            workload_crd("PyTorchJob"),
        ],
    }
    for why, extra in cases.items():
        p = plan(state([*items, *extra]))
        assert "default/pod:s2" not in how(p), why
        reason = {x.unit: x.reason for x in p.not_moved}["default/pod:s2"]
        assert f"; not suspended: {why}" in reason, reason


def test_a_workload_kueue_manages_is_never_moved() -> None:
    """Its queue-name label, or a Kueue Workload for it: neither suspended nor evicted
    (Kueue starts an admitted job it finds suspended again)."""
    items = case_767(jobs={"s2": {"backoff_limit": 0}, "s1": {"backoff_limit": 6}})
    assert how(plan(state(items)))["default/pod:s1"] == ("suspend", ["Job default/s1"])
    labelled = []
    for x in items:
        if x["kind"] == "Job" and x["metadata"]["name"] == "s1":
            x = {**x, "metadata": {**x["metadata"], "labels": {"kueue.x-k8s.io/queue-name": "q"}}}
        labelled.append(x)
    uid = next(x for x in items if x["kind"] == "Job" and x["metadata"]["name"] == "s1")
    kueue_wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-s1-abcde",
            "namespace": "default",
            "ownerReferences": [{"kind": "Job", "name": "s1", "uid": uid["metadata"]["uid"]}],
        },
    }
    for case, why in (
        (labelled, "label kueue.x-k8s.io/queue-name=q"),
        ([*items, kueue_wl], "a Kueue Workload stands for it"),
    ):
        p = plan(state(case))
        assert "default/pod:s1" not in how(p)
        reason = {x.unit: x.reason for x in p.not_moved}["default/pod:s1"]
        assert reason.startswith(f"Job default/s1 is managed by Kueue ({why})"), reason


def test_the_top_level_owner_is_suspended() -> None:
    """A JobSet's Job: the JobSet is what is suspended (its controller suspends its Jobs)."""
    owner = b.owner_ref("JobSet", "js", api="jobset.x-k8s.io/v1alpha2", uid="uid-js")
    items = case_767(jobs={"s1": {"owner": owner}, "s2": {"backoff_limit": 0}})
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "default", "uid": "uid-js"},
        "spec": {"suspend": False},
    }
    crd = workload_crd("JobSet")
    assert how(plan(state([*items, js, crd])))["default/pod:s1"] == (
        "suspend",
        ["JobSet default/js"],
    )
    # the JobSet missing: nothing to suspend, and no headroom to evict (backoffLimit 6
    # leaves room: evicted)
    p = plan(state(items))
    assert how(p)["default/pod:s1"] == ("evict", [])


def test_a_workload_running_two_gangs_is_not_suspended_for_one() -> None:
    items = replace_pod(case_767(), "s1", job_pod("s1", "n1", 1, "shared", gang="g1"))
    items = replace_pod(items, "s2", job_pod("s2", "n1", 1, "shared", gang="g2"))
    items = [x for x in items if x["kind"] != "Job"]
    items += [job_obj("shared", backoff_limit=0), podgroup("g1", 1), podgroup("g2", 1)]
    p = plan(state(items))
    assert p.moves == []
    assert {x.unit: x.reason for x in p.not_moved}["default/g1"].endswith(
        "not suspended: suspending Job default/shared would also stop default/g2"
    )


def test_podfailurepolicy_rule_order_matters() -> None:
    assert ignores_disruption([IGNORE])
    assert ignores_disruption([{"action": "Ignore", "onPodConditions": [{"type": "X"}]}, IGNORE])
    assert not ignores_disruption([EXIT, IGNORE])  # exit 143 after SIGTERM fails the Job first
    fail = {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}
    assert not ignores_disruption([fail, IGNORE])
    false = {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "False"}],
    }
    assert not ignores_disruption([false])
    assert not ignores_disruption(None) and not ignores_disruption([])


def test_job_records_refuse_bad_fields() -> None:
    bad = job_obj("j")
    bad["spec"]["backoffLimit"] = "six"
    with pytest.raises(RecordError, match=r"Job default/j: spec.backoffLimit: expected a count"):
        workload_from_json(bad)
    w = workload_from_json(job_obj("j", backoff_limit=2, failed=1, suspend=True))
    assert (w.backoff_limit, w.failed, w.failures_left, w.suspended) == (2, 1, 1, True)


# --- priority, and what admins already say -------------------------------------------------


def test_priority_is_a_rule_not_a_cost() -> None:
    items = case_767()
    small = [x for x in items if x["kind"] == "Pod" and x["metadata"]["name"] in ("s1", "s2")]
    for x in small:
        x["spec"]["priority"] = 1_000_000
    p = plan(state(items))
    assert p.moves == [] and p.waiting_after == ["default/llm"]
    assert "has priority 1000000, higher than 1000 of default/llm" in p.unserved[0].reason
    lower = parse_config({"eviction": {"victim_priority": "LowerPriority"}})
    p = plan(state(items), lower)
    assert p.moves == [] and p.waiting_after == ["default/llm"]
    assert "has priority 1000000, higher than 1000 of default/llm" in p.unserved[0].reason
    for x in small:
        x["spec"]["priority"] = 1000
    # equal priorities: LowerPriority moves nothing; the default moves them as a
    # consolidation (each placed again at once)
    p = plan(state(items), lower)
    assert p.moves == [] and p.waiting_after == ["default/llm"]
    assert "has priority 1000, not lower than 1000 of default/llm" in p.unserved[0].reason
    p = plan(state(items))
    assert len(p.moves) == 2 and p.waiting_after == []
    assert all(pm.target is not None for m in p.moves for pm in m.pods)


def test_preemption_policy_never_causes_no_moves() -> None:
    items = case_767()
    (waiting,) = [x for x in items if x["kind"] == "Pod" and x["metadata"]["name"] == "llm-0"]
    waiting["spec"]["preemptionPolicy"] = "Never"
    p = plan(state(items))
    assert p.moves == []
    assert p.unserved[0].reason == (
        "pod default/llm-0 says preemptionPolicy: Never: no gang is moved for it"
    )


def test_defragmentation_moves_the_lowest_priority_first() -> None:
    """No gang waits: of two equally useful small pods, the one of lower priority moves."""
    items: list[Any] = [gpu_node("n0"), gpu_node("n1")]
    items += [pod("a", "n0", 1, priority=100), pod("b", "n1", 1, priority=0)]
    items += [pod("fill-0", "n0", 4, owner_kind=""), pod("fill-1", "n1", 4, owner_kind="")]
    cfg = parse_config(
        {"defragment": {"enabled": True, "min_gain_gpus": 0.1, "min_total_gain_gpus": 0.1}}
    )
    p = plan(state(items), cfg)
    assert [m.unit for m in p.moves][:1] == ["default/pod:b"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
            'is annotated cluster-autoscaler.kubernetes.io/safe-to-evict: "false"',
        ),
        ({"owner_kind": "DaemonSet"}, "belongs to DaemonSet"),
        ({"annotations": {"kubernetes.io/config.mirror": "x"}}, "is a static (mirror) pod"),
        ({"volumes": [{"name": "d", "emptyDir": {}}]}, "has local storage"),
        ({"volumes": [{"name": "h", "hostPath": {"path": "/data"}}]}, "has local storage"),
    ],
)
def test_what_admins_say_protects_the_gang(change: dict[str, Any], reason: str) -> None:
    items = replace_pod(case_767(), "s1", pod("s1", "n1", 1, **change))
    p = plan(state(items))
    assert "default/pod:s1" not in {m.unit for m in p.moves}
    assert reason in {x.unit: x.reason for x in p.not_moved}["default/pod:s1"]
    if "volumes" in change:  # allowed by config, the pod may move again
        allow = parse_config({"eviction": {"evict_local_storage_pods": True}})
        assert "default/pod:s1" in {m.unit for m in plan(state(items), allow).moves}


def test_a_memory_backed_emptydir_is_not_local_storage() -> None:
    shm = [{"name": "shm", "emptyDir": {"medium": "Memory"}}]
    items = replace_pod(case_767(), "s1", pod("s1", "n1", 1, volumes=shm))
    assert "default/pod:s1" in {m.unit for m in plan(state(items)).moves}


# --- a suspended workload is not waiting -------------------------------------------------


def test_a_suspended_jobs_podgroup_is_neither_served_nor_counted() -> None:
    """The webhook made the PodGroup of a Job created suspended: pod-less, it would look
    like a 1-GPU gang waiting; it is not, and the real waiting gang is served."""
    held = podgroup(
        "job-held", 1, phase="Inqueue", min_resources={"cpu": "1", "nvidia.com/gpu": "1"}
    )
    held["metadata"]["ownerReferences"] = [b.owner_ref("Job", "held", uid="uid-owner-held")]
    items = case_767(held, job_obj("held", suspend=True))
    p = plan(state(items))
    assert p.waiting_before == ["default/llm"] and p.waiting_after == []
    assert [(x.unit, x.reason) for x in p.suspended] == [
        ("default/job-held", "Job default/held is suspended (not by corral): it is not waiting")
    ]
    # and corral's own: waiting to be resumed, not waiting for room
    mine = job_obj("held", suspend=True, annotations={"corral.dev/suspended-by": "{}"})
    p = plan(state(case_767(held, mine)))
    assert (
        p.suspended[0].reason == "Job default/held is suspended by corral: it waits to be resumed"
    )


# --- bad dump items ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"kind": "Pod"}, "items[3] (Pod) has no metadata"),
        ({"kind": "Pod", "metadata": None}, "items[3] (Pod) has no metadata"),
        ({"kind": "Job", "metadata": "x"}, "items[3] (Job): metadata is not an object"),
        ({"metadata": []}, "items[3] (no kind): metadata is not an object"),
    ],
)
def test_an_item_without_usable_metadata_is_refused(
    item: dict[str, Any], message: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    items = [gpu_node("n0"), gpu_node("n1"), pod("a", "n0", 1), item]
    with pytest.raises(StateError, match=re.escape(message)):
        state(items)
    f = tmp_path / "dump.json"
    f.write_text(json.dumps(as_list(items)))
    assert main(["plan", "--snapshot", str(f)]) == 2
    assert message in capsys.readouterr().err


# --- resumption ----------------------------------------------------------------------------


def suspended_by_corral(name: str, minutes_ago: float, for_gang: str | None, **kw: Any) -> Any:
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup"}
    pg["metadata"] = {"name": f"pg-{name}", "namespace": "default"}
    mark = mark_text("plan-x", NOW - timedelta(minutes=minutes_ago), for_gang, pg)
    return job_obj(name, suspend=True, annotations={"corral.dev/suspended-by": mark}, **kw)


def actions(items: list[Any], **cfg: Any) -> dict[str, tuple[str, str]]:
    config = parse_config({"moves": cfg}) if cfg else parse_config({})
    return {r.workload.name: (r.action, r.reason) for r in due_resumptions(state(items), config)}


def test_resumed_when_the_gang_is_bound_or_after_resume_after() -> None:
    base = [gpu_node("n0"), *gang("llm", ["n0"], 4)]
    items = [*base, suspended_by_corral("a", 1, "default/llm")]
    assert actions(items)["a"] == ("resume", "gang default/llm, which it made room for, is bound")
    waiting = [gpu_node("n0"), *gang("llm", [], 4, pending=1)]
    assert actions([*waiting, suspended_by_corral("a", 1, "default/llm")]) == {}
    late = actions([*waiting, suspended_by_corral("a", 11, "default/llm")])
    assert late["a"] == ("resume", "suspended 11m ago (moves.resume_after 10m)")
    assert (
        actions([*waiting, suspended_by_corral("a", 11, "default/llm")], resume_after="15m") == {}
    )
    gone = actions([gpu_node("n0"), suspended_by_corral("a", 1, "default/llm")])
    assert gone["a"] == ("resume", "gang default/llm, which it made room for, is gone")


def test_a_crash_between_suspend_and_resume_heals() -> None:
    """The run suspended the Job but died before removing the PodGroup: the next run
    removes it while the gang waits, and resumes the Job (making the PodGroup again)
    once the gang is bound. Nothing is kept in the process: the mark says it all."""
    waiting = [gpu_node("n0"), *gang("llm", [], 4, pending=1), podgroup("pg-a", 1)]
    (r,) = due_resumptions(
        state([*waiting, suspended_by_corral("a", 1, "default/llm")]), parse_config({})
    )
    assert (r.action, r.reason) == (
        "heal",
        "PodGroup default/pg-a of suspended Job default/a remains",
    )
    bound = [gpu_node("n0"), *gang("llm", ["n0"], 4)]
    (r,) = due_resumptions(
        state([*bound, suspended_by_corral("a", 1, "default/llm")]), parse_config({})
    )
    assert r.action == "resume" and r.mark.podgroup is not None
    assert r.mark.podgroup["metadata"]["name"] == "pg-a"


def test_a_workload_resumed_by_someone_else_only_loses_the_mark() -> None:
    w = suspended_by_corral("a", 1, "default/llm")
    w["spec"]["suspend"] = False
    assert actions([gpu_node("n0"), w])["a"] == (
        "forget",
        "Job default/a was resumed by someone else",
    )


marks = st.one_of(
    st.none(),
    st.just("not json"),
    st.builds(
        lambda m, g: mark_text("plan-x", NOW - timedelta(minutes=m), g, None),
        st.integers(0, 30),
        st.sampled_from([None, "default/llm", "default/gone"]),
    ),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(marks, st.booleans(), st.sampled_from([0, 6])), max_size=6), st.booleans()
)
def test_only_corrals_own_suspensions_are_ever_resumed(
    jobs: list[tuple[str | None, bool, int]], bound: bool
) -> None:
    items: list[Any] = [
        gpu_node("n0"),
        *gang("llm", ["n0"] if bound else [], 4, pending=0 if bound else 1),
    ]
    for i, (mark, suspended, limit) in enumerate(jobs):
        ann = {"corral.dev/suspended-by": mark} if mark is not None else None
        items.append(job_obj(f"j{i}", suspend=suspended, backoff_limit=limit, annotations=ann))
    st_ = state(items)
    for r in due_resumptions(st_, parse_config({})):
        assert "corral.dev/suspended-by" in r.workload.annotations
        assert read_mark(r.workload) is not None
        if r.action == "resume":
            assert r.workload.suspended
        if r.action == "forget":
            assert not r.workload.suspended
    # every suspended Job of corral's whose gang is bound, gone, or overdue is resumed
    due = {r.workload.name for r in due_resumptions(st_, parse_config({})) if r.action == "resume"}
    for i, (_, suspended, _) in enumerate(jobs):
        m = read_mark(st_.workloads[f"default/Job/j{i}"])
        if not suspended or m is None:
            assert f"j{i}" not in due
        elif (
            m.at is None or m.for_gang == "default/gone" or (bound and m.for_gang == "default/llm")
        ) or (m.at is not None and (NOW - m.at).total_seconds() >= 600):
            assert f"j{i}" in due


def test_an_unreadable_mark_is_still_corrals() -> None:
    w = workload_from_json(job_obj("a", suspend=True, annotations={"corral.dev/suspended-by": "?"}))
    assert read_mark(w) == Mark("", None, None)
