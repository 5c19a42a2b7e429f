"""The ``kubernetes`` backend (the native gang API, per served version) and the ``kai``
backend (the keys KAI-Scheduler's pod grouper reads): what admission writes on workloads,
their pods and bare pods, the gang objects it asks for, and what it refuses."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import jsonpatch
import pytest
from gangplace.kube import KubeClient
from gangplace.kube.resources import WORKLOADS

from tests.builders.reviews import annotations, bare_pod, labels, pod_template, review, with_object
from tests.kubeapi import ApiServer, ApiStore, ResourceType, Versions
from tests.kubeapi import objects as o
from webhook.admission.entry import admit
from webhook.admission.native_gangs import Served
from webhook.admission.review import AdmitResult
from webhook.config import WebhookConfig, parse_config
from webhook.podgroups.calls import live_reconciler
from webhook.served import discover, served_from

GPU = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}

V1ALPHA1 = Served(frozenset({"v1alpha1"}))
V1ALPHA2 = Served(frozenset({"v1alpha2"}), frozenset({"v1alpha2"}))
# 1.37 with only v1beta1 on: no CompositePodGroup (that is v1alpha3 only).
V1BETA1 = Served(frozenset({"v1beta1"}), frozenset({"v1beta1"}))
NATIVE = parse_config({"backend": "kubernetes"})
KAI = parse_config({"backend": "kai"})


def checked(
    rev: dict[str, Any], config: WebhookConfig, served: Served | None = None
) -> tuple[AdmitResult, dict[str, Any]]:
    """admit() with ``served``, and the object after its patch; a second pass over the
    patched object patches nothing (reinvocation)."""
    result = admit(rev, None, config, served)
    obj = rev["request"]["object"]
    if not result.review["response"]["allowed"]:
        return result, copy.deepcopy(obj)
    patched = jsonpatch.apply_patch(obj, result.patch) if result.patch else copy.deepcopy(obj)
    again = admit(with_object(rev, patched), None, config, served)
    assert again.review["response"]["allowed"]
    assert again.patch == [], f"second pass patched again: {again.patch}"
    return result, patched


def pytorchjob(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "ml", **meta},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": pod_template({"cpu": "2"})},
                "Worker": {"replicas": 3, "template": pod_template(GPU)},
            }
        },
    }


def pt_review(obj: dict[str, Any]) -> dict[str, Any]:
    return review(obj, group="kubeflow.org", version="v1")


def lws() -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm", "namespace": "ml"},
        "spec": {
            "replicas": 2,
            "leaderWorkerTemplate": {
                "size": 4,
                "leaderTemplate": pod_template({"cpu": "1"}),
                "workerTemplate": pod_template(GPU),
            },
        },
    }


def lws_review(obj: dict[str, Any]) -> dict[str, Any]:
    return review(obj, group="leaderworkerset.x-k8s.io", version="v1")


def pod_of(
    template: dict[str, Any], name: str, owner_kind: str, owner_api: str, **labels_: str
) -> dict[str, Any]:
    """A pod its controller made from ``template`` (as patched at the workload's CREATE)."""
    meta = copy.deepcopy(template.get("metadata") or {})
    meta.update(name=name, namespace="ml")
    meta.setdefault("labels", {}).update(labels_)
    meta["ownerReferences"] = [
        {"apiVersion": owner_api, "kind": owner_kind, "name": "x", "uid": "u-1", "controller": True}
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": copy.deepcopy(template["spec"]),
    }


def indexed_job(parallelism: int, completions: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {
            "completionMode": "Indexed",
            "parallelism": parallelism,
            "completions": completions,
            "template": pod_template(GPU, restartPolicy="Never"),
        },
    }


# --- kubernetes: the Workload and its PodGroups, per version ----------------------------


def test_v1alpha1_workload_and_workload_ref() -> None:
    obj = pytorchjob(annotations={"corral.dev/min-available": "3"})
    res, patched = checked(pt_review(obj), NATIVE, V1ALPHA1)
    assert res.review["response"]["allowed"]
    for role in ("Master", "Worker"):
        t = patched["spec"]["pytorchReplicaSpecs"][role]["template"]
        assert annotations(t) == {"corral.dev/native-gang": "pytorchjob-bert"}
        assert "schedulerName" not in t["spec"]  # the default scheduler's
    (workload,) = res.intents
    assert (workload.api_version, workload.plural) == ("scheduling.k8s.io/v1alpha1", "workloads")
    assert workload.body == {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": "pytorchjob-bert",
            "namespace": "ml",
            "labels": {"app.kubernetes.io/managed-by": "corral"},
        },
        "spec": {
            "controllerRef": {"apiGroup": "kubeflow.org", "kind": "PyTorchJob", "name": "bert"},
            "podGroups": [{"name": "gang", "policy": {"gang": {"minCount": 3}}}],
        },
    }
    assert workload.owner is not None and workload.owner.kind == "PyTorchJob"
    # Its pods name the Workload at CREATE.
    worker = patched["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    pod = pod_of(worker, "bert-worker-0", "PyTorchJob", "kubeflow.org/v1")
    res, p = checked(review(pod), NATIVE, V1ALPHA1)
    assert p["spec"]["workloadRef"] == {"name": "pytorchjob-bert", "podGroup": "gang"}
    assert "schedulingGroup" not in p["spec"]
    assert res.intents == ()
    assert [(h.plural, h.name) for h in res.hints] == [("workloads", "pytorchjob-bert")]


@pytest.mark.parametrize(
    ("served", "version"),
    [(V1ALPHA2, "v1alpha2"), (V1BETA1, "v1beta1"), (None, "v1alpha3"), (None, "v1beta1")],
)
def test_runtime_podgroup_and_scheduling_group(served: Served, version: str) -> None:
    if served is None:  # 1.37 with one version on and CompositePodGroup off
        served = Served(frozenset({version}), frozenset({version}))
    res, patched = checked(pt_review(pytorchjob()), NATIVE, served)
    workload, podgroup = res.intents
    api = f"scheduling.k8s.io/{version}"
    assert (workload.api_version, workload.plural) == (api, "workloads")
    # the template holds the mode its PodGroups copy: whole (1.36's string, 1.37's union)
    whole: Any = "PodGroup" if version == "v1alpha2" else {"all": {}}
    template = {"name": "gang", "schedulingPolicy": {"gang": {"minCount": 4}}}
    template["disruptionMode"] = whole
    assert workload.body["spec"]["podGroupTemplates"] == [template]
    assert (podgroup.api_version, podgroup.plural, podgroup.name) == (
        api,
        "podgroups",
        "pytorchjob-bert",
    )
    policy = {"gang": {"minCount": 4}}
    if version == "v1alpha2":
        assert podgroup.body["spec"] == {
            "podGroupTemplateRef": {
                "workload": {"workloadName": "pytorchjob-bert", "podGroupTemplateName": "gang"}
            },
            "schedulingPolicy": policy,
            "disruptionMode": "PodGroup",
        }
    else:
        assert podgroup.body["spec"] == {
            "workloadRef": {"workloadName": "pytorchjob-bert", "templateName": "gang"},
            "schedulingPolicy": policy,
            "disruptionMode": {"all": {}},
        }
    # The Workload and the PodGroup share a name, and are two objects to make.
    assert workload.key != podgroup.key
    master = patched["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    res, p = checked(
        review(pod_of(master, "bert-master-0", "PyTorchJob", "kubeflow.org/v1")), NATIVE, served
    )
    assert p["spec"]["schedulingGroup"] == {"podGroupName": "pytorchjob-bert"}
    assert "workloadRef" not in p["spec"]
    assert sorted(h.plural for h in res.hints) == ["podgroups", "workloads"]


def test_priority_class_goes_to_the_podgroup() -> None:
    obj = pytorchjob()
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["priorityClassName"] = "high"
    res, _ = checked(pt_review(obj), NATIVE, V1BETA1)
    assert res.intents[1].body["spec"]["priorityClassName"] == "high"
    # v1alpha2's PodGroup has no such field
    res, _ = checked(pt_review(obj), NATIVE, V1ALPHA2)
    assert "priorityClassName" not in res.intents[1].body["spec"]


# 1.37 with v1alpha3 and v1beta1 on, and CompositePodGroup (v1alpha3 only).
V137 = Served(
    frozenset({"v1alpha3", "v1beta1"}),
    frozenset({"v1alpha3", "v1beta1"}),
    composite_versions=frozenset({"v1alpha3"}),
)
# 1.37 with only v1alpha3 on.
V1ALPHA3 = Served(
    frozenset({"v1alpha3"}), frozenset({"v1alpha3"}), composite_versions=frozenset({"v1alpha3"})
)


@pytest.mark.parametrize(("served", "version"), [(V137, "v1beta1"), (V1ALPHA3, "v1alpha3")])
def test_137_roles_under_one_composite_podgroup(served: Served, version: str) -> None:
    """Workload and PodGroups in the preferred version, the CompositePodGroup in v1alpha3
    (the only one serving it): one stored object per kind, so the names line up."""
    obj = pytorchjob(annotations={"corral.dev/min-available": "3"})
    res, patched = checked(pt_review(obj), NATIVE, served)
    workload, composite, master, worker = res.intents
    api = f"scheduling.k8s.io/{version}"
    assert [i.api_version for i in (workload, master, worker)] == [api] * 3
    assert workload.body["spec"]["compositePodGroupTemplates"] == [
        {
            "name": "all",
            "schedulingPolicy": {"gang": {"minGroupCount": 2}},
            "podGroupTemplates": [
                {
                    "name": "master",
                    "schedulingPolicy": {"gang": {"minCount": 1}},
                    "disruptionMode": {"all": {}},
                },
                # the engine fills the minimum launcher-first: the master and 2 workers
                {
                    "name": "worker",
                    "schedulingPolicy": {"gang": {"minCount": 2}},
                    "disruptionMode": {"all": {}},
                },
            ],
        }
    ]
    assert "podGroupTemplates" not in workload.body["spec"]
    assert (composite.api_version, composite.plural, composite.name) == (
        "scheduling.k8s.io/v1alpha3",
        "compositepodgroups",
        "pytorchjob-bert",
    )
    assert composite.body["spec"] == {
        "workloadRef": {"workloadName": "pytorchjob-bert", "templateName": "all"},
        "schedulingPolicy": {"gang": {"minGroupCount": 2}},
    }
    assert [
        (pg.name, pg.body["spec"]["parentCompositePodGroupName"]) for pg in (master, worker)
    ] == [
        ("pytorchjob-bert-master", "pytorchjob-bert"),
        ("pytorchjob-bert-worker", "pytorchjob-bert"),
    ]
    assert worker.body["spec"]["workloadRef"] == {
        "workloadName": "pytorchjob-bert",
        "templateName": "worker",
    }
    # Each role's pods join their role's PodGroup.
    for role, group in (("Master", "master"), ("Worker", "worker")):
        t = patched["spec"]["pytorchReplicaSpecs"][role]["template"]
        assert annotations(t)["corral.dev/native-group"] == group
        _, p = checked(
            review(pod_of(t, f"bert-{group}-0", "PyTorchJob", "kubeflow.org/v1")), NATIVE, served
        )
        assert p["spec"]["schedulingGroup"] == {"podGroupName": f"pytorchjob-bert-{group}"}


def test_137_one_role_and_per_instance_kinds_need_no_composite() -> None:
    pod = bare_pod("a", {"corral.dev/gang": "g"})
    res, _ = checked(review(pod), NATIVE, V137)
    assert [i.plural for i in res.intents] == ["workloads", "podgroups"]
    res, _ = checked(lws_review(lws()), NATIVE, V137)
    assert [i.plural for i in res.intents] == ["workloads", "podgroups", "podgroups"]


def test_137_more_roles_than_the_api_holds_are_refused() -> None:
    spec = {
        "headGroupSpec": {"rayStartParams": {}, "template": pod_template({"cpu": "1"})},
        "workerGroupSpecs": [
            {"groupName": f"g{i}", "replicas": 1, "template": pod_template({"cpu": "1"})}
            for i in range(8)
        ],
    }
    obj = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "ml"},
        "spec": spec,
    }
    rev = review(obj, group="ray.io", version="v1")
    res = admit(rev, None, NATIVE, V137)
    resp = res.review["response"]
    assert not resp["allowed"]
    assert "pod templates" in resp["status"]["message"] and '"9"' in resp["status"]["message"]
    assert "at most 8 roles in one gang" in resp["status"]["message"]
    # Without CompositePodGroup the roles are one group: no limit to reach.
    assert admit(rev, None, NATIVE, V1BETA1).review["response"]["allowed"]


