"""Feasibility warnings: the engine, asked on an empty copy of the cluster's nodes
("can never start") and on the live snapshot ("cannot start now")."""

from __future__ import annotations

from typing import Any

from gangplace.engine import Snapshot
from gangplace.snapshot_io import load_snapshot

from tests.builders.reviews import bare_pod, checked, node, pod_template, review, running
from webhook.admission.cluster_fit import ClusterCapacity, check_gang
from webhook.config import WebhookConfig, parse_config

GPU4 = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"}
GPU8 = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"}


def four_gpu_cluster(busy: bool = False) -> ClusterCapacity:
    nodes = [node(f"g{i}", 4, pool="gpu") for i in range(4)] + [node("c0", 0, pool="cpu")]
    pods = [running(f"busy-{i}", f"g{i}", 4) for i in range(4)] if busy else []
    return ClusterCapacity.of(Snapshot.from_objects(nodes, pods))


def job(parallelism: int, resources: dict[str, str], **meta: Any) -> dict[str, Any]:
    return review(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "big", "namespace": "ml", **meta},
            "spec": {"parallelism": parallelism, "template": pod_template(resources)},
        },
        group="batch",
    )


def test_no_node_big_enough_warns() -> None:
    res, _ = checked(job(16, GPU8), cluster=four_gpu_cluster())
    (warning,) = res.warnings
    assert warning.startswith("corral: gang job-big can never start on this cluster")
    assert "nvidia.com/gpu" in warning
    assert len(warning) <= 250
    assert res.review["response"]["allowed"] is True
    assert res.intents  # a warning does not stop the gang from being set up


def test_more_gpus_than_the_cluster_has_warns() -> None:
    res, _ = checked(job(5, GPU4), cluster=four_gpu_cluster())
    (warning,) = res.warnings
    assert "4/5 required members fit" in warning


def test_a_gang_that_fits_gets_no_warning() -> None:
    res, _ = checked(job(4, GPU4), cluster=four_gpu_cluster())
    assert res.warnings == ()
    # min-available below the size: only the required members must fit
    res, _ = checked(
        job(6, GPU4, annotations={"corral.dev/min-available": "4"}), cluster=four_gpu_cluster()
    )
    assert res.warnings == ()


def test_deny_refuses_infeasible_gangs() -> None:
    cfg = WebhookConfig(infeasible="deny")
    res, _ = checked(job(16, GPU8), cfg, four_gpu_cluster())
    resp = res.review["response"]
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 403
    assert "can never start" in resp["status"]["message"]
    assert res.intents == ()


def test_cannot_start_now_only_when_asked() -> None:
    busy = four_gpu_cluster(busy=True)
    res, _ = checked(job(2, GPU4), cluster=busy)
    assert res.warnings == ()
    res, _ = checked(job(2, GPU4), WebhookConfig(warn_when_full=True), busy)
    (warning,) = res.warnings
    assert warning.startswith("corral: gang job-big cannot start now:")


def test_the_live_snapshot_is_left_as_it_was() -> None:
    state = four_gpu_cluster(busy=True)
    before = state.snapshot.state()
    checked(job(3, {"cpu": "1"}), WebhookConfig(warn_when_full=True), state)
    assert state.snapshot.state() == before


def test_node_pool_pinning_is_seen_by_the_engine() -> None:
    cfg = parse_config({"nodePool": {"key": "pool", "value": "cpu"}})
    res, _ = checked(job(1, GPU4), cfg, four_gpu_cluster())
    (warning,) = res.warnings
    assert "node affinity mismatch" in warning


def test_bare_pod_gang_and_single_pods_are_checked() -> None:
    pod = bare_pod("w0", {"corral.dev/gang": "g", "corral.dev/min-available": "5"}, GPU4)
    res, _ = checked(review(pod), cluster=four_gpu_cluster())
    assert len(res.warnings) == 1 and "gang g can never start" in res.warnings[0]
    res, _ = checked(
        review(bare_pod("huge", None, {"nvidia.com/gpu": "16"})), cluster=four_gpu_cluster()
    )
    assert len(res.warnings) == 1


