"""Every workload kind of the table: gang size from the object, keys on every pod
template, the PodGroup's minMember; and adding a kind through the config."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.builders.reviews import annotations, checked, pod_template, review
from webhook.admission.roles import BUILTIN_KINDS, WorkloadTable, resolve_roles
from webhook.config import parse_config

GROUP = "scheduling.k8s.io/group-name"
GPU = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}


def _obj(api: str, kind: str, name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": name, "namespace": "ml", **meta},
        "spec": spec,
    }


def job(parallelism: int = 4, completions: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"parallelism": parallelism, "template": pod_template(GPU)}
    if completions is not None:
        spec["completions"] = completions
    return _obj("batch/v1", "Job", "train", spec)


def pytorchjob() -> dict[str, Any]:
    return _obj(
        "kubeflow.org/v1",
        "PyTorchJob",
        "bert",
        {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": pod_template(GPU)},
                "Worker": {"replicas": 3, "template": pod_template(GPU)},
            }
        },
    )


def tfjob() -> dict[str, Any]:
    return _obj(
        "kubeflow.org/v1",
        "TFJob",
        "resnet",
        {
            "tfReplicaSpecs": {
                "Chief": {"replicas": 1, "template": pod_template(GPU)},
                "PS": {"replicas": 1, "template": pod_template({"cpu": "2"})},
                "Worker": {"replicas": 2, "template": pod_template(GPU)},
            }
        },
    )


def mpijob() -> dict[str, Any]:
    return _obj(
        "kubeflow.org/v2beta1",
        "MPIJob",
        "allreduce",
        {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": pod_template({"cpu": "1"})},
                "Worker": {"replicas": 4, "template": pod_template(GPU)},
            },
        },
    )


def jobset() -> dict[str, Any]:
    def rjob(name: str, replicas: int, parallelism: int, completions: int | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"parallelism": parallelism, "template": pod_template(GPU)}
        if completions is not None:
            spec["completions"] = completions
        return {"name": name, "replicas": replicas, "template": {"spec": spec}}

    return _obj(
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "js",
        {"replicatedJobs": [rjob("leader", 1, 1, 1), rjob("workers", 2, 4, None)]},
    )


def ray_spec() -> dict[str, Any]:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": pod_template({"cpu": "2"})},
        "workerGroupSpecs": [
            {"groupName": "gpu", "replicas": 2, "numOfHosts": 2, "template": pod_template(GPU)},
            {
                "groupName": "cpu",
                "minReplicas": 1,
                "maxReplicas": 5,
                "template": pod_template({"cpu": "1"}),
            },
        ],
    }


def raycluster() -> dict[str, Any]:
    return _obj("ray.io/v1", "RayCluster", "rc", ray_spec())


def rayjob() -> dict[str, Any]:
    return _obj(
        "ray.io/v1", "RayJob", "rj", {"entrypoint": "python x.py", "rayClusterSpec": ray_spec()}
    )


def lws(leader: bool = True) -> dict[str, Any]:
    lwt: dict[str, Any] = {"size": 4, "workerTemplate": pod_template(GPU)}
    if leader:
        lwt["leaderTemplate"] = pod_template({"cpu": "1"})
    return _obj(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "vllm",
        {"replicas": 2, "leaderWorkerTemplate": lwt},
    )


# (object, group, version, gang size, pointers of the pod templates)
CASES: list[tuple[str, dict[str, Any], int, list[tuple[str | int, ...]]]] = [
    ("job", job(), 4, [("spec", "template")]),
    ("job-completions", job(4, 2), 2, [("spec", "template")]),
    (
        "pytorchjob",
        pytorchjob(),
        4,
        [("spec", "pytorchReplicaSpecs", r, "template") for r in ("Master", "Worker")],
    ),
    (
        "tfjob",
        tfjob(),
        4,
        [("spec", "tfReplicaSpecs", r, "template") for r in ("Chief", "PS", "Worker")],
    ),
    (
        "mpijob",
        mpijob(),
        5,
        [("spec", "mpiReplicaSpecs", r, "template") for r in ("Launcher", "Worker")],
    ),
    (
        "jobset",
        jobset(),
        1 + 2 * 4,
        [("spec", "replicatedJobs", i, "template", "spec", "template") for i in (0, 1)],
    ),
    (
        "raycluster",
        raycluster(),
        1 + 2 * 2 + 1,
        [("spec", "headGroupSpec", "template")]
        + [("spec", "workerGroupSpecs", i, "template") for i in (0, 1)],
    ),
    (
        "rayjob",
        rayjob(),
        6,
        [("spec", "rayClusterSpec", "headGroupSpec", "template")]
        + [("spec", "rayClusterSpec", "workerGroupSpecs", i, "template") for i in (0, 1)],
    ),
]
# LeaderWorkerSet makes one gang per group: tests/webhook/test_kinds.py.


def _review_of(obj: dict[str, Any]) -> dict[str, Any]:
    group, _, version = obj["apiVersion"].rpartition("/")
    return review(obj, group=group, version=version)


def _at(obj: Any, ptr: tuple[str | int, ...]) -> Any:
    for p in ptr:
        obj = obj[p]
    return obj


@pytest.mark.parametrize(("label", "obj", "size", "templates"), CASES, ids=[c[0] for c in CASES])
def test_every_template_joins_the_gang(
    label: str, obj: dict[str, Any], size: int, templates: list[tuple[str | int, ...]]
) -> None:
    res, patched = checked(_review_of(obj))
    gang = f"{obj['kind'].lower()}-{obj['metadata']['name']}"
    for ptr in templates:
        tmpl = _at(patched, ptr)
        assert tmpl["metadata"]["annotations"][GROUP] == gang, ptr
        assert tmpl["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "default"
        assert tmpl["spec"]["schedulerName"] == "volcano", ptr
    (intent,) = res.intents
    assert intent.name == gang
    assert intent.body["spec"]["minMember"] == size  # default: the whole gang
    assert intent.owner is not None and intent.owner.kind == obj["kind"]
    # nothing outside the templates changed
    stripped = copy.deepcopy(patched)
    for ptr in templates:
        t = _at(stripped, ptr)
        del t["metadata"]
        del t["spec"]["schedulerName"]
    original = copy.deepcopy(obj)
    for ptr in templates:
        _at(original, ptr).pop("metadata", None)
    assert stripped == original


def test_roles_and_counts() -> None:
    table = WorkloadTable(BUILTIN_KINDS)
    entry = table.get("ray.io", "v1", "RayCluster")
    assert entry is not None
    roles = resolve_roles(entry, raycluster())
    assert [(r.name, r.count) for r in roles] == [("head", 1), ("gpu", 4), ("cpu", 1)]
    entry = table.get("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet")
    assert entry is not None
    assert [(r.name, r.count) for r in resolve_roles(entry, lws())] == [
        ("leader", 2),
        ("worker", 6),
    ]
    assert [(r.name, r.count) for r in resolve_roles(entry, lws(False))] == [("worker", 8)]
    entry = table.get("kubeflow.org", "v1", "TFJob")
    assert entry is not None
    assert [r.name for r in resolve_roles(entry, tfjob())] == ["chief", "ps", "worker"]
    assert table.get("kubeflow.org", "v9", "TFJob") is None
    assert table.owns("batch/v1", "Job") and not table.owns("apps/v1", "ReplicaSet")


def test_min_available_percentage_and_count() -> None:
    obj = jobset()
    obj["metadata"]["annotations"] = {"corral.dev/min-available": "50%"}
    res, _ = checked(_review_of(obj))
    assert res.intents[0].body["spec"]["minMember"] == 5  # ceil(9 * 0.5)
    obj = pytorchjob()
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {"corral.dev/min-available": "2"}
    }
    res, _ = checked(_review_of(obj))
    assert res.intents[0].body["spec"]["minMember"] == 2


def test_workload_keys_win_over_template_keys() -> None:
    obj = pytorchjob()
    obj["metadata"]["annotations"] = {"corral.dev/queue": "from-workload"}
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {"corral.dev/queue": "from-template"}
    }
    _, patched = checked(_review_of(obj))
    for role in ("Master", "Worker"):
        ann = annotations(patched, "spec", "pytorchReplicaSpecs", role, "template")
        assert ann["scheduling.volcano.sh/queue-name"] == "from-workload"


def test_default_min_available_per_kind_from_config() -> None:
    cfg = parse_config({"defaultMinAvailable": {"*": "100%", "PyTorchJob": "75%", "Job": "8"}})
    res, _ = checked(_review_of(pytorchjob()), cfg)
    assert res.intents[0].body["spec"]["minMember"] == 3
    res, _ = checked(_review_of(job(4)), cfg)
    assert res.intents[0].body["spec"]["minMember"] == 4  # a default never exceeds the gang


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("10", "is more than the gang size 9"),
        ("0", "at least 1"),
        ("150%", "from 1% to 100%"),
        ("abc", "neither a number of pods nor a percentage"),
        ("-1", "is negative"),
    ],
)
def test_bad_min_available_on_a_workload(value: str, fragment: str) -> None:
    obj = jobset()
    obj["metadata"]["annotations"] = {"corral.dev/min-available": value}
    res, _ = checked(_review_of(obj))
    resp = res.review["response"]
    assert resp["allowed"] is False
    msg = resp["status"]["message"]
    assert msg.startswith(f'corral.dev/min-available: "{value}"')
    assert fragment in msg
    assert "from 1 to 9 (the gang size)" in msg and "1% to 100%" in msg
    assert res.intents == ()


def test_all_problems_named_at_once() -> None:
    obj = job()
    obj["metadata"]["annotations"] = {
        "corral.dev/gang-timeout": "soon",
        "corral.dev/gang": "Not_A_Name",
    }
    res, _ = checked(_review_of(obj))
    msg = res.review["response"]["status"]["message"]
    assert 'corral.dev/gang: "Not_A_Name"' in msg
    assert 'corral.dev/gang-timeout: "soon" is not a duration' in msg


def test_values_too_large_for_python_or_the_api_are_refused_not_let_through() -> None:
    obj = job()
    obj["metadata"]["annotations"] = {
        "corral.dev/min-available": "9" * 5000,
        "corral.dev/gang-timeout": "9" * 400 + "h",
    }
    res, _ = checked(_review_of(obj))
    response = res.review["response"]
    assert response["allowed"] is False
    msg = response["status"]["message"]
    assert "corral.dev/min-available" in msg and "(5000 characters)" in msg
    assert "corral.dev/gang-timeout" in msg and "is too long" in msg


def test_bad_replica_count_is_refused_naming_the_field() -> None:
    obj = pytorchjob()
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "three"
    res, _ = checked(_review_of(obj))
    msg = res.review["response"]["status"]["message"]
    assert "spec.pytorchReplicaSpecs.Worker.replicas" in msg and "'three'" in msg


def test_gang_name_from_the_user() -> None:
    obj = job()
    obj["spec"]["template"]["metadata"] = {"annotations": {"corral.dev/gang": "nightly"}}
    res, patched = checked(_review_of(obj))
    assert annotations(patched, "spec", "template")[GROUP] == "nightly"
    assert res.intents[0].name == "nightly"


def test_long_names_are_shortened_stably() -> None:
    obj = job()
    obj["metadata"]["name"] = "x" * 60
    _res, patched = checked(_review_of(obj))
    name = annotations(patched, "spec", "template")[GROUP]
    assert len(name) <= 63 and name.startswith("job-xxx")
    res2, _ = checked(_review_of(obj))
    assert res2.intents[0].name == name


def test_generate_name_workload() -> None:
    obj = job()
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "sweep-"
    rev = _review_of(obj)
    res, patched = checked(rev)
    name = annotations(patched, "spec", "template")[GROUP]
    assert name == f"job-sweep-{rev['request']['uid'][:8]}"
    assert res.intents[0].owner is not None and res.intents[0].owner.name == ""


def test_child_of_a_gang_forming_parent_is_only_made_consistent() -> None:
    # The JobSet was admitted first; the Job it then creates carries the gang keys.
    _, js = checked(_review_of(jobset()))
    child_tmpl = js["spec"]["replicatedJobs"][1]["template"]
    child = _obj("batch/v1", "Job", "js-workers-0", copy.deepcopy(child_tmpl["spec"]))
    child["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "js",
            "uid": "js-uid",
            "controller": True,
        }
    ]
    child["metadata"]["annotations"] = {"corral.dev/min-available": "9"}  # the parent's count
    res, patched = checked(_review_of(child))
    assert res.patch == [] and res.intents == ()
    assert annotations(patched, "spec", "template")[GROUP] == "jobset-js"


def test_pod_template_with_a_bad_quantity_still_gets_keys() -> None:
    obj = job()
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    res, patched = checked(_review_of(obj))
    assert annotations(patched, "spec", "template")[GROUP] == "job-train"
    assert "minResources" not in res.intents[0].body["spec"]


def test_size_zero_is_left_alone() -> None:
    res, _ = checked(_review_of(job(0)))
    assert res.outcome == "unchanged" and res.intents == ()


def test_a_kind_added_by_config() -> None:
    cfg = parse_config(
        {
            "workloads": [
                {
                    "group": "example.com",
                    "versions": ["v1"],
                    "kind": "Trainer",
                    "roles": [
                        {"name": "driver", "at": "spec.driver", "template": "podTemplate"},
                        {
                            "at": "spec.pools.*",
                            "nameField": "pool",
                            "template": "podTemplate",
                            "count": ["nodes", {"paths": ["podsPerNode"], "default": 1}],
                        },
                    ],
                    "defaultMinAvailable": "100%",
                }
            ]
        }
    )
    obj = _obj(
        "example.com/v1",
        "Trainer",
        "t",
        {
            "driver": {"podTemplate": pod_template({"cpu": "1"})},
            "pools": [
                {"pool": "a", "nodes": 2, "podsPerNode": 4, "podTemplate": pod_template(GPU)},
                {"pool": "b", "nodes": 3, "podTemplate": pod_template(GPU)},
            ],
        },
    )
    res, patched = checked(review(obj, group="example.com", version="v1"), cfg)
    assert res.intents[0].body["spec"]["minMember"] == 1 + 8 + 3
    for i in (0, 1):
        assert annotations(patched, "spec", "pools", i, "podTemplate")[GROUP] == "trainer-t"
    assert annotations(patched, "spec", "driver", "podTemplate")[GROUP] == "trainer-t"
