"""A pod's effective request follows the kube-scheduler's rules."""

import pytest
from gangplace.engine import PodShape, ShapeError, shape_from_pod
from gangplace.engine.requests import ResourceError, pod_requests

GI = 2**30


def c(name: str, cpu: str, mem: str = "0", **kw: object) -> dict[str, object]:
    return {"name": name, "resources": {"requests": {"cpu": cpu, "memory": mem}}, **kw}


def test_sum_of_containers_plus_a_pod_slot() -> None:
    spec = {"containers": [c("a", "500m", "1Gi"), c("b", "1.5", "512Mi")]}
    assert pod_requests(spec) == {"cpu": 2000, "memory": GI + GI // 2, "pods": 1}


def test_largest_init_container_wins_when_bigger() -> None:
    spec = {"initContainers": [c("i1", "4"), c("i2", "2")], "containers": [c("a", "1")]}
    assert pod_requests(spec)["cpu"] == 4000


def test_init_container_smaller_than_sum_is_ignored() -> None:
    spec = {"initContainers": [c("i", "1")], "containers": [c("a", "1"), c("b", "1")]}
    assert pod_requests(spec)["cpu"] == 2000


def test_sidecars_add_to_containers_and_to_later_init_containers() -> None:
    # sidecar 1 cpu runs for the pod's life; init "late" (3 cpu) runs beside it: peak 4.
    spec = {
        "initContainers": [
            c("early", "2"),
            c("proxy", "1", restartPolicy="Always"),
            c("late", "3"),
        ],
        "containers": [c("main", "2")],
    }
    # max(main 2 + sidecar 1 = 3, early 2, proxy 1, late 3 + proxy 1 = 4) = 4
    assert pod_requests(spec)["cpu"] == 4000


def test_sidecar_before_a_big_init_container_counts_with_it() -> None:
    spec = {
        "initContainers": [c("proxy", "1", restartPolicy="Always"), c("migrate", "1")],
        "containers": [c("main", "500m")],
    }
    # max(0.5 + 1 = 1.5, proxy 1 + migrate 1 = 2) = 2
    assert pod_requests(spec)["cpu"] == 2000


def test_overhead_is_added() -> None:
    spec = {"containers": [c("a", "1", "1Gi")], "overhead": {"cpu": "250m", "memory": "120Mi"}}
    assert pod_requests(spec) == {"cpu": 1250, "memory": GI + 120 * 2**20, "pods": 1}


def test_limit_stands_in_for_missing_request() -> None:
    spec = {
        "containers": [{"name": "a", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}}}]
    }
    assert pod_requests(spec) == {"cpu": 2000, "nvidia.com/gpu": 1, "pods": 1}


def test_no_requests_is_just_a_pod_slot() -> None:
    assert pod_requests({"containers": [{"name": "a"}]}) == {"pods": 1}


def test_bad_quantity_names_resource_and_string() -> None:
    spec = {"containers": [c("a", "lots")]}
    with pytest.raises(ResourceError, match=r"'cpu'.*'lots'"):
        pod_requests(spec)


def test_negative_request_refused() -> None:
    with pytest.raises(ResourceError, match="negative"):
        pod_requests({"containers": [c("a", "-1")]})


def test_shape_splits_whole_gpus_from_requests() -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "t", "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "2"}}}
            ]
        }
    }
    s = shape_from_pod(pod)
    assert (s.gpu_count, s.gpu_milli, s.gpu_resource) == (2, 1000, "nvidia.com/gpu")
    assert s.request("nvidia.com/gpu") == 0
    assert s.request("cpu") == 8000


def test_shape_reads_gpu_share_annotations() -> None:
    pod = {
        "metadata": {
            "annotations": {
                "alibabacloud.com/gpu-milli": "350",
                "alibabacloud.com/gpu-card-model": "T4|P100",
            }
        },
        "spec": {"containers": [c("a", "4")]},
    }
    s = shape_from_pod(pod)
    assert (s.gpu_count, s.gpu_milli, s.gpu_resource, s.gpu_models) == (
        1,
        350,
        None,
        ("T4", "P100"),
    )
    assert s.is_shared_gpu


def test_equal_pods_have_equal_shapes() -> None:
    a = shape_from_pod({"spec": {"containers": [c("x", "1", "1Gi")]}})
    b = shape_from_pod({"spec": {"containers": [c("y", "1000m", "1024Mi")]}})
    assert a == b and hash(a) == hash(b)


def test_shape_errors_name_the_field() -> None:
    with pytest.raises(ShapeError, match="no spec"):
        shape_from_pod({"metadata": {}})
    with pytest.raises(ShapeError, match="gpu-milli"):
        shape_from_pod(
            {"metadata": {"annotations": {"alibabacloud.com/gpu-milli": "half"}}, "spec": {}}
        )
    with pytest.raises(ShapeError, match="one GPU"):
        PodShape(gpu_count=2, gpu_milli=500)


@pytest.mark.parametrize(
    "spec",
    [
        {"containers": "not-a-list"},
        {"containers": [{"resources": ["cpu"]}]},
        {"containers": [], "tolerations": ["x"]},
        {"containers": [], "nodeSelector": ["zone"]},
    ],
)
def test_malformed_specs_raise_shape_error(spec: dict[str, object]) -> None:
    with pytest.raises(ShapeError):
        shape_from_pod({"spec": spec})
