"""The workloads people run, on AdmissionReviews built as the API server sends them
(tests/webhook/fixtures/workloads/README.md says what each stands for): Spark, LeaderWorkerSet
groups, CronJob runs, Argo steps, existing gangs left alone, scaling on UPDATE, Kueue's
warnings, and the podFailurePolicy rule that keeps evictions from failing Jobs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from gangplace.engine.quirks.job_disruption import DISRUPTION_RULE, MAX_RULES
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders.reviews import checked, review, with_object
from tests.builders.reviews import fixture as captured
from tests.kubeapi.recording import RECORDINGS
from webhook.admission.entry import admit
from webhook.config import WebhookConfig, parse_config

FIXTURES = Path(__file__).parent / "fixtures" / "workloads"
GROUP = "scheduling.k8s.io/group-name"
QUEUE = "scheduling.volcano.sh/queue-name"


def fixture(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return doc


def obj_of(rev: dict[str, Any]) -> dict[str, Any]:
    o: dict[str, Any] = rev["request"]["object"]
    return o


def test_every_fixture_is_described_and_answered() -> None:
    described = (FIXTURES / "README.md").read_text()
    names = sorted(p.name for p in FIXTURES.glob("*.json"))
    assert len(names) >= 18
    for name in names:
        assert f"`{name}`" in described, name
        rev = fixture(name)
        assert rev["request"]["operation"] in ("CREATE", "UPDATE")
        res = admit(rev, None, WebhookConfig())
        assert res.review["response"]["uid"] == rev["request"]["uid"]


# --- Spark ------------------------------------------------------------------------------


def test_a_spark_application_is_one_gang_of_minmember_1_reserving_all_of_it() -> None:
    res, patched = checked(fixture("sparkapp-create-pi.json"))
    gang = "sparkapplication-spark-pi"
    for role in ("driver", "executor"):
        spec = patched["spec"][role]
        assert spec["annotations"] == {GROUP: gang, QUEUE: "default"}
        assert spec["schedulerName"] == "volcano"
    (intent,) = res.intents
    assert intent.name == gang
    assert intent.owner is not None and intent.owner.kind == "SparkApplication"
    body = intent.body["spec"]
    # minMember 1: the executors exist only once the driver runs. minResources: the
    # driver (1 cpu, 512m + 384Mi overhead) and 2 executors (2 cpu, 4g + 10%, 1 GPU).
    assert body["minMember"] == 1
    assert body["minResources"] == {
        "cpu": "5",
        "memory": f"{896 + 2 * 4505}Mi",
        "nvidia.com/gpu": "2",
    }


def test_dynamic_allocation_reserves_the_initial_executors() -> None:
    res, _ = checked(fixture("sparkapp-create-dynamic.json"))
    (intent,) = res.intents
    # max(instances 1, initialExecutors 3, minExecutors 2) = 3 executors of 2g + 40%
    # (Python); the driver 512m + 384Mi.
    assert intent.body["spec"]["minResources"] == {"cpu": "4", "memory": f"{896 + 3 * 2867}Mi"}
    off = copy.deepcopy(fixture("sparkapp-create-dynamic.json"))
    obj_of(off)["spec"]["dynamicAllocation"]["enabled"] = False
    res, _ = checked(off)
    (intent,) = res.intents
    assert intent.body["spec"]["minResources"]["cpu"] == "2"  # only executor.instances


def test_spark_starts_two_executors_when_none_is_said() -> None:
    rev = fixture("sparkapp-create-pi.json")
    del obj_of(rev)["spec"]["executor"]["instances"]
    res, _ = checked(rev)
    assert res.intents[0].body["spec"]["minResources"]["nvidia.com/gpu"] == "2"


def test_a_spark_application_with_its_own_batch_scheduler_is_left_alone() -> None:
    res, _ = checked(fixture("sparkapp-create-batchscheduler.json"))
    assert res.outcome == "unchanged" and not res.intents and not res.patch
    assert "spec.batchScheduler" in res.reason


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True])
def test_bad_executor_instances_are_refused_naming_the_field(bad: Any) -> None:
    rev = fixture("sparkapp-create-bad-instances.json")
    obj_of(rev)["spec"]["executor"]["instances"] = bad
    res, _ = checked(rev)
    assert not res.allowed and not res.intents
    status = res.review["response"]["status"]
    assert status["code"] == 400
    assert "spec.executor.instances" in status["message"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("memory", "lots"), ("cores", 0), ("gpu", {"name": "nvidia.com/gpu", "quantity": -1})],
)
def test_bad_spark_resources_are_refused_naming_the_field(field: str, value: Any) -> None:
    rev = fixture("sparkapp-create-pi.json")
    obj_of(rev)["spec"]["executor"][field] = value
    res, _ = checked(rev)
    assert not res.allowed
    assert f"spec.executor.{field}" in res.review["response"]["status"]["message"]


@pytest.mark.parametrize("name", ["pod-create-spark-driver.json", "pod-create-spark-executor.json"])
def test_the_operators_pods_join_the_applications_gang(name: str) -> None:
    res, patched = checked(fixture(name))
    assert patched["metadata"]["annotations"][GROUP] == "sparkapplication-spark-pi"
    assert patched["spec"]["schedulerName"] == "volcano"
    assert res.intents == ()  # the SparkApplication's PodGroup is the gang's
    assert res.warnings == ()


def test_the_driver_names_its_application_for_the_podgroups_owner() -> None:
    res, _ = checked(fixture("pod-create-spark-driver.json"))
    (hint,) = res.hints
    assert (hint.name, hint.owner.kind, hint.owner.name) == (
        "sparkapplication-spark-pi",
        "SparkApplication",
        "spark-pi",
    )
    assert hint.owner.uid


def test_pods_of_a_spark_application_that_is_not_a_gang_are_left_alone() -> None:
    for name in ("pod-create-spark-driver.json", "pod-create-spark-executor.json"):
        rev = fixture(name)
        del obj_of(rev)["metadata"]["annotations"]
        res, _ = checked(rev)
        assert res.outcome == "unchanged" and not res.intents, name


def test_plain_spark_submit_pods_form_one_gang_by_application_id() -> None:
    d_res, driver = checked(fixture("pod-create-sparksubmit-driver.json"))
    e_res, executor = checked(fixture("pod-create-sparksubmit-executor.json"))
    gang = "spark-2b7e4f1a9c3d4e5f8a6b0c1d2e3f4a5b"
    assert driver["metadata"]["annotations"][GROUP] == gang
    assert executor["metadata"]["annotations"][GROUP] == gang
    (d_intent,) = d_res.intents
    (e_intent,) = e_res.intents
    assert d_intent.key == e_intent.key
    assert d_intent.body["spec"]["minMember"] == 1
    # One PodGroup, owned by the driver: the executor names it with its uid.
    assert d_intent.owner is not None and e_intent.owner is not None
    assert (d_intent.owner.kind, d_intent.owner.name) == ("Pod", driver["metadata"]["name"])
    assert e_intent.owner.name == driver["metadata"]["name"] and e_intent.owner.uid


# --- existing gangs are left alone --------------------------------------------------------

BACKENDS = ["volcano", "coscheduling", "yunikorn", "kueue"]
FOREIGN = [
    ("annotations", GROUP, "their-gang"),
    ("labels", "scheduling.x-k8s.io/pod-group", "their-gang"),
    ("labels", "applicationId", "their-app"),
    ("labels", "kueue.x-k8s.io/pod-group-name", "their-group"),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_volcano_jobs_pods_keep_their_gang_queue_and_scheduler(backend: str) -> None:
    rev = fixture("pod-create-volcano-job-worker.json")
    before = copy.deepcopy(obj_of(rev))
    res, after = checked(rev, parse_config({"backend": backend}))
    assert res.allowed and res.patch == [] and res.intents == ()
    assert after == before


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("where", "key", "value"), FOREIGN)
def test_a_pod_already_in_a_gang_keeps_it(backend: str, where: str, key: str, value: str) -> None:
    pod = copy.deepcopy(obj_of(captured("pod-create-plain-cpu.json")))
    pod["metadata"].setdefault(where, {})[key] = value
    res, after = checked(
        review(pod, namespace=pod["metadata"]["namespace"]), parse_config({"backend": backend})
    )
    assert after["metadata"][where][key] == value, "never overwritten"
    assert res.intents == ()
    # corral only adds what is missing: every key the pod had is still there, unchanged.
    for fld in ("labels", "annotations"):
        for k, v in (pod["metadata"].get(fld) or {}).items():
            assert after["metadata"][fld][k] == v


def test_skip_still_wins_over_an_existing_gang() -> None:
    rev = fixture("pod-create-volcano-job-worker.json")
    obj_of(rev)["metadata"]["annotations"]["corral.dev/skip"] = "true"
    res = admit(rev, None, WebhookConfig())
    assert res.outcome == "skipped"
    rev = fixture("sparkapp-create-pi.json")
    obj_of(rev)["metadata"]["annotations"]["corral.dev/skip"] = "true"
    res = admit(rev, None, WebhookConfig())
    assert res.outcome == "skipped" and not res.intents


# --- CronJob ----------------------------------------------------------------------------


def test_each_cronjob_run_is_its_own_gang_owned_by_its_job() -> None:
    res, patched = checked(fixture("job-create-cronjob-run.json"))
    gang = "job-nightly-eval-29412600"
    assert patched["spec"]["template"]["metadata"]["annotations"][GROUP] == gang
    (intent,) = res.intents
    assert intent.name == gang
    assert intent.owner is not None
    assert (intent.owner.kind, intent.owner.name) == ("Job", "nightly-eval-29412600")
    assert intent.body["spec"]["minMember"] == 2


# --- Argo Workflows -----------------------------------------------------------------------


def test_an_argo_step_pod_is_not_a_gang() -> None:
    rev = fixture("pod-create-argo-step.json")
    before = copy.deepcopy(obj_of(rev))
    res, after = checked(rev)
    assert res.outcome == "unchanged" and res.intents == () and after == before
    assert "step" in res.reason and "corral.dev/gang" in res.reason


def test_an_argo_template_annotated_with_a_gang_opts_its_pods_in() -> None:
    res, patched = checked(fixture("pod-create-argo-step-gang.json"))
    assert patched["metadata"]["annotations"][GROUP] == "train-pipeline-x7k2q-sweep"
    assert patched["spec"]["schedulerName"] == "volcano"
    (intent,) = res.intents
    assert intent.body["spec"]["minMember"] == 4


# --- LeaderWorkerSet ----------------------------------------------------------------------


def test_a_leaderworkerset_makes_one_gang_per_group() -> None:
    res, patched = checked(fixture("lws-create-vllm.json"))
    lwt = patched["spec"]["leaderWorkerTemplate"]
    for t in ("leaderTemplate", "workerTemplate"):
        ann = lwt[t]["metadata"]["annotations"]
        assert ann[GROUP] == "vllm"
        assert ann["corral.dev/split-by"] == "leaderworkerset.sigs.k8s.io/group-index"
    assert [i.name for i in res.intents] == ["vllm-0", "vllm-1", "vllm-2"]
    for i in res.intents:
        assert i.body["spec"]["minMember"] == 2  # size: the leader and its worker
        assert i.body["spec"]["minResources"]["nvidia.com/gpu"] == "16"
        assert i.owner is not None and i.owner.kind == "LeaderWorkerSet"


@pytest.mark.parametrize("name", ["pod-create-lws-leader.json", "pod-create-lws-worker.json"])
def test_a_groups_pods_join_the_gang_named_after_its_leader(name: str) -> None:
    res, patched = checked(fixture(name))
    assert patched["metadata"]["annotations"][GROUP] == "vllm-1"
    assert res.intents == ()


def test_a_leaderworkerset_without_a_leader_template_still_splits_by_group() -> None:
    rev = fixture("lws-create-vllm.json")
    del obj_of(rev)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    res, _ = checked(rev)
    assert [i.body["spec"]["minMember"] for i in res.intents] == [2, 2, 2]


# --- scaling ------------------------------------------------------------------------------


def test_scaling_a_job_updates_its_podgroup() -> None:
    rev = fixture("job-update-parallelism.json")
    res, _ = checked(rev)
    assert res.allowed and res.patch == []  # a Job's template cannot change
    (intent,) = res.intents
    assert intent.update and intent.name == "job-sweep"
    assert intent.owner is not None and intent.owner.uid == obj_of(rev)["metadata"]["uid"]
    assert intent.body["spec"]["minMember"] == 4
    assert intent.body["spec"]["minResources"]["nvidia.com/gpu"] == "4"


def test_a_percentage_follows_the_new_size() -> None:
    rev = fixture("job-update-parallelism.json")
    for o in (obj_of(rev), rev["request"]["oldObject"]):
        o["spec"]["template"]["metadata"]["annotations"]["corral.dev/min-available"] = "50%"
    res, _ = checked(rev)
    assert res.intents[0].body["spec"]["minMember"] == 2  # 50% of 4


def test_an_elastic_pytorchjob_uses_its_minimum() -> None:
    res, _ = checked(fixture("pytorchjob-update-elastic.json"))
    (intent,) = res.intents
    assert intent.update and intent.body["spec"]["minMember"] == 2
    assert intent.body["spec"]["minResources"]["nvidia.com/gpu"] == "2"


def test_an_update_that_changes_no_count_does_nothing() -> None:
    rev = fixture("job-update-parallelism.json")
    rev["request"]["oldObject"] = copy.deepcopy(obj_of(rev))
    obj_of(rev)["metadata"]["labels"]["touched"] = "yes"
    res, _ = checked(rev)
    assert res.intents == () and res.patch == []


def test_updates_of_a_job_that_is_not_a_gang_do_nothing() -> None:
    """The real API server's Job UPDATE reviews (a Job made without corral)."""
    rec = json.loads((RECORDINGS / "admission-reviews-update.json").read_text())
    reviews = [
        o["object"]
        for o in rec["observed"]
        if o.get("what") == "AdmissionReview" and o["object"]["request"]["operation"] == "UPDATE"
    ]
    assert any(r["request"]["kind"]["kind"] == "Job" for r in reviews)
    for r in reviews:
        res = admit(r, None, WebhookConfig())
        assert res.allowed and res.patch == [] and res.intents == ()