def test_lws_one_podgroup_per_group() -> None:
    res, patched = checked(lws_review(lws()), NATIVE, V1ALPHA2)
    workload, *groups = res.intents
    assert workload.name == "vllm"
    assert [g.name for g in groups] == ["vllm-0", "vllm-1"]
    assert {g.body["spec"]["schedulingPolicy"]["gang"]["minCount"] for g in groups} == {4}
    worker = patched["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    pod = pod_of(
        worker,
        "vllm-1-2",
        "StatefulSet",
        "apps/v1",
        **{"leaderworkerset.sigs.k8s.io/group-index": "1"},
    )
    _, p = checked(review(pod), NATIVE, V1ALPHA2)
    assert p["spec"]["schedulingGroup"] == {"podGroupName": "vllm-1"}


def test_lws_replica_keys_in_v1alpha1() -> None:
    res, patched = checked(lws_review(lws()), NATIVE, V1ALPHA1)
    (workload,) = res.intents
    assert workload.body["spec"]["podGroups"] == [
        {"name": "gang", "policy": {"gang": {"minCount": 4}}}
    ]
    worker = patched["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    pod = pod_of(
        worker,
        "vllm-1-2",
        "StatefulSet",
        "apps/v1",
        **{"leaderworkerset.sigs.k8s.io/group-index": "1"},
    )
    _, p = checked(review(pod), NATIVE, V1ALPHA1)
    assert p["spec"]["workloadRef"] == {
        "name": "vllm",
        "podGroup": "gang",
        "podGroupReplicaKey": "1",
    }


