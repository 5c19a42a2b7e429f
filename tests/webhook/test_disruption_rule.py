"""The podFailurePolicy rule that keeps an eviction from failing a Job, as the webhook
writes it and as the descheduler reads it: one answer (``ignores_disruption``), and an
object the API server accepts on every Kubernetes release of the support matrix.

The object the webhook sees is the one the in-memory API server makes of the user's Job
at that release (defaulted: podReplacementPolicy TerminatingOrFailed on 1.29+); its
patch is applied and defaulted again as the dispatcher does, then validated as stored.
Whether an evicted pod is ignored is checked against the Job controller model's own
first-match rule reading (``tests/controllers/job.py``), not against the function
under test.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from gangplace.engine.owners import workload_from_json
from gangplace.engine.quirks.job_disruption import DISRUPTION_RULE, MAX_RULES
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders.reviews import checked, review
from tests.controllers.job import match_pod_failure_policy
from tests.kubeapi import KUBE_VERSIONS, ApiStatusError, ApiStore, Release, Versions
from tests.kubeapi import objects as o
from tests.kubeapi.defaults import redefault
from webhook.config import WebhookConfig

Json = dict[str, Any]
NS = "ml"
FAIL_ON_ANY_EXIT = {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}}
# the rule as the API server stores it (onExitCodes null)
STORED_RULE = {**DISRUPTION_RULE, "onExitCodes": None}
IGNORE_EVICTION = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}


def user_job(rules: list[Json] | None, restart: str = "Never", **spec: Any) -> Json:
    job: Json = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": NS},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": restart,
                    "containers": [{"name": "train", "image": "busybox"}],
                }
            },
            **spec,
        },
    }
    if rules is not None:
        job["spec"]["podFailurePolicy"] = {"rules": copy.deepcopy(rules)}
    return job


_STORES: dict[Release, ApiStore] = {}


def store_at(release: Release) -> ApiStore:
    if release not in _STORES:
        store = ApiStore(versions=Versions.of(kube=str(release)))
        store.load([o.namespace(NS)])
        _STORES[release] = store
    return _STORES[release]


def through_admission(
    job: Json, release: Release, config: WebhookConfig | None = None
) -> tuple[Json, list[str]]:
    """The Job as stored at ``release`` after corral's webhook (422 raises), and the
    webhook's warnings."""
    store = store_at(release)
    jobs = store.resource("jobs", "batch")
    seen = store.create(jobs, NS, job, dry_run=True)  # decoded and defaulted
    for k in ("uid", "creationTimestamp", "generation"):
        seen["metadata"].pop(k, None)
    seen["spec"].pop("selector", None)
    seen.pop("status", None)
    result, _ = checked(review(seen, group="batch", kind="Job"), config)
    patched: Json = jsonpatch.apply_patch(seen, result.patch) if result.patch else seen
    redefault("batch", "jobs", patched, release)
    stored = store.create(jobs, NS, patched, dry_run=True)
    return stored, list(result.warnings)


