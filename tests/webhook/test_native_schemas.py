"""Every object the ``kubernetes`` backend writes for a gang, and every pod it names a
group on, validated against the released OpenAPI schema of the release it is written
for (kubernetes-validate's ``v1.35.0``-``v1.37.0`` strict schemas): the released
artefact, not only the in-memory server, takes them. 1.37 is written for each set of
versions a cluster may turn on (v1alpha3, v1beta1, both)."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest

from tests.builders.reviews import bare_pod, review
from tests.webhook.test_native_backends import NATIVE, lws, lws_review, pod_of, pytorchjob
from webhook.admission.entry import admit
from webhook.admission.native_gangs import Served

Json = dict[str, Any]

# What discovery finds on each release with the gang API switched on.
RELEASES: list[tuple[str, str, Served]] = [
    ("1.35", "v1alpha1", Served(frozenset({"v1alpha1"}))),
    ("1.36", "v1alpha2", Served(frozenset({"v1alpha2"}), frozenset({"v1alpha2"}))),
    (
        "1.37",
        "v1alpha3",
        Served(
            frozenset({"v1alpha3"}),
            frozenset({"v1alpha3"}),
            composite_versions=frozenset({"v1alpha3"}),
        ),
    ),
    ("1.37", "v1beta1", Served(frozenset({"v1beta1"}), frozenset({"v1beta1"}))),
    (
        "1.37",
        "both",
        Served(
            frozenset({"v1alpha3", "v1beta1"}),
            frozenset({"v1alpha3", "v1beta1"}),
            composite_versions=frozenset({"v1alpha3"}),
        ),
    ),
]


def _valid(obj: Json, release: str) -> None:
    try:
        kubernetes_validate.validate(obj, release, strict=True)
    except kubernetes_validate.ValidationError as e:
        raise AssertionError(f"{obj['kind']} {obj['metadata']['name']} on {release}: {e}") from e


def _written(served: Served) -> tuple[list[Json], list[Json]]:
    """The gang objects and the pods admission writes for a PyTorchJob (two roles, with
    a priority class), an LWS (a gang per group) and a bare pod's gang."""
    objects: list[Json] = []
    pods: list[Json] = []
    job = pytorchjob(annotations={"corral.dev/min-available": "3"})
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["priorityClassName"] = "high"
    res = admit(review(job, group="kubeflow.org", version="v1"), None, NATIVE, served)
    objects += [i.body for i in res.intents]
    patched = jsonpatch.apply_patch(job, res.patch)
    for role in ("Master", "Worker"):
        t = patched["spec"]["pytorchReplicaSpecs"][role]["template"]
        pod = pod_of(t, f"bert-{role.lower()}-0", "PyTorchJob", "kubeflow.org/v1")
        pr = admit(review(pod), None, NATIVE, served)
        pods.append(jsonpatch.apply_patch(pod, pr.patch))
    res = admit(lws_review(lws()), None, NATIVE, served)
    objects += [i.body for i in res.intents]
    pod = bare_pod("lone", {"corral.dev/gang": "g", "corral.dev/min-available": "1"})
    res = admit(review(pod), None, NATIVE, served)
    objects += [i.body for i in res.intents]
    pods.append(jsonpatch.apply_patch(copy.deepcopy(pod), res.patch))
    return objects, pods


@pytest.mark.parametrize(
    ("release", "on", "served"), RELEASES, ids=[f"{r}-{v}" for r, v, _ in RELEASES]
)
def test_what_corral_writes_validates_against_the_release_s_schema(
    release: str, on: str, served: Served
) -> None:
    objects, pods = _written(served)
    kinds = sorted({(o["apiVersion"], o["kind"]) for o in objects})
    want = {
        "v1alpha1": [("scheduling.k8s.io/v1alpha1", "Workload")],
        "v1alpha2": [
            ("scheduling.k8s.io/v1alpha2", "PodGroup"),
            ("scheduling.k8s.io/v1alpha2", "Workload"),
        ],
        "v1alpha3": [
            ("scheduling.k8s.io/v1alpha3", "CompositePodGroup"),
            ("scheduling.k8s.io/v1alpha3", "PodGroup"),
            ("scheduling.k8s.io/v1alpha3", "Workload"),
        ],
        "v1beta1": [
            ("scheduling.k8s.io/v1beta1", "PodGroup"),
            ("scheduling.k8s.io/v1beta1", "Workload"),
        ],
        "both": [
            ("scheduling.k8s.io/v1alpha3", "CompositePodGroup"),
            ("scheduling.k8s.io/v1beta1", "PodGroup"),
            ("scheduling.k8s.io/v1beta1", "Workload"),
        ],
    }[on]
    assert kinds == want
    for obj in objects:
        _valid(obj, release)
    field = "workloadRef" if release == "1.35" else "schedulingGroup"
    for pod in pods:
        assert field in pod["spec"], pod["metadata"]["name"]
        _valid(pod, release)


def test_the_schemas_refuse_the_old_shapes() -> None:
    """The check has teeth: 1.37's union on 1.36, 1.36's topology key spelled as the
    model once had it, and a CompositePodGroup at v1beta1 (no such kind) are refused."""
    pg = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": {"all": {}}},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pg, "1.36", strict=True)
    pg["spec"] = {
        "schedulingPolicy": {"gang": {"minCount": 2}},
        "schedulingConstraints": {"topologyConstraints": [{"topologyKey": "rack"}]},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pg, "1.36", strict=True)
    cpg = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "CompositePodGroup",
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {
            "workloadRef": {"workloadName": "w", "templateName": "all"},
            "schedulingPolicy": {"gang": {"minGroupCount": 1}},
        },
    }
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(cpg, "1.37", strict=True)
