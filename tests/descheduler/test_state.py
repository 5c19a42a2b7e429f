"""Building the planner's state from a List: PodGroups of both APIs, Queues, PDBs,
PriorityClasses; units and demand; errors that name the object."""

from __future__ import annotations

from typing import Any

import pytest
from gangplace.engine.selectors import LabelSelector, SelectorError
from gangplace.engine.timeparse import TimeFormatError, format_duration, parse_duration, parse_time

from descheduler import StateError, state_from_list
from descheduler.planning.gang_demand import demand_of
from descheduler.planning.gang_views import build_views
from tests.builders.descheduler_cluster import (
    NOW,
    as_list,
    gang,
    gpu_node,
    pdb,
    pod,
    podgroup,
    queue,
)


def test_objects_are_read() -> None:
    items: list[Any] = [gpu_node("n0")]
    items += gang("g", ["n0", "n0"], 1, queue="research", min_member=1)
    items.append(podgroup("cs", 3, api="scheduling.x-k8s.io/v1alpha1"))
    items[-1]["spec"]["scheduleTimeoutSeconds"] = 120
    items.append(queue("research", 3, reclaimable=False, capability={"nvidia.com/gpu": "16"}))
    items.append(pdb("b", {"app": "x"}, 2))
    items.append({"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000})
    items.append(pod("p", "n0", 1, priority_class="high"))
    items.append({"kind": "Service", "metadata": {"name": "ignored"}})
    st = state_from_list(as_list(items), NOW)
    g = st.podgroups["default/g"]
    assert (g.api_group, g.min_member, g.queue, g.phase) == (
        "scheduling.volcano.sh",
        1,
        "research",
        "Running",
    )
    cs = st.podgroups["default/cs"]
    assert cs.api_group == "scheduling.x-k8s.io" and cs.timeout == 120.0
    q = st.queues["research"]
    assert q.weight == 3 and not q.reclaimable and q.capability == {"gpu": 16000}
    assert st.pdbs[0].disruptions_allowed == 2 and st.pdbs[0].current
    assert st.priority_classes == {"high": 1000}
    assert next(p for p in st.snapshot.pods if p.name == "p").priority == 1000


def test_units_gangs_lone_pods_and_podgroups_without_pods() -> None:
    items: list[Any] = [gpu_node("n0")]
    items += gang("g", ["n0"], 1, pending=1, min_member=2)
    items.append(pod("lone", "n0", 1))
    items.append(podgroup("nopods", 2, phase="Pending", min_resources={"nvidia.com/gpu": "4"}))
    st = state_from_list(as_list(items), NOW)
    views = build_views(st, "default")
    assert set(views) == {"default/g", "default/pod:lone", "default/nopods"}
    g = views["default/g"]
    assert g.is_gang and len(g.running) == 1 and len(g.pending) == 1 and g.extras == 0
    d = demand_of(g)
    assert d is not None and d.gang.required == 1 and not d.estimated
    whole = demand_of(g, whole=True)
    assert whole is not None and whole.gang.required == 2
    est = demand_of(views["default/nopods"])
    assert est is not None and est.estimated and est.gang.required == 2
    assert est.gang.roles[0].shape.gpu_count == 2
    assert demand_of(views["default/pod:lone"]) is None


def test_timeouts_from_annotations() -> None:
    items: list[Any] = [gpu_node("n0")]
    items += gang("a", ["n0"], 1, pg_annotations={"corral.dev/gang-timeout": "10m"})
    items += gang("b", ["n0"], 1, pg_annotations={"volcano.sh/sla-waiting-time": "1h"})
    st = state_from_list(as_list(items), NOW)
    views = build_views(st, "default")
    assert views["default/a"].timeout == 600 and views["default/b"].timeout == 3600


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (podgroup("pg", 1, created="yesterday"), "PodGroup default/pg: creationTimestamp"),
        ({**podgroup("pg", 1), "spec": {"minMember": "x"}}, "PodGroup default/pg: spec.minMember"),
        (
            podgroup("pg", 1, annotations={"corral.dev/gang-timeout": "soon"}),
            "PodGroup default/pg: annotation corral.dev/gang-timeout",
        ),
        ({**queue("q"), "spec": {"weight": "heavy"}}, "Queue q: spec.weight"),
        ({**queue("q"), "spec": {"reclaimable": "no"}}, "Queue q: spec.reclaimable"),
        (
            {**queue("q"), "spec": {"capability": {"cpu": "lots"}}},
            "Queue q: capability",
        ),
        (
            {
                **pdb("b", {}, 1),
                "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}},
            },
            "PodDisruptionBudget default/b",
        ),
        ({"kind": "PriorityClass", "metadata": {"name": "p"}, "value": "x"}, "PriorityClass p"),
        (pod("bad", "n0", 1, cpu="lots"), "pod default/bad"),
    ],
)
def test_errors_name_the_object(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(StateError, match=message):
        state_from_list(as_list(gpu_node("n0"), obj), NOW)


def test_bad_lists() -> None:
    with pytest.raises(StateError, match="items"):
        state_from_list({"kind": "List"}, NOW)
    with pytest.raises(StateError, match=r"items\[0\]"):
        state_from_list({"items": ["x"]}, NOW)


def test_label_selectors() -> None:
    sel = LabelSelector.from_json(
        {
            "matchLabels": {"app": "a"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["x", "y"]},
                {"key": "canary", "operator": "DoesNotExist"},
            ],
        }
    )
    assert sel.matches({"app": "a", "tier": "x"})
    assert not sel.matches({"app": "a", "tier": "z"})
    assert not sel.matches({"app": "a", "tier": "x", "canary": "1"})
    assert LabelSelector.from_json({}).matches({"anything": "1"})
    assert not LabelSelector.from_json(None).matches({})
    notin = LabelSelector.from_json(
        {"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["a"]}]}
    )
    assert notin.matches({}) and not notin.matches({"t": "a"})
    with pytest.raises(SelectorError):
        LabelSelector.from_json({"matchExpressions": [{"key": "t", "operator": "In"}]})


def test_durations_and_times() -> None:
    assert parse_duration("1h30m") == 5400 and parse_duration("90s") == 90
    assert parse_duration("1.5h") == 5400 and parse_duration(" 45 ") == 45
    assert parse_duration(10) == 10.0 and parse_duration("250ms") == 0.25
    for bad in ("", "m", "10x", "1h 30m", "-1m", True):
        with pytest.raises(TimeFormatError):
            parse_duration(bad)  # type: ignore[arg-type]
    # Hundreds of digits read as inf, and datetime arithmetic overflows long before.
    assert parse_duration("876000h") == 100 * 365 * 86400
    for huge in ("9" * 400 + "h", "9" * 400, "876001h", 1e300, float("nan")):
        with pytest.raises(TimeFormatError, match="too long"):
            parse_duration(huge)
    # Annotations need a unit, as Go's time.ParseDuration does ("0" alone aside).
    assert parse_duration(".5h", numbers=False) == 1800 and parse_duration("0", numbers=False) == 0
    for bare in ("45", " 45 ", 45):
        with pytest.raises(TimeFormatError, match="allowed: a duration made of numbers"):
            parse_duration(bare, numbers=False)
    with pytest.raises(TimeFormatError, match=r'"2h" is too long: at most 3600s'):
        parse_duration("2h", at_most=3600)
    assert format_duration(5400) == "1h30m" and format_duration(0) == "0s"
    assert parse_time("2026-12-02T12:00:00Z") == NOW
    assert parse_time("2026-12-02T14:00:00+02:00") == NOW
    for bad in ("2026-12-02T12:00:00", "noon"):
        with pytest.raises(TimeFormatError):
            parse_time(bad)