def evicted_pod(exit_code: int) -> Json:
    """A pod of the Job that an eviction ended: DisruptionTarget, then SIGTERM's exit."""
    return {
        "metadata": {"name": "train-x"},
        "status": {
            "phase": "Failed",
            "conditions": [
                {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
            ],
            "containerStatuses": [
                {"name": "train", "state": {"terminated": {"exitCode": exit_code}}}
            ],
        },
    }


def evictions_ignored(job: Json) -> bool:
    """The Job controller model ignores an evicted pod, whatever its exit code."""
    policy = job["spec"].get("podFailurePolicy") or {}
    return all(
        (match_pod_failure_policy(policy, evicted_pod(code)) or ("", 0))[0] == "Ignore"
        for code in (143, 137, 1, 2, 42, 255)
    )


@pytest.mark.parametrize("release", KUBE_VERSIONS, ids=str)
def test_an_exit_code_rule_before_the_users_ignore_rule_gets_the_rule_first(
    release: Release,
) -> None:
    """The issue's Job: its own Ignore rule comes after a FailJob rule that an evicted
    pod's exit 143 matches first. The webhook puts the rule first; the descheduler reads
    the user's Job as not protected and the stored one as protected."""
    job = user_job([FAIL_ON_ANY_EXIT, IGNORE_EVICTION])
    assert not evictions_ignored(job)
    assert not workload_from_json(job).ignores_disruption
    stored, warnings = through_admission(job, release)
    rules = stored["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == STORED_RULE
    assert rules[1]["action"] == "FailJob" and rules[2]["action"] == "Ignore"
    assert evictions_ignored(stored) and workload_from_json(stored).ignores_disruption
    assert warnings == []


@pytest.mark.parametrize("release", KUBE_VERSIONS, ids=str)
def test_a_job_without_rules_gets_the_rule_and_the_replacement_policy_it_needs(
    release: Release,
) -> None:
    stored, _ = through_admission(user_job(None), release)
    assert stored["spec"]["podFailurePolicy"] == {"rules": [STORED_RULE]}
    if release.at_least("1.29"):
        assert stored["spec"]["podReplacementPolicy"] == "Failed"
    else:
        assert "podReplacementPolicy" not in stored["spec"]


@pytest.mark.parametrize("release", KUBE_VERSIONS, ids=str)
def test_a_jobs_own_ignore_rule_first_is_enough(release: Release) -> None:
    job = user_job([IGNORE_EVICTION, FAIL_ON_ANY_EXIT])
    stored, _ = through_admission(job, release)
    assert len(stored["spec"]["podFailurePolicy"]["rules"]) == 2
    assert evictions_ignored(stored) and workload_from_json(stored).ignores_disruption


@pytest.mark.parametrize("release", KUBE_VERSIONS, ids=str)
def test_on_failure_jobs_and_full_policies_are_never_refused(release: Release) -> None:
    stored, _ = through_admission(user_job(None, restart="OnFailure"), release)
    assert "podFailurePolicy" not in stored["spec"]
    full = [
        {"action": "Count", "onExitCodes": {"operator": "In", "values": [i]}}
        for i in range(1, MAX_RULES + 1)
    ]
    stored, warnings = through_admission(user_job(full), release)
    assert len(stored["spec"]["podFailurePolicy"]["rules"]) == MAX_RULES
    assert any("20 rules" in w and "backoffLimit" in w for w in warnings)
    assert not workload_from_json(stored).ignores_disruption


def test_a_replacement_policy_the_server_refuses_is_left_to_it() -> None:
    """A user's TerminatingOrFailed next to their own podFailurePolicy is refused by the
    API server whatever corral does: corral adds nothing, and the server names the field."""
    job = user_job([FAIL_ON_ANY_EXIT], podReplacementPolicy="TerminatingOrFailed")
    with pytest.raises(ApiStatusError) as e:
        through_admission(job, Release(1, 30))
    assert e.value.code == 422
    assert (
        'spec.podReplacementPolicy: Unsupported value: "TerminatingOrFailed": '
        'supported values: "Failed"' in e.value.message
    )


_CONDITION = st.fixed_dictionaries(
    {"type": st.sampled_from(["DisruptionTarget", "ConfigIssue", "example.com/Custom"])},
    optional={"status": st.sampled_from(["True", "False", "Unknown"])},
)
_BY_CONDITION = st.fixed_dictionaries(
    {
        "action": st.sampled_from(["FailJob", "Ignore", "Count"]),
        "onPodConditions": st.lists(_CONDITION, min_size=1, max_size=2),
    }
)
_BY_EXIT_CODE = st.builds(
    lambda action, op, codes, named: {
        "action": action,
        "onExitCodes": {
            **({"containerName": "train"} if named else {}),
            "operator": op,
            "values": sorted(c for c in codes if op == "NotIn" or c != 0) or [1],
        },
    },
    st.sampled_from(["FailJob", "Ignore", "Count"]),
    st.sampled_from(["In", "NotIn"]),
    st.sets(st.sampled_from([0, 1, 2, 42, 137, 143]), min_size=1, max_size=3),
    st.booleans(),
)


@settings(max_examples=40, deadline=None)
@given(
    rules=st.one_of(
        st.none(), st.lists(st.one_of(_BY_CONDITION, _BY_EXIT_CODE), max_size=MAX_RULES + 1)
    ),
    replacement=st.sampled_from([None, "Failed", "TerminatingOrFailed"]),
)
def test_webhook_and_descheduler_agree_and_every_release_accepts(
    rules: list[Json] | None, replacement: str | None
) -> None:
    """For any valid Job: where the user's Job is accepted, the webhook's is accepted
    too at every release; the descheduler reads the stored Job as protected exactly when
    the controller model ignores its evicted pods; the webhook leaves a Job whose rules
    already protect it as it is, and protects every other one it has room for."""
    extra = {} if replacement is None else {"podReplacementPolicy": replacement}
    job = user_job(rules, **extra)
    n = len(rules or [])
    for release in KUBE_VERSIONS:
        jobs = store_at(release).resource("jobs", "batch")
        try:
            store_at(release).create(jobs, NS, job, dry_run=True)
        except ApiStatusError:
            # refused as the user wrote it: more than 20 rules, or their own
            # TerminatingOrFailed next to their own rules (1.29+)
            assert n > MAX_RULES or (
                rules is not None
                and replacement == "TerminatingOrFailed"
                and release.at_least("1.29")
            )
            continue
        stored, warnings = through_admission(job, release)
        protected = workload_from_json(stored).ignores_disruption
        assert protected == evictions_ignored(stored), (release, stored["spec"]["podFailurePolicy"])
        if workload_from_json(job).ignores_disruption:
            assert len(stored["spec"]["podFailurePolicy"]["rules"]) == n  # left as it is
            assert protected
        elif n < MAX_RULES:
            assert protected, (release, stored["spec"]["podFailurePolicy"])
            assert stored["spec"]["podFailurePolicy"]["rules"][0] == STORED_RULE
        else:
            assert not protected and warnings
