"""admit() on the captured fixtures and on hand-built pods: the default (Volcano)
dialect, skips, dry runs, consistency of controller-made pods, and the envelope."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.builders.reviews import (
    annotations,
    bare_pod,
    checked,
    fixture,
    review,
    with_object,
)
from webhook.admission.entry import admit
from webhook.admission.review import ReviewError
from webhook.config import WebhookConfig

GROUP = "scheduling.k8s.io/group-name"
QUEUE = "scheduling.volcano.sh/queue-name"
SLA = "volcano.sh/sla-waiting-time"


def test_job_fixture_gets_gang_keys_on_its_template() -> None:
    res, job = checked(fixture("job-create-mpi-train.json"))
    assert res.outcome == "patched"
    tmpl = job["spec"]["template"]
    assert tmpl["spec"]["schedulerName"] == "volcano"
    ann = tmpl["metadata"]["annotations"]
    assert ann[GROUP] == "job-mpi-train"
    assert ann[QUEUE] == "ai-team"
    # the user's keys stay as they were
    assert ann["corral.dev/min-available"] == "3"
    # schedulerName was defaulted by the API server: the patch replaces it
    assert {
        "op": "replace",
        "path": "/spec/template/spec/schedulerName",
        "value": "volcano",
    } in res.patch
    assert any(op["path"].endswith("scheduling.k8s.io~1group-name") for op in res.patch)
    # the Job itself is not otherwise touched
    assert job["metadata"] == fixture("job-create-mpi-train.json")["request"]["object"]["metadata"]


def test_job_fixture_podgroup_intent() -> None:
    res, _ = checked(fixture("job-create-mpi-train.json"))
    (intent,) = res.intents
    assert intent.api_version == "scheduling.volcano.sh/v1beta1"
    assert (intent.namespace, intent.name) == ("ml", "job-mpi-train")
    spec = intent.body["spec"]
    assert spec["minMember"] == 3
    assert spec["queue"] == "ai-team"
    # effective request per pod: max(8 + 0.1 CPU of the two containers, 2 of the init
    # container) = 8.1 CPU, 64Gi + 128Mi; three pods are the minimum
    assert spec["minResources"] == {"cpu": "24300m", "memory": "196992Mi", "nvidia.com/gpu": "3"}
    assert intent.owner is not None
    assert (intent.owner.api_version, intent.owner.kind, intent.owner.name) == (
        "batch/v1",
        "Job",
        "mpi-train",
    )
    assert intent.owner.uid == ""  # not set yet at CREATE; the reconciler resolves it
    body = intent.render(intent.owner)
    assert "ownerReferences" not in body["metadata"]


def test_pod_made_by_job_before_the_template_had_keys() -> None:
    # The captured pod's template carried only corral keys: the pod joins the gang its
    # Job would have had, with the owner's uid known from its ownerReferences.
    res, pod = checked(fixture("pod-create-from-job-mpi-train.json"))
    ann = annotations(pod)
    assert ann[GROUP] == "job-mpi-train"
    assert ann[QUEUE] == "ai-team"
    assert pod["spec"]["schedulerName"] == "volcano"
    (intent,) = res.intents
    assert intent.body["spec"]["minMember"] == 3
    assert intent.owner is not None and intent.owner.uid == "0bc7ef1a-72f8-41ee-8542-7c51e3afd7e4"
    rendered = intent.render(intent.owner)
    assert rendered["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "mpi-train",
            "uid": "0bc7ef1a-72f8-41ee-8542-7c51e3afd7e4",
        }
    ]


def test_pod_of_an_ungated_job_with_a_percentage_runs_with_a_warning() -> None:
    # The same pod, its template asking for 80%: the pod cannot know the Job's size, and
    # refusing it would make the Job fail to create pods for good.
    rev = fixture("pod-create-from-job-mpi-train.json")
    pod = copy.deepcopy(rev["request"]["object"])
    pod["metadata"]["annotations"]["corral.dev/min-available"] = "80%"
    res, patched = checked(with_object(rev, pod))
    response = res.review["response"]
    assert response["allowed"] is True
    assert res.patch == [] and res.intents == ()
    (warning,) = response["warnings"]
    assert '"80%" left alone' in warning and "Job mpi-train" in warning
    assert GROUP not in annotations(patched)


def test_pod_from_mutated_template_is_made_consistent() -> None:
    # The real flow: the Job was mutated, so its pods carry the gang keys already.
    _, job = checked(fixture("job-create-mpi-train.json"))
    rev = fixture("pod-create-from-job-mpi-train.json")
    pod = copy.deepcopy(rev["request"]["object"])
    pod["metadata"]["annotations"].update(job["spec"]["template"]["metadata"]["annotations"])
    res, patched = checked(with_object(rev, pod))
    # only the schedulerName was defaulted since: that is all that changes
    assert res.patch == [{"op": "replace", "path": "/spec/schedulerName", "value": "volcano"}]
    assert res.intents == ()
    (hint,) = res.hints
    assert hint.name == "job-mpi-train"
    assert hint.owner.uid == "0bc7ef1a-72f8-41ee-8542-7c51e3afd7e4"
    assert annotations(patched)[GROUP] == "job-mpi-train"


def test_template_keys_win_over_user_keys_on_a_member_pod() -> None:
    rev = fixture("pod-create-from-job-mpi-train.json")
    pod = copy.deepcopy(rev["request"]["object"])
    pod["metadata"]["annotations"].update({GROUP: "job-mpi-train", QUEUE: "research"})
    _, patched = checked(with_object(rev, pod))
    assert annotations(patched)[QUEUE] == "research"  # the workload's decision stands


def test_bare_pod_with_gang_annotation() -> None:
    res, pod = checked(fixture("pod-create-llm-worker-0.json"))
    ann = annotations(pod)
    assert ann[GROUP] == "llm"
    assert ann[QUEUE] == "default"
    assert pod["spec"]["schedulerName"] == "volcano"
    (intent,) = res.intents
    assert intent.name == "llm"
    assert intent.body["spec"]["minMember"] == 4
    assert intent.body["spec"]["minResources"] == {
        "cpu": "48",
        "memory": "384Gi",
        "nvidia.com/gpu": "8",
    }
    assert intent.owner is not None
    assert (intent.owner.kind, intent.owner.name) == ("Pod", "llm-worker-0")


def test_plain_pod_becomes_a_single_pod_gang() -> None:
    res, pod = checked(fixture("pod-create-plain-cpu.json"))
    assert annotations(pod)[GROUP] == "plain-cpu"
    (intent,) = res.intents
    assert intent.body["spec"]["minMember"] == 1
    assert "minResources" not in intent.body["spec"]  # no requests at all


def test_plain_pod_left_alone_when_configured() -> None:
    cfg = WebhookConfig(non_gang_pods="ignore")
    res, pod = checked(fixture("pod-create-plain-cpu.json"), cfg)
    assert res.outcome == "unchanged" and res.patch == [] and res.intents == ()
    assert pod == fixture("pod-create-plain-cpu.json")["request"]["object"]


def test_dry_run_with_a_bad_value_is_refused_and_creates_nothing() -> None:
    res, _ = checked(fixture("pod-create-dry-gpu-dryrun.json"))
    resp = res.review["response"]
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 400
    msg = resp["status"]["message"]
    assert "corral.dev/min-available" in msg and '"abc"' in msg and "allowed:" in msg
    assert res.intents == ()


def test_dry_run_patches_but_wants_no_podgroup() -> None:
    rev = fixture("pod-create-llm-worker-0.json")
    rev["request"]["dryRun"] = True
    res, pod = checked(rev)
    assert annotations(pod)[GROUP] == "llm"
    assert res.dry_run and res.intents == () and res.hints == ()


@pytest.mark.parametrize("namespace", ["kube-system", "corral-system"])
def test_excluded_and_own_namespace_pass_unchanged(namespace: str) -> None:
    rev = fixture("pod-create-llm-worker-0.json")
    rev["request"]["namespace"] = namespace
    res = admit(rev, None, WebhookConfig())
    assert res.outcome == "skipped"
    assert res.review["response"] == {"uid": rev["request"]["uid"], "allowed": True}


def test_configured_exclusions() -> None:
    cfg = WebhookConfig(excluded_namespaces=("batch-legacy",), own_namespace="gangs")
    for ns in ("batch-legacy", "gangs"):
        rev = fixture("pod-create-plain-cpu.json")
        rev["request"]["namespace"] = ns
        assert admit(rev, None, cfg).outcome == "skipped"
    rev = fixture("pod-create-plain-cpu.json")
    rev["request"]["namespace"] = "kube-system"
    assert admit(rev, None, cfg).outcome == "patched"  # no longer excluded by this config


@pytest.mark.parametrize("where", ["annotations", "labels"])
def test_skip_key(where: str) -> None:
    rev = fixture("pod-create-llm-worker-0.json")
    rev["request"]["object"]["metadata"].setdefault(where, {})["corral.dev/skip"] = "true"
    res = admit(rev, None, WebhookConfig())
    assert res.outcome == "skipped" and res.patch == []


def test_skip_false_is_not_a_skip() -> None:
    rev = fixture("pod-create-llm-worker-0.json")
    rev["request"]["object"]["metadata"]["annotations"]["corral.dev/skip"] = "false"
    assert admit(rev, None, WebhookConfig()).outcome == "patched"


def test_skipped_job_leaves_its_pods_alone() -> None:
    rev = fixture("pod-create-from-job-mpi-train.json")
    pod = copy.deepcopy(rev["request"]["object"])
    del pod["metadata"]["annotations"]  # a Job without corral keys, never mutated
    res = admit(with_object(rev, pod), None, WebhookConfig())
    assert res.outcome == "unchanged" and res.patch == []


def test_pod_without_annotations_or_labels() -> None:
    pod = bare_pod("solo")
    assert "annotations" not in pod["metadata"]
    res, patched = checked(review(pod))
    # the whole annotations map is added in one operation
    adds = [op for op in res.patch if op["path"] == "/metadata/annotations"]
    assert len(adds) == 1
    assert adds[0]["value"] == {GROUP: "solo", QUEUE: "default"}
    assert patched["metadata"]["annotations"][GROUP] == "solo"


def test_pod_with_null_metadata_maps() -> None:
    pod = bare_pod("solo")
    pod["metadata"]["annotations"] = None
    pod["metadata"]["labels"] = None
    _, patched = checked(review(pod))
    assert patched["metadata"]["annotations"][GROUP] == "solo"


def test_pod_without_metadata_name_uses_generate_name_and_request_uid() -> None:
    pod = bare_pod("x", {"corral.dev/min-available": "2"})
    del pod["metadata"]["name"]
    pod["metadata"]["generateName"] = "worker-"
    rev = review(pod)
    res, patched = checked(rev)
    name = annotations(patched)[GROUP]
    assert name == f"worker-{rev['request']['uid'][:8]}"
    (intent,) = res.intents
    assert intent.owner is None  # nothing to find it by; the PodGroup is unowned


def test_pod_of_a_non_workload_controller_joins_its_owners_gang() -> None:
    pod = bare_pod("web-abc12")
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web-5d8f",
            "uid": "u-1",
            "controller": True,
        }
    ]
    res, patched = checked(review(pod))
    assert annotations(patched)[GROUP] == "replicaset-web-5d8f"
    (intent,) = res.intents
    assert intent.body["spec"]["minMember"] == 1
    assert intent.owner is not None and intent.owner.uid == "u-1"


def test_gang_timeout_and_default_timeout() -> None:
    pod = bare_pod("t", {"corral.dev/gang": "g", "corral.dev/gang-timeout": "90m"})
    res, patched = checked(review(pod))
    assert annotations(patched)[SLA] == "1h30m"
    assert res.intents[0].body["metadata"]["annotations"] == {SLA: "1h30m"}
    cfg = WebhookConfig(gang_timeout="30m")
    _, patched = checked(review(bare_pod("u", {"corral.dev/gang": "g"})), cfg)
    assert annotations(patched)[SLA] == "30m"


def test_namespace_queue_map() -> None:
    cfg = WebhookConfig(namespace_queues={"ml": "ml-queue"}, default_queue="shared")
    _, patched = checked(review(bare_pod("a"), namespace="ml"), cfg)
    assert annotations(patched)[QUEUE] == "ml-queue"
    _, patched = checked(review(bare_pod("b"), namespace="web"), cfg)
    assert annotations(patched)[QUEUE] == "shared"
    pod = bare_pod("c", {"corral.dev/queue": "mine"})
    _, patched = checked(review(pod, namespace="ml"), cfg)
    assert annotations(patched)[QUEUE] == "mine"


def test_scheduler_name_from_config_and_added_when_absent() -> None:
    pod = bare_pod("a")
    del pod["spec"]["schedulerName"]
    res, patched = checked(review(pod), WebhookConfig(scheduler_name="volcano-gpu"))
    assert {"op": "add", "path": "/spec/schedulerName", "value": "volcano-gpu"} in res.patch
    assert patched["spec"]["schedulerName"] == "volcano-gpu"


def test_node_pool_pinning_on_pods() -> None:
    cfg = WebhookConfig.model_validate(
        {"nodePool": {"key": "scheduler.volcano.sh/enable", "value": "true"}}
    )
    want = {"key": "scheduler.volcano.sh/enable", "operator": "In", "values": ["true"]}
    _, patched = checked(review(bare_pod("a")), cfg)
    terms = patched["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [want]}]
    # existing terms are ORed: the pool requirement is ANDed into each of them
    pod = bare_pod("b")
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                ]
            }
        },
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
    }
    _, patched = checked(review(pod), cfg)
    terms = patched["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert len(terms) == 2 and all(want in t["matchExpressions"] for t in terms)
    assert terms[0]["matchExpressions"][0]["key"] == "zone"
    assert "podAntiAffinity" in patched["spec"]["affinity"]


@pytest.mark.parametrize("operation", ["UPDATE", "DELETE", "CONNECT"])
def test_other_operations_pass(operation: str) -> None:
    rev = fixture("pod-create-llm-worker-0.json")
    rev["request"]["operation"] = operation
    res = admit(rev, None, WebhookConfig())
    assert res.outcome == "unchanged" and res.review["response"]["allowed"]


def test_unknown_object_kind_passes_unchanged() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}}
    res = admit(review(obj, group="apps"), None, WebhookConfig())
    assert res.outcome == "unhandled" and res.kind == "other"
    assert res.review["response"]["allowed"] is True


def test_response_echoes_uid_and_api_version() -> None:
    rev = fixture("pod-create-plain-cpu.json")
    res = admit(rev, None, WebhookConfig())
    assert res.review["apiVersion"] == rev["apiVersion"]
    assert res.review["response"]["uid"] == "8b2a6c10-9d38-4829-b1ef-c5c372b85459"


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda r: r.update(kind="Pod"), "expected AdmissionReview"),
        (lambda r: r.update(apiVersion="admission.k8s.io/v1beta1"), "only admission.k8s.io/v1"),
        (lambda r: r.pop("request"), "request"),
        (lambda r: r["request"].pop("uid"), "request.uid"),
        (lambda r: r["request"].update(uid=""), "must not be empty"),
        (lambda r: r["request"].update(kind="Pod"), "request.kind"),
        (lambda r: r["request"].update(object=[1, 2]), "request.object"),
        (lambda r: r["request"].update(dryRun="yes"), "dryRun"),
        (lambda r: r["request"]["object"].update(metadata="x"), "metadata"),
        (lambda r: r["request"].update(object=None), "missing on a CREATE"),
    ],
)
def test_malformed_reviews_raise_review_error(mutate: Any, fragment: str) -> None:
    rev = fixture("pod-create-plain-cpu.json")
    mutate(rev)
    with pytest.raises(ReviewError, match=fragment.replace(".", r"\.")):
        admit(rev, None, WebhookConfig())


def test_not_an_object() -> None:
    for junk in (None, [], "x", 3):
        with pytest.raises(ReviewError):
            admit(junk, None, WebhookConfig())


def test_a_pod_that_chose_another_scheduler_is_left_alone() -> None:
    pod = bare_pod("a", {"corral.dev/gang": "g"})
    pod["spec"]["schedulerName"] = "my-scheduler"
    res = admit(review(pod), None, WebhookConfig())
    assert res.outcome == "unchanged" and "my-scheduler" in res.reason
    # already ours, or the API server's default: taken
    for name in ("volcano", "default-scheduler", ""):
        pod["spec"]["schedulerName"] = name
        assert admit(review(pod), None, WebhookConfig()).review["response"]["allowed"]
        assert annotations(checked(review(pod))[1])[GROUP] == "g"


def test_a_workload_whose_template_chose_another_scheduler_is_left_alone() -> None:
    rev = fixture("job-create-mpi-train.json")
    rev["request"]["object"]["spec"]["template"]["spec"]["schedulerName"] = "kai-scheduler"
    res = admit(rev, None, WebhookConfig())
    assert res.outcome == "unchanged" and res.intents == ()


def test_member_pods_do_not_repeat_warnings() -> None:
    from webhook.config import parse_config

    cfg = parse_config({"backend": "coscheduling"})
    pod = bare_pod("a", {"corral.dev/queue": "q"})
    pod["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "job-x"}
    res, _ = checked(review(pod), cfg)
    assert res.warnings == ()
    res, _ = checked(review(bare_pod("b", {"corral.dev/queue": "q"})), cfg)
    assert len(res.warnings) == 1