def test_bare_pod_gang() -> None:
    pod = bare_pod("a", {"corral.dev/gang": "g", "corral.dev/min-available": "2"})
    res, p = checked(review(pod), NATIVE, V1ALPHA2)
    assert p["spec"]["schedulingGroup"] == {"podGroupName": "g"}
    assert p["spec"]["schedulerName"] == "default-scheduler"  # left as it is
    workload, podgroup = res.intents
    assert workload.owner is not None and (workload.owner.kind, workload.owner.name) == ("Pod", "a")
    assert "controllerRef" not in workload.body["spec"]
    assert podgroup.body["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}


# --- kubernetes: left alone, refused, warned --------------------------------------------


def test_indexed_job_left_to_the_job_controller() -> None:
    rev = review(indexed_job(4, 4), group="batch")
    res = admit(rev, None, NATIVE, V1ALPHA2)
    assert res.review["response"]["allowed"] and res.intents == ()
    # Only the Job rule of every backend (gangplace.engine.quirks.job_disruption), no gang keys.
    assert [op["path"] for op in res.patch] == ["/spec/podFailurePolicy"]
    # Where the Job controller makes no gang (v1alpha1; parallelism below completions),
    # corral does.
    assert admit(rev, None, NATIVE, V1ALPHA1).intents
    assert admit(review(indexed_job(2, 4), group="batch"), None, NATIVE, V1ALPHA2).intents


def test_pod_in_a_native_gang_already_is_left_alone() -> None:
    pod = bare_pod("a", {"corral.dev/gang": "g"})
    pod["spec"]["schedulingGroup"] = {"podGroupName": "theirs"}
    res = admit(review(pod), None, NATIVE, V1ALPHA2)
    assert res.review["response"]["allowed"] and res.patch == [] and res.intents == ()


def test_one_scheduler_name_per_gang() -> None:
    obj = pytorchjob()
    obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["schedulerName"] = "other"
    res = admit(pt_review(obj), None, NATIVE, V1ALPHA2)
    resp = res.review["response"]
    assert not resp["allowed"]
    msg = resp["status"]["message"]
    assert "spec.schedulerName" in msg and "default-scheduler, other" in msg
    assert "one schedulerName for every pod template" in msg


def test_no_gang_api_served_warns_and_writes_no_objects() -> None:
    res, _ = checked(pt_review(pytorchjob()), NATIVE, Served())
    assert res.intents == ()
    assert any("serves no scheduling.k8s.io Workload" in w for w in res.warnings)
    # The whole sentence reaches the user, not its first half.
    assert any(
        w.endswith("with the GenericWorkload and GangScheduling feature gates)")
        for w in res.warnings
    ), res.warnings
    pod = bare_pod("a", {"corral.dev/gang": "g"})
    res, p = checked(review(pod), NATIVE, Served())
    assert "schedulingGroup" not in p["spec"] and "workloadRef" not in p["spec"]


def test_native_backend_has_no_queues_and_no_timeouts() -> None:
    with pytest.raises(ValueError, match="kubernetes backend has no queues"):
        parse_config({"backend": "kubernetes", "defaultQueue": "q"})
    pod = bare_pod(
        "a", {"corral.dev/gang": "g", "corral.dev/queue": "q", "corral.dev/gang-timeout": "5m"}
    )
    res, _ = checked(review(pod), NATIVE, V1ALPHA2)
    assert any("kubernetes backend has no queues" in w for w in res.warnings)
    assert any("native gang API has no per-gang timeout" in w for w in res.warnings)


def test_served_from_discovery() -> None:
    served = served_from(
        {"versions": [{"version": "v1"}, {"version": "v1alpha2"}]},
        {
            "v1alpha2": {
                "resources": [
                    {"name": "workloads"},
                    {"name": "podgroups"},
                    {"name": "podgroups/status"},
                ]
            }
        },
        None,
    )
    assert served == V1ALPHA2
    assert served.native is not None and served.native.api_version == "scheduling.k8s.io/v1alpha2"
    assert served_from(None, {}, None).native is None
    # 1.37 with CompositePodGroup on
    served = served_from(
        {"versions": [{"version": "v1beta1"}, {"version": "v1alpha3"}]},
        {
            "v1beta1": {"resources": [{"name": "workloads"}, {"name": "podgroups"}]},
            "v1alpha3": {"resources": [{"name": "compositepodgroups"}]},
        },
        None,
    )
    assert served.native is not None and served.native.composite
    assert served.native.api_version == "scheduling.k8s.io/v1beta1"


# --- kai ---------------------------------------------------------------------------------


def test_kai_workload_keys() -> None:
    assert KAI.effective_scheduler_name == "kai-scheduler"
    assert KAI.effective_default_queue == "default-queue"
    obj = pytorchjob(annotations={"corral.dev/min-available": "3", "corral.dev/queue": "team-a"})
    res, patched = checked(pt_review(obj), KAI)
    # KAI's pod grouper makes the PodGroup from the top owner's keys.
    assert res.intents == ()
    assert labels(patched) == {"kai.scheduler/queue": "team-a"}
    assert annotations(patched)["kai.scheduler/batch-min-member"] == "3"
    for role in ("Master", "Worker"):
        t = patched["spec"]["pytorchReplicaSpecs"][role]["template"]
        assert t["spec"]["schedulerName"] == "kai-scheduler"
        assert labels(t) == {"kai.scheduler/queue": "team-a"}
        assert "kai.scheduler/batch-min-member" not in annotations(t)


def test_kai_bare_pod_is_its_own_top_owner() -> None:
    pod = bare_pod(
        "a",
        {"corral.dev/gang": "g", "corral.dev/min-available": "2", "corral.dev/gang-timeout": "5m"},
    )
    res, p = checked(review(pod), KAI)
    assert p["spec"]["schedulerName"] == "kai-scheduler"
    assert labels(p) == {"kai.scheduler/queue": "default-queue"}
    assert annotations(p)["kai.scheduler/batch-min-member"] == "2"
    assert any("KAI-Scheduler has no per-gang timeout key" in w for w in res.warnings)


def test_kai_pod_grouped_by_kai_is_kept() -> None:
    pod = bare_pod("a", {"pod-group-name": "pg-a-123"})
    _, p = checked(review(pod), KAI)
    assert annotations(p)["pod-group-name"] == "pg-a-123"
    assert p["spec"]["schedulerName"] == "kai-scheduler"


# --- volcano 1.12+: networkTopology and subGroupPolicy where served ----------------------

VOLCANO_112 = Served(
    volcano_podgroup_fields=frozenset(
        {"minMember", "queue", "minResources", "networkTopology", "subGroupPolicy"}
    )
)
VOLCANO_17 = Served(volcano_podgroup_fields=frozenset({"minMember", "queue", "minResources"}))
VOLCANO = WebhookConfig()


def jobset() -> dict[str, Any]:
    def rjob(name: str, replicas: int, parallelism: int) -> dict[str, Any]:
        spec = {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": pod_template(GPU),
        }
        return {"name": name, "replicas": replicas, "template": {"spec": spec}}

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "js",
            "namespace": "ml",
            "annotations": {"corral.dev/network-topology": "hard:2"},
        },
        "spec": {"replicatedJobs": [rjob("driver", 1, 1), rjob("workers", 3, 4)]},
    }


