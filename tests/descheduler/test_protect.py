"""The descheduler's never-evict rules on their own: each pod rule names the pod and
the rule; one protected member, a recent move, an opted-out gang or a queue that is not
reclaimable protects the whole gang."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from gangplace.engine import PodRecord, PodShape, Queue

from descheduler import parse_config, state_from_list
from descheduler.config import EvictionRules
from descheduler.planning.gang_views import build_views
from descheduler.planning.protect import gang_protection, pod_protection
from tests.builders.descheduler_cluster import NOW, as_list, gang, gpu_node

RULES = EvictionRules()


def rec(**kw: Any) -> PodRecord:
    base: dict[str, Any] = {
        "namespace": "ml",
        "name": "p",
        "shape": PodShape.of({"cpu": 1}, gpus=1),
        "node_name": "n0",
        "phase": "Running",
        "owner_kind": "ReplicaSet",
        "owner_name": "rs",
        "created": "2026-12-02T08:00:00Z",
    }
    return PodRecord(**{**base, **kw})


def test_an_ordinary_running_pod_with_a_controller_may_go() -> None:
    assert pod_protection(rec(), RULES, NOW) is None


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"owner_kind": "DaemonSet", "owner_name": "agent"}, "pod ml/p belongs to DaemonSet agent"),
        (
            {"annotations": {"kubernetes.io/config.mirror": "x"}},
            "pod ml/p is a static (mirror) pod",
        ),
        ({"owner_kind": ""}, "pod ml/p has no controller to recreate it"),
        (
            {"priority_class": "system-node-critical"},
            "pod ml/p has priority class system-node-critical",
        ),
        ({"priority": 2_000_000_000}, "pod ml/p has system-critical priority 2000000000"),
        ({"namespace": "kube-system"}, "namespace kube-system is excluded"),
        (
            {"annotations": {"corral.dev/evictable": " False "}},
            'pod ml/p is annotated corral.dev/evictable: "false"',
        ),
        (
            {"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
            'pod ml/p is annotated cluster-autoscaler.kubernetes.io/safe-to-evict: "false"',
        ),
        (
            {"annotations": {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}},
            "pod ml/p is annotated descheduler.alpha.kubernetes.io/prefer-no-eviction",
        ),
        ({"local_storage": True}, "pod ml/p has local storage (emptyDir or hostPath)"),
        ({"phase": "Pending"}, "pod ml/p is Pending, not Running"),
    ],
)
def test_each_pod_rule_names_the_pod_and_the_rule(kw: dict[str, Any], why: str) -> None:
    assert pod_protection(rec(**kw), RULES, NOW) == why


def test_the_configurable_pod_rules() -> None:
    rules = parse_config(
        {
            "eviction": {
                "included_namespaces": ["ml"],
                "evict_local_storage_pods": True,
                "min_pod_age": "1h",
            }
        }
    ).eviction
    assert pod_protection(rec(local_storage=True), rules, NOW) is None
    assert pod_protection(rec(namespace="web"), rules, NOW) == "namespace web is not included"
    young = rec(created="2026-12-02T11:30:00Z")
    assert pod_protection(young, rules, NOW) == "pod ml/p is younger than 1h"
    assert pod_protection(young, RULES, NOW) is None  # no minimum age by default


def views(**gang_kw: Any) -> dict[str, Any]:
    items = [gpu_node("n0"), *gang("train", ["n0", "n0"], 1, **gang_kw)]
    st = state_from_list(as_list(items), NOW)
    return {"state": st, "view": build_views(st, "default")["default/train"]}


def test_a_protected_member_protects_its_whole_gang() -> None:
    v = views()["view"]
    assert gang_protection(v, RULES, {}, NOW) is None
    v.pods[1].annotations["corral.dev/evictable"] = "false"
    assert gang_protection(v, RULES, {}, NOW) == (
        f'pod {v.pods[1].key} is annotated corral.dev/evictable: "false"'
    )


def test_gang_rules_cool_down_opt_out_and_queue() -> None:
    v = views(pg_annotations={"corral.dev/evictable": "false"})["view"]
    assert gang_protection(v, RULES, {}, NOW) == (
        f'{v.describe()} is annotated corral.dev/evictable: "false"'
    )
    moved = (NOW - timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    v = views(pg_annotations={"corral.dev/last-moved": moved})["view"]
    assert gang_protection(v, RULES, {}, NOW) == (
        f"{v.describe()} was moved 20m ago (cool-down 1h)"
    )
    assert gang_protection(v, RULES, {}, NOW + timedelta(hours=1)) is None
    v = views()["view"]
    closed = {v.queue: Queue(v.queue, reclaimable=False)}
    assert gang_protection(v, RULES, closed, NOW) == f"queue {v.queue} is not reclaimable"
