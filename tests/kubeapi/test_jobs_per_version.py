"""batch/v1 Jobs as the in-memory API server plays them per Kubernetes release
(defaulting, gated fields, validation on create and update, with the real server's
messages), the Job controller model leaving another controller's Job alone, and the
eviction details a descheduler meets (DisruptionTarget on any evicted pod, one budget
per pod, budgets that need a scale over Job pods)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.controllers import JobController, Rest
from tests.kubeapi import KUBE_VERSIONS, ApiServer, ApiStatusError, ApiStore, Release, Versions
from tests.kubeapi import objects as o

Json = dict[str, Any]
NS = "ml"


def store_at(kube: str) -> ApiStore:
    store = ApiStore(versions=Versions.of(kube=kube))
    store.load([o.namespace(NS)])
    return store


def job(name: str = "j", restart: str = "Never", **spec: Any) -> Json:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": restart,
                    "containers": [{"name": "train", "image": "busybox"}],
                }
            },
            **spec,
        },
    }


def create(store: ApiStore, obj: Json) -> Json:
    return store.create(store.resource("jobs", "batch"), NS, obj)


def refused(store: ApiStore, obj: Json) -> str:
    with pytest.raises(ApiStatusError) as e:
        create(store, obj)
    assert e.value.code == 422 and e.value.reason == "Invalid"
    return e.value.message


IGNORE = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}


@pytest.mark.parametrize("release", KUBE_VERSIONS, ids=str)
def test_pod_replacement_policy_is_defaulted_from_1_29(release: Release) -> None:
    store = store_at(str(release))
    plain = create(store, job("plain"))["spec"]
    with_policy = create(store, job("pfp", podFailurePolicy={"rules": [IGNORE]}))["spec"]
    chosen = create(store, job("chosen", podReplacementPolicy="Failed"))["spec"]
    if release.at_least("1.29"):
        assert plain["podReplacementPolicy"] == "TerminatingOrFailed"
        assert with_policy["podReplacementPolicy"] == "Failed"
        assert chosen["podReplacementPolicy"] == "Failed"
    else:  # alpha, off: neither defaulted nor kept
        assert "podReplacementPolicy" not in plain
        assert "podReplacementPolicy" not in with_policy
        assert "podReplacementPolicy" not in chosen
    assert with_policy["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"] == "True"


def test_terminating_or_failed_next_to_a_pod_failure_policy_is_refused_from_1_29() -> None:
    bad = job("x", podFailurePolicy={"rules": [IGNORE]}, podReplacementPolicy="TerminatingOrFailed")
    assert refused(store_at("1.29"), copy.deepcopy(bad)) == (
        'Job.batch "x" is invalid: spec.podReplacementPolicy: Unsupported value: '
        '"TerminatingOrFailed": supported values: "Failed"'
    )
    # 1.28 drops the field (the gate is off) and accepts the Job
    assert "podReplacementPolicy" not in create(store_at("1.28"), bad)["spec"]
    assert refused(store_at("1.30"), job("y", podReplacementPolicy="Sometimes")) == (
        'Job.batch "y" is invalid: spec.podReplacementPolicy: Unsupported value: "Sometimes": '
        'supported values: "Failed", "TerminatingOrFailed"'
    )


def test_pod_failure_policy_rules_are_validated() -> None:
    store = store_at("1.31")
    assert refused(store, job("a", restart="OnFailure", podFailurePolicy={"rules": [IGNORE]})) == (
        'Job.batch "a" is invalid: spec.template.spec.restartPolicy: Invalid value: '
        '"OnFailure": only "Never" is supported when podFailurePolicy is specified'
    )
    many = [
        {"action": "Count", "onExitCodes": {"operator": "In", "values": [i]}} for i in range(1, 22)
    ]
    assert "spec.podFailurePolicy.rules: Too many: 21: must have at most 20 items" in refused(
        store, job("b", podFailurePolicy={"rules": many})
    )
    both = {**IGNORE, "onExitCodes": {"operator": "In", "values": [1]}}
    assert refused(store, job("c", podFailurePolicy={"rules": [both]})).endswith(
        "spec.podFailurePolicy.rules[0]: Invalid value: specifying both OnExitCodes and "
        "OnPodConditions is not supported"
    )
    assert refused(store, job("d", podFailurePolicy={"rules": [{"action": "Ignore"}]})).endswith(
        "spec.podFailurePolicy.rules[0]: Invalid value: specifying one of OnExitCodes and "
        "OnPodConditions is required"
    )
    codes = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3, 0]}}
    msg = refused(store, job("e", podFailurePolicy={"rules": [codes]}))
    at = "spec.podFailurePolicy.rules[0].onExitCodes.values"
    assert f"{at}[1]: Invalid value: 0: must not be 0 for the In operator" in msg
    assert f"{at}: Invalid value: []int32{{3, 0}}: must be ordered" in msg
    other = {
        "action": "FailJob",
        "onExitCodes": {"containerName": "x", "operator": "NotIn", "values": [0]},
    }
    assert "must be one of the container or initContainer names in the pod template" in refused(
        store, job("f", podFailurePolicy={"rules": [other]})
    )
    assert (
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'
        in (refused(store, job("g", restart="Always")))
    )


@pytest.mark.parametrize(
    "kube,kept", [("1.29", False), ("1.30", False), ("1.32", True), ("1.37", True)]
)
def test_managed_by_exists_where_its_gate_is_on(kube: str, kept: bool) -> None:
    store = store_at(kube)
    stored = create(store, job("m", managedBy="kueue.x-k8s.io/multikueue"))["spec"]
    assert ("managedBy" in stored) is kept
    if kept:
        assert 'spec.managedBy: Invalid value: "kueue": must be a domain-prefixed path' in refused(
            store, job("bad", managedBy="kueue")
        )
        jobs = store.resource("jobs", "batch")
        with pytest.raises(ApiStatusError) as e:
            store.patch(
                jobs, NS, "m", "application/merge-patch+json", {"spec": {"managedBy": "a.io/b"}}
            )
        assert 'spec.managedBy: Invalid value: "a.io/b": field is immutable' in e.value.message


def test_scheduling_fields_change_only_while_suspended_and_never_started() -> None:
    store = store_at("1.30")
    jobs = store.resource("jobs", "batch")
    merge = "application/merge-patch+json"
    create(store, job("s", suspend=True))
    sel = {"spec": {"template": {"spec": {"nodeSelector": {"pool": "a"}}}}}
    assert store.patch(jobs, NS, "s", merge, sel)["spec"]["template"]["spec"]["nodeSelector"]
    image = {"spec": {"template": {"spec": {"containers": [{"name": "train", "image": "x"}]}}}}
    with pytest.raises(
        ApiStatusError, match=r"spec\.template: Invalid value: .*field is immutable"
    ):
        store.patch(jobs, NS, "s", merge, image)
    policy = {"spec": {"podFailurePolicy": {"rules": [IGNORE]}}}
    with pytest.raises(ApiStatusError, match=r"spec\.podFailurePolicy: Invalid value"):
        store.patch(jobs, NS, "s", merge, policy)
    # once started (status.startTime set), suspended or not, the template is fixed
    store.patch(
        jobs,
        NS,
        "s",
        merge,
        {"status": {"startTime": "2026-01-01T00:00:00Z"}},
        subresource="status",
    )
    again = {"spec": {"template": {"spec": {"nodeSelector": {"pool": "b"}}}}}
    with pytest.raises(ApiStatusError, match="field is immutable"):
        store.patch(jobs, NS, "s", merge, again)


async def test_the_job_controller_leaves_another_controllers_job_alone() -> None:
    async with ApiServer(versions=Versions.of(kube="1.32")) as api:
        api.store.load([o.namespace(NS)])
        create(api.store, job("mine", parallelism=2))
        create(api.store, job("theirs", parallelism=2, managedBy="kueue.x-k8s.io/multikueue"))
        jobs = JobController(Rest(api.url), backoff=0)
        try:
            await jobs.step()
        finally:
            await jobs.close()
        owners = [
            p["metadata"]["labels"]["job-name"]
            for p in api.store.items(api.store.resource("pods"), NS)
        ]
        assert sorted(owners) == ["mine", "mine"]
        theirs = api.store.get(api.store.resource("jobs", "batch"), NS, "theirs")
        assert theirs["status"] == {}


# --- eviction ------------------------------------------------------------------------


def evict(store: ApiStore, name: str) -> None:
    store.evict(NS, name, {"kind": "Eviction", "metadata": {"name": name}})


def disruption_target(store: ApiStore, name: str) -> Json | None:
    pod = store.find(store.resource("pods"), NS, name)
    assert pod is not None
    return next(
        (c for c in pod["status"].get("conditions") or () if c["type"] == "DisruptionTarget"), None
    )


def test_any_evicted_pod_gets_disruption_target() -> None:
    store = store_at("1.28")
    pods = store.resource("pods")
    store.load([o.pod("running", NS, node="n1")])
    pending = o.pod("pending", NS)
    pending["metadata"]["finalizers"] = ["example.com/hold"]  # kept to be looked at
    store.create(pods, NS, pending)
    evict(store, "pending")  # Pending: no budget is asked, the condition is set
    cond = disruption_target(store, "pending")
    assert cond is not None and cond["status"] == "True"
    store.delete(pods, NS, "running")  # already terminating
    evict(store, "running")
    cond = disruption_target(store, "running")
    assert cond is not None and cond["reason"] == "EvictionByEvictionAPI"
    first = cond["lastTransitionTime"]
    evict(store, "running")  # again: the condition is kept as it is
    again = disruption_target(store, "running")
    assert again is not None and again["lastTransitionTime"] == first


def test_a_pod_under_two_budgets_is_a_500_without_reason() -> None:
    store = store_at("1.28")
    pdbs = store.resource("poddisruptionbudgets", "policy")
    store.load([o.pod("p", NS, node="n1", labels={"app": "p"}, owner=("ReplicaSet", "p"))])
    for n in ("a", "b"):
        store.create(pdbs, NS, o.pdb(n, NS, match_labels={"app": "p"}, min_available=0))
    with pytest.raises(ApiStatusError) as e:
        evict(store, "p")
    assert e.value.code == 500
    assert "reason" not in e.value.body()
    assert e.value.message == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
        "not support."
    )


@pytest.mark.parametrize("budget", [{"max_unavailable": 1}, {"min_available": "50%"}])
def test_a_budget_needing_a_scale_over_job_pods_allows_nothing(budget: Json) -> None:
    """The disruption controller cannot read a Job's scale: it fails safe, and the
    eviction subresource refuses (the budget was never processed)."""
    store = store_at("1.30")
    pdbs = store.resource("poddisruptionbudgets", "policy")
    store.load(
        [
            o.pod(f"w{i}", NS, node="n1", labels={"app": "w"}, owner=("Job", "train"))
            for i in range(4)
        ]
        + [o.pod("bare", NS, node="n1", labels={"app": "b"})]
    )
    store.create(pdbs, NS, o.pdb("w", NS, match_labels={"app": "w"}, **budget))
    store.create(pdbs, NS, o.pdb("b", NS, match_labels={"app": "b"}, **budget))
    status = store.get(pdbs, NS, "w")["status"]
    assert status["disruptionsAllowed"] == 0 and "observedGeneration" not in status
    (cond,) = status["conditions"]
    assert (cond["status"], cond["reason"]) == ("False", "SyncFailed")
    assert cond["message"].startswith('found no controllers for pod "w')
    bare = store.get(pdbs, NS, "b")["status"]["conditions"][0]
    assert bare["message"] == 'found no controller ref for pod "bare"'
    with pytest.raises(ApiStatusError) as e:
        evict(store, "w0")
    assert e.value.code == 429
    # an integer minAvailable is counted on the pods alone
    store.delete(pdbs, NS, "w")
    store.create(pdbs, NS, o.pdb("w2", NS, match_labels={"app": "w"}, min_available=3))
    assert store.get(pdbs, NS, "w2")["status"]["disruptionsAllowed"] == 1
    evict(store, "w0")