def js_review(obj: dict[str, Any]) -> dict[str, Any]:
    return review(obj, group="jobset.x-k8s.io", version="v1alpha2")


def test_volcano_112_network_topology_and_subgroups() -> None:
    res, _ = checked(js_review(jobset()), VOLCANO, VOLCANO_112)
    (intent,) = res.intents
    spec = intent.body["spec"]
    assert spec["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    assert spec["subGroupPolicy"] == [
        {
            "name": "workers",
            "subGroupSize": 4,
            "minSubGroups": 3,
            "labelSelector": {"matchLabels": {"jobset.sigs.k8s.io/replicatedjob-name": "workers"}},
            "matchLabelKeys": ["jobset.sigs.k8s.io/job-index"],
        }
    ]
    assert spec["minMember"] == 13


def test_volcano_112_subgroups_without_a_subgroup_minimum_below_the_whole_gang() -> None:
    obj = jobset()
    obj["metadata"]["annotations"]["corral.dev/min-available"] = "5"
    res, _ = checked(js_review(obj), VOLCANO, VOLCANO_112)
    (sg,) = res.intents[0].body["spec"]["subGroupPolicy"]
    assert "minSubGroups" not in sg and sg["subGroupSize"] == 4


@pytest.mark.parametrize("served", [VOLCANO_17, None])
def test_older_volcano_gets_neither_and_a_warning(served: Served | None) -> None:
    res, _ = checked(js_review(jobset()), VOLCANO, served)
    spec = res.intents[0].body["spec"]
    assert "networkTopology" not in spec and "subGroupPolicy" not in spec
    assert any(
        "corral.dev/network-topology is not applied: the served Volcano PodGroup has no "
        "networkTopology" in w
        for w in res.warnings
    )