def test_a_scaled_lws_gets_podgroups_for_new_groups() -> None:
    rev = fixture("lws-create-vllm.json")
    res, patched = checked(rev)
    old = copy.deepcopy(patched)
    old["metadata"]["uid"] = "8b9c0d1e-2f3a-4b4c-5d6e-7f8a9b0c1d2e"
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 4
    upd = review(new, group="leaderworkerset.x-k8s.io", version="v1", operation="UPDATE")
    upd["request"]["oldObject"] = old
    res = admit(upd, None, WebhookConfig())
    assert [i.name for i in res.intents] == ["vllm-0", "vllm-1", "vllm-2", "vllm-3"]
    assert all(i.update for i in res.intents)


def test_an_update_with_a_bad_value_is_refused() -> None:
    rev = fixture("job-update-parallelism.json")
    obj_of(rev)["spec"]["template"]["metadata"]["annotations"]["corral.dev/min-available"] = "x"
    res = admit(rev, None, WebhookConfig())
    assert (
        not res.allowed
        and "corral.dev/min-available" in res.review["response"]["status"]["message"]
    )


# --- Kueue --------------------------------------------------------------------------------


def test_kueue_warns_about_a_minimum_it_cannot_say() -> None:
    job = fixture("job-create-podfailurepolicy.json")
    obj_of(job)["spec"]["template"]["metadata"]["annotations"] = {"corral.dev/min-available": "1"}
    res, _ = checked(job, parse_config({"backend": "kueue"}))
    (warning,) = [w for w in res.warnings if "Kueue" in w]
    assert 'corral.dev/min-available "1"' in warning and "whole" in warning
    res, _ = checked(fixture("sparkapp-create-pi.json"), parse_config({"backend": "kueue"}))
    assert any("minMember" in w and "Kueue" in w for w in res.warnings)
    res, _ = checked(fixture("job-create-cronjob-run.json"), parse_config({"backend": "kueue"}))
    assert not any("Kueue" in w for w in res.warnings)  # the whole gang: nothing lost


