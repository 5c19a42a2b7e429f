"""Gang membership is read back from pods in every backend's dialect."""

import json

import pytest
from gangplace.engine import Snapshot
from gangplace.engine.membership import group_pods, membership

from tests.builders.engine_json import node_json, pod_json


def with_keys(name: str, node: str = "n", annotations=None, labels=None) -> dict:
    p = pod_json(name, node, annotations=annotations)
    p["metadata"]["labels"] = labels or {}
    return p


@pytest.mark.parametrize(
    ("annotations", "labels", "expected"),
    [
        (
            {"scheduling.k8s.io/group-name": "pg", "scheduling.volcano.sh/queue-name": "ai"},
            {},
            ("pg", "volcano", None, "ai"),
        ),
        ({}, {"scheduling.x-k8s.io/pod-group": "pg"}, ("pg", "coscheduling", None, None)),
        (
            {"kueue.x-k8s.io/pod-group-total-count": "4"},
            {"kueue.x-k8s.io/pod-group-name": "pg", "kueue.x-k8s.io/queue-name": "lq"},
            ("pg", "kueue", 4, "lq"),
        ),
        (
            {
                "yunikorn.apache.org/task-group-name": "workers",
                "yunikorn.apache.org/task-groups": json.dumps(
                    [{"name": "workers", "minMember": 3}, {"name": "driver", "minMember": 1}]
                ),
            },
            {"applicationId": "app-1", "queue": "root.ai"},
            ("app-1", "yunikorn", 4, "root.ai"),
        ),
        (
            {"corral.dev/gang": "llm", "corral.dev/min-available": "4", "corral.dev/queue": "q"},
            {},
            ("llm", "corral", 4, "q"),
        ),
    ],
)
def test_each_dialect(annotations, labels, expected) -> None:
    s = Snapshot.from_objects(
        [node_json("n")], [with_keys("p", annotations=annotations, labels=labels)]
    )
    m = membership(s.pods[0])
    assert m is not None
    assert (m.gang, m.dialect, m.min_available, m.queue) == expected


def test_plain_pods_and_yunikorn_apps_without_task_groups_are_not_gangs() -> None:
    s = Snapshot.from_objects(
        [node_json("n")], [with_keys("a"), with_keys("b", labels={"applicationId": "x"})]
    )
    assert [membership(p) for p in s.pods] == [None, None]


def test_group_pods_by_namespace_and_name() -> None:
    key = {"scheduling.k8s.io/group-name": "job"}
    pods = [with_keys(f"w{i}", "n" if i < 3 else "", annotations=key) for i in range(4)]
    other = with_keys("x", annotations=key)
    other["metadata"]["namespace"] = "elsewhere"
    s = Snapshot.from_objects([node_json("n")], [*pods, other])
    groups = group_pods(s.pods)
    assert sorted(groups) == ["default/job", "elsewhere/job"]
    g = groups["default/job"]
    assert len(g.running) == 3 and [p.name for p in g.waiting] == ["w3"]