def test_network_topology_on_a_bare_pod_and_soft_mode() -> None:
    pod = bare_pod("a", {"corral.dev/gang": "g", "corral.dev/network-topology": "soft"})
    res, _ = checked(review(pod), VOLCANO, VOLCANO_112)
    assert res.intents[0].body["spec"]["networkTopology"] == {"mode": "soft"}


@pytest.mark.parametrize("raw", ["medium", "hard:0", "hard:x", ""])
def test_bad_network_topology_is_refused(raw: str) -> None:
    pod = bare_pod("a", {"corral.dev/gang": "g", "corral.dev/network-topology": raw})
    res = admit(review(pod), None, VOLCANO, VOLCANO_112)
    resp = res.review["response"]
    assert not resp["allowed"] and res.intents == ()
    msg = resp["status"]["message"]
    assert "corral.dev/network-topology" in msg and f'"{raw}"' in msg and '"hard:2"' in msg


def test_network_topology_is_ignored_by_other_backends() -> None:
    pod = bare_pod("a", {"corral.dev/gang": "g", "corral.dev/network-topology": "hard"})
    res, _ = checked(review(pod), KAI)
    assert any("only the volcano backend writes it" in w for w in res.warnings)


# --- over the in-memory API server: discovery, and the objects made with their owners ---