# --- podFailurePolicy ---------------------------------------------------------------------


def test_a_jobs_own_rules_come_after_the_disruption_rule() -> None:
    _, patched = checked(fixture("job-create-podfailurepolicy.json"))
    rules = patched["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == DISRUPTION_RULE
    assert rules[1] == {
        "action": "FailJob",
        "onExitCodes": {"containerName": "train", "operator": "In", "values": [42]},
    }


def test_a_job_without_a_policy_gets_one() -> None:
    _, patched = checked(fixture("job-create-cronjob-run.json"))
    assert patched["spec"]["podFailurePolicy"] == {"rules": [DISRUPTION_RULE]}


def test_only_jobs_whose_pods_never_restart_get_the_rule() -> None:
    rev = fixture("job-create-cronjob-run.json")
    obj_of(rev)["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    _, patched = checked(rev)
    assert "podFailurePolicy" not in patched["spec"]


def test_the_rule_can_be_turned_off() -> None:
    _, patched = checked(
        fixture("job-create-cronjob-run.json"), parse_config({"jobsIgnoreDisruptions": False})
    )
    assert "podFailurePolicy" not in patched["spec"]


def test_an_update_never_adds_the_rule() -> None:
    rev = fixture("job-update-parallelism.json")
    for o in (obj_of(rev), rev["request"]["oldObject"]):
        del o["spec"]["podFailurePolicy"]
    res, patched = checked(rev)
    assert res.patch == [] and "podFailurePolicy" not in patched["spec"]


def test_a_user_rule_that_already_ignores_disruptions_first_is_enough() -> None:
    rev = fixture("job-create-podfailurepolicy.json")
    user = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
    obj_of(rev)["spec"]["podFailurePolicy"]["rules"].insert(0, user)
    _, patched = checked(rev)
    assert patched["spec"]["podFailurePolicy"] == obj_of(rev)["spec"]["podFailurePolicy"]


def test_a_user_rule_after_an_exit_code_rule_is_not_enough() -> None:
    """An evicted pod's exit code (143 after SIGTERM) may match the exit-code rule first."""
    rev = fixture("job-create-podfailurepolicy.json")
    user = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
    obj_of(rev)["spec"]["podFailurePolicy"]["rules"].append(user)
    _, patched = checked(rev)
    assert patched["spec"]["podFailurePolicy"]["rules"][0] == DISRUPTION_RULE
    assert (
        patched["spec"]["podFailurePolicy"]["rules"][1:]
        == obj_of(rev)["spec"]["podFailurePolicy"]["rules"]
    )


def test_a_full_policy_gets_a_warning_instead() -> None:
    rev = fixture("job-create-podfailurepolicy.json")
    rule = obj_of(rev)["spec"]["podFailurePolicy"]["rules"][0]
    obj_of(rev)["spec"]["podFailurePolicy"]["rules"] = [rule] * MAX_RULES
    res, patched = checked(rev)
    assert len(patched["spec"]["podFailurePolicy"]["rules"]) == MAX_RULES
    assert any("podFailurePolicy" in w and "backoffLimit" in w for w in res.warnings)


_RULE = st.fixed_dictionaries(
    {
        "action": st.sampled_from(["FailJob", "Ignore", "Count"]),
        "onPodConditions": st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["DisruptionTarget", "ConfigIssue"])},
                optional={"status": st.sampled_from(["True", "False"])},
            ),
            min_size=1,
            max_size=2,
        ),
    }
)


@settings(max_examples=60, deadline=None)
@given(rules=st.lists(_RULE, max_size=MAX_RULES + 2))
def test_the_rule_is_added_once_before_the_users(rules: list[dict[str, Any]]) -> None:
    rev = fixture("job-create-podfailurepolicy.json")
    obj_of(rev)["spec"]["podFailurePolicy"]["rules"] = copy.deepcopy(rules)
    _, patched = checked(rev)  # a second pass adds nothing
    got = patched["spec"]["podFailurePolicy"]["rules"]
    # the first rule an evicted pod matches decides (condition rules only here)
    first = next(
        (
            r
            for r in rules
            if any(
                c["type"] == "DisruptionTarget" and c.get("status", "True") == "True"
                for c in r["onPodConditions"]
            )
        ),
        None,
    )
    already = first is not None and first["action"] == "Ignore"
    if already or len(rules) >= MAX_RULES:
        assert got == rules
    else:
        assert got == [DISRUPTION_RULE, *rules]
    assert sum(r == DISRUPTION_RULE for r in got) <= 1 + sum(r == DISRUPTION_RULE for r in rules)
    again = admit(with_object(rev, patched), None, WebhookConfig())
    assert again.patch == []