def test_multi_role_gangs_use_the_placement() -> None:
    state = four_gpu_cluster()
    from webhook.admission.gang_decision import shape  # the same shape reading admit uses

    cfg = WebhookConfig()
    big = shape(pod_template(GPU4), cfg)
    small = shape(pod_template({"cpu": "60"}), cfg)
    assert big is not None and small is not None
    # 4 GPU workers fill every GPU node's GPUs; a launcher of 60 CPUs fits only on c0 next to them
    assert check_gang(state, "a", [("launcher", small, 1), ("worker", big, 4)], 5).never == ""
    # two such launchers cannot both fit: one fits c0, the GPU nodes have 56 CPUs left
    v = check_gang(state, "b", [("launcher", small, 2), ("worker", big, 4)], 6)
    assert "5/6 required members fit" in v.never


def test_cached_reasons_do_not_carry_another_gangs_name() -> None:
    state = four_gpu_cluster()
    a, _ = checked(job(16, GPU8, annotations={"corral.dev/gang": "first"}), cluster=state)
    b, _ = checked(job(16, GPU8, annotations={"corral.dev/gang": "second"}), cluster=state)
    assert "gang first" in a.warnings[0] and "first" not in b.warnings[0]
    assert "gang second" in b.warnings[0]


def test_sample_cluster() -> None:
    state = ClusterCapacity.of(load_snapshot(None))
    res, _ = checked(job(16, GPU8), cluster=state)
    assert "can never start" in res.warnings[0]
    res, _ = checked(job(8, GPU8), cluster=state)
    assert res.warnings == ()


def test_answers_about_now_are_kept_until_the_view_changes() -> None:
    from gangplace.engine import PodShape

    snap = Snapshot.from_objects([node("a", 8)])
    state = ClusterCapacity.of(snap)
    shape = PodShape.of({"cpu": 1000}, gpus=8)
    assert check_gang(state, "g", [("w", shape, 1)], 1, now=True).now == ""
    # the live snapshot changes in place: without a new version the answer is kept
    snap.place_bound(shape, 0)
    assert check_gang(state, "g", [("w", shape, 1)], 1, now=True).now == ""
    state.version += 1
    assert "0/1 required members fit" in check_gang(state, "g", [("w", shape, 1)], 1, now=True).now


def test_the_check_places_with_the_configured_policy() -> None:
    """A greedy placement can miss a fit another policy finds: the check places as the
    cluster's scheduler does (``policy``), so its warning matches what that scheduler does."""
    from gangplace.engine import PodShape

    from webhook.admission.gang_decision import feasibility

    state = ClusterCapacity.of(Snapshot.from_objects([node("two", 2), node("four", 4)]))
    worker = PodShape.of({"cpu": 8000}, gpus=1)
    driver = PodShape.of({"cpu": 60000})
    roles = [("worker", worker, 3), ("driver", driver, 1)]
    # binpack leaves a worker on each node, so neither keeps the driver's 60 CPUs
    deny, warnings = feasibility(state, WebhookConfig(), "spark", roles, 4)
    assert deny is None
    assert warnings == [
        "corral: gang spark can never start on this cluster (even if it were empty): "
        + check_gang(state, "spark", roles, 4).never
    ]
    assert "3/4 required members fit" in warnings[0]
    # spread finds the placement that fits: no warning, and nothing denied
    assert feasibility(state, WebhookConfig(policy="spread"), "spark", roles, 4) == (None, [])
    deny, _ = feasibility(state, WebhookConfig(policy="spread", infeasible="deny"), "s", roles, 4)
    assert deny is None
    deny, _ = feasibility(state, WebhookConfig(infeasible="deny"), "s", roles, 4)
    assert deny is not None and deny.startswith("corral: gang s can never start")