async def test_discovery_finds_the_served_version(api: ApiServer, kube: KubeClient) -> None:
    assert (await discover(kube)).native is None  # Kubernetes 1.28: none
    async with ApiServer(versions=Versions.of(kube="1.36", native_gangs=True)) as native:
        served = await discover(native.client("test"))
    assert served.workload_versions == {"v1alpha2"}
    assert served.native is not None and served.native.api_version == "scheduling.k8s.io/v1alpha2"


async def test_workload_and_podgroup_made_with_their_owner() -> None:
    async with ApiServer(versions=Versions.of(kube="1.36", native_gangs=True)) as api:
        api.store.load([o.namespace("ml")])
        await _made_with_their_owner(api, api.client("test"))


async def _made_with_their_owner(api: ApiServer, kube: KubeClient) -> None:
    served = await discover(kube)
    obj = pytorchjob(annotations={"corral.dev/min-available": "2"})
    result = admit(pt_review(obj), None, NATIVE, served)
    for r in WORKLOADS:
        if (r.group, r.version, r.plural) not in api.store.types:
            api.store.register(
                ResourceType(r.group, r.version, r.plural, r.kind, r.namespaced, builtin=False)
            )
    stored = jsonpatch.apply_patch(obj, result.patch)
    stored["metadata"]["uid"] = uid = "uid-bert"
    api.store.load([stored])
    rec = live_reconciler(kube, NATIVE)
    await rec.start()
    try:
        for i in result.intents:
            rec.submit(i, dry_run=False)
        await asyncio.wait_for(rec.drain(), 10)
    finally:
        await rec.stop()
    owner = [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "bert", "uid": uid}]
    made = {}
    for plural in ("workloads", "podgroups"):
        rt = api.store.types[("scheduling.k8s.io", "v1alpha2", plural)]
        (made[plural],) = list(api.store.items(rt, "ml"))
        assert made[plural]["metadata"]["name"] == "pytorchjob-bert"
        assert made[plural]["metadata"]["ownerReferences"] == owner
    assert made["podgroups"]["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}


async def test_a_pod_whose_gang_objects_are_missing_brings_them() -> None:
    """The webhook restarted between a workload's CREATE and its objects: its first pod
    names the owner, and the objects are made from the live workload."""
    async with ApiServer(versions=Versions.of(kube="1.36", native_gangs=True)) as api:
        api.store.load([o.namespace("ml")])
        kube = api.client("test")
        served = await discover(kube)
        for r in WORKLOADS:
            if (r.group, r.version, r.plural) not in api.store.types:
                api.store.register(
                    ResourceType(r.group, r.version, r.plural, r.kind, r.namespaced, builtin=False)
                )
        obj = pytorchjob()
        result = admit(pt_review(obj), None, NATIVE, served)
        stored = jsonpatch.apply_patch(obj, result.patch)
        stored["metadata"]["uid"] = "uid-bert"
        api.store.load([stored])  # stored, its intents lost
        worker = stored["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
        pod = pod_of(worker, "bert-worker-0", "PyTorchJob", "kubeflow.org/v1")
        pod["metadata"]["ownerReferences"][0].update(name="bert", uid="uid-bert")
        pod_result = admit(review(pod), None, NATIVE, served)
        assert pod_result.intents == () and pod_result.hints
        rec = live_reconciler(kube, NATIVE, served=served)
        await rec.start()
        try:
            for h in pod_result.hints:
                rec.hint(h)
            await asyncio.wait_for(rec.drain(), 10)
        finally:
            await rec.stop()
        for plural in ("workloads", "podgroups"):
            rt = api.store.types[("scheduling.k8s.io", "v1alpha2", plural)]
            (made,) = list(api.store.items(rt, "ml"))
            assert made["metadata"]["name"] == "pytorchjob-bert"
            assert made["metadata"]["ownerReferences"][0]["uid"] == "uid-bert"


def test_a_role_named_like_the_composite_template_gets_another_name() -> None:
    """Template names are unique in a Workload's whole tree (1.37): a role called
    ``all`` leaves the composite template ``all-1``, and the server takes the Workload."""
    spec = {
        "headGroupSpec": {"rayStartParams": {}, "template": pod_template({"cpu": "1"})},
        "workerGroupSpecs": [{"groupName": "all", "replicas": 2, "template": pod_template(GPU)}],
    }
    obj = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "ml"},
        "spec": spec,
    }
    res = admit(review(obj, group="ray.io", version="v1"), None, NATIVE, V137)
    workload, composite, *groups = res.intents
    (top,) = workload.body["spec"]["compositePodGroupTemplates"]
    assert top["name"] == "all-1"
    assert [t["name"] for t in top["podGroupTemplates"]] == ["head", "all"]
    assert composite.body["spec"]["workloadRef"]["templateName"] == "all-1"
    store = ApiStore(versions=Versions.of(kube="1.37", native_gangs=True))
    store.load([o.namespace("ml")])
    for i in res.intents:
        version = i.api_version.rpartition("/")[2]
        store.create(store.types[("scheduling.k8s.io", version, i.plural)], "ml", i.body)
    assert len(groups) == 2
