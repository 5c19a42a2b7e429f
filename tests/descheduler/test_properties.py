"""Invariants of the planner over generated clusters: never a partial gang beyond its
extras, every victim fits again where the plan says, every limit and disruption budget
held, protected pods never evicted, no gang kept from starting, deterministic; never a
victim of higher priority than the gang it makes room for, never a gang moved for one
whose pods say preemptionPolicy Never, never a pod moved in a way that loses it (a Job
evicted past its backoffLimit, a pod that says safe-to-evict "false"), never a unit
moved with more work at risk than the configured caps, each move's work at risk the
engine's rule."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from gangplace.engine import Snapshot
from gangplace.engine.checkpoints import pod_work_at_risk
from gangplace.engine.feasibility import fits
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from descheduler import Plan, parse_config, plan, state_from_list
from descheduler.config import DeschedulerConfig
from descheduler.planning.gang_views import build_views
from tests.builders import objects as b
from tests.builders.descheduler_cluster import NOW, as_list, gpu_node, pdb, pod, podgroup, queue

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PROTECTIONS = ["none"] * 8 + ["daemonset", "no-controller", "evictable", "local", "safe-to-evict"]
# Who owns a running gang's pods: a ReplicaSet, or one Job of the gang with backoffLimit 6,
# backoffLimit 0, or backoffLimit 0 and the podFailurePolicy rule ignoring DisruptionTarget.
OWNERS = ["ReplicaSet", "ReplicaSet", "job-6", "job-0", "job-0", "job-pfp"]


@dataclass
class Running:
    size: int
    gpus: int
    min_frac: float
    protection: str
    queue: str
    budget: int | None
    age_h: int
    priority: int = 0
    owner: str = "ReplicaSet"
    run_min: int = 20  # minutes since its pods started
    checkpoint: str = ""  # "", "interval" (every 30m) or "last" (10 minutes ago)


# What a running gang says of its checkpoints, as pod annotations.
CHECKPOINTS = {
    "": {},
    "interval": {"corral.dev/checkpoint-interval": "30m"},
    "last": {"corral.dev/last-checkpoint": "2026-12-02T11:50:00Z"},
}


running_st = st.builds(
    Running,
    st.integers(1, 4),
    st.sampled_from([1, 1, 1, 2, 2, 4]),
    st.sampled_from([0.5, 1.0]),
    st.sampled_from(PROTECTIONS),
    st.sampled_from(["a", "a", "b", "b", "locked"]),
    st.sampled_from([None, None, None, 0, 1, 8]),
    st.integers(0, 200),
    st.sampled_from([0, 0, 0, 500, 1000, 5000]),
    st.sampled_from(OWNERS),
)
# size, GPUs per pod, queue, priority, preemptionPolicy
waiting_st = st.tuples(
    st.integers(1, 3),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from(["a", "b"]),
    st.sampled_from([1000, 1000, 1000, 0, 500]),
    st.sampled_from(["", "", "", "Never"]),
)
limits_st = st.fixed_dictionaries(
    {
        "max_evictions_per_run": st.sampled_from([None, None, 2, 5]),
        "max_evictions_per_node": st.sampled_from([None, None, None, 1, 3]),
        "max_evictions_per_namespace": st.sampled_from([None, None, None, 2, 4]),
        "max_evictions_per_queue": st.sampled_from([None, None, None, 2, 4]),
        "max_gpus_disrupted_per_run": st.sampled_from([None, None, None, 2.0, 6.0]),
    }
)


def build(
    node_gpus: list[int],
    gangs: list[Running],
    waiting: list[tuple[int, int, str, int, str]],
    order: list[int],
    fill: float = 1.0,
) -> tuple[dict[str, Any], set[str]]:
    """A List; and the names of pods that must never be evicted. Running pods go first
    fit from generated starting nodes (fragmented on purpose) until ``fill`` of the
    GPUs are used."""
    items: list[Any] = [
        gpu_node(f"n{i}", g, cpu="64", memory="512Gi") for i, g in enumerate(node_gpus)
    ]
    items += [queue("a"), queue("b"), queue("locked", reclaimable=False)]
    free = list(node_gpus)
    protected: set[str] = set()
    k = 0
    for gi, g in enumerate(gangs):
        name = f"g{gi}"
        ns = f"ns{gi % 3}"
        pods = []
        for j in range(g.size):
            if sum(node_gpus) - sum(free) + g.gpus > fill * sum(node_gpus):
                break
            start = order[k % len(order)] % len(free)
            k += 1
            node = next(
                (
                    f"n{(start + t) % len(free)}"
                    for t in range(len(free))
                    if free[(start + t) % len(free)] >= g.gpus
                ),
                None,
            )
            if node is None:
                continue
            free[int(node[1:])] -= g.gpus
            kw: dict[str, Any] = {}
            if g.protection == "daemonset":
                kw["owner_kind"] = "DaemonSet"
            elif g.protection == "no-controller":
                kw["owner_kind"] = ""
            elif g.protection == "evictable":
                kw["annotations"] = {"corral.dev/evictable": "false"}
            elif g.protection == "local":
                kw["volumes"] = [{"name": "s", "emptyDir": {}}]
            elif g.protection == "safe-to-evict":
                kw["annotations"] = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
            if g.owner != "ReplicaSet" and "owner_kind" not in kw:
                kw["owner_kind"] = "Job"
            ann = {
                "scheduling.volcano.sh/queue-name": g.queue,
                **CHECKPOINTS[g.checkpoint],
                **kw.pop("annotations", {}),
            }
            created = f"2026-11-{1 + g.age_h // 24:02d}T{g.age_h % 24:02d}:00:00Z"
            started = (NOW - timedelta(minutes=g.run_min)).strftime("%Y-%m-%dT%H:%M:%SZ")
            pods.append(
                pod(
                    f"{name}-{j}",
                    node,
                    g.gpus,
                    namespace=ns,
                    gang=name,
                    annotations=ann,
                    labels={"app": name},
                    created=created,
                    started=started,
                    cpu="2",
                    memory="8Gi",
                    priority=g.priority,
                    **kw,
                )
            )
        if not pods:
            continue
        if g.owner != "ReplicaSet":
            items.append(
                b.job(
                    name,
                    ns,
                    backoff_limit=6 if g.owner == "job-6" else 0,
                    parallelism=len(pods),
                    ignore_disruption=g.owner == "job-pfp",
                    uid=f"uid-owner-{name}",
                )
            )
        if g.protection != "none" or g.queue == "locked":
            protected.update(f"{ns}/{p['metadata']['name']}" for p in pods)
        items += pods
        items.append(
            podgroup(name, max(1, int(len(pods) * g.min_frac)), namespace=ns, queue=g.queue)
        )
        if g.budget is not None:
            items.append(pdb(f"pdb-{name}", {"app": name}, g.budget, namespace=ns))
    for wi, (size, gpus, q, prio, policy) in enumerate(waiting):
        name = f"w{wi}"
        items.append(podgroup(name, size, namespace="wait", queue=q, phase="Pending"))
        for j in range(size):
            x = pod(
                f"{name}-{j}",
                "",
                gpus,
                namespace="wait",
                gang=name,
                cpu="2",
                memory="8Gi",
                annotations={"scheduling.volcano.sh/queue-name": q},
                priority=prio,
            )
            if policy:
                x["spec"]["preemptionPolicy"] = policy
            items.append(x)
    return as_list(items), protected


def check_plan(doc: dict[str, Any], p: Plan, cfg: DeschedulerConfig, protected: set[str]) -> None:
    st_ = state_from_list(doc, NOW)
    snap: Snapshot = st_.snapshot
    pods = {pp.key: pp for pp in snap.pods}
    groups: dict[str, list[str]] = {}
    for pp in snap.pods:
        gname = pp.annotations.get("scheduling.k8s.io/group-name")
        if gname:
            groups.setdefault(f"{pp.namespace}/{gname}", []).append(pp.key)
    min_member = {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["spec"]["minMember"]
        for o in doc["items"]
        if o["kind"] == "PodGroup"
    }
    evicted = [pm.key for m in p.moves for pm in m.pods]
    assert len(evicted) == len(set(evicted)), "a pod evicted twice"
    assert len({m.unit for m in p.moves}) == len(p.moves), "a unit moved twice"

    # never a partial gang beyond the members above minAvailable
    for m in p.moves:
        members = [k for k in groups.get(m.unit, []) if pods[k].node_name]
        keys = {pm.key for pm in m.pods}
        assert keys <= set(members)
        if m.partial:
            assert len(keys) <= len(members) - min_member[m.unit]
        else:
            assert keys == set(members)
        if m.kind == "release-stale":
            assert all(pm.target is None for pm in m.pods)
        elif all(pm.target is None for pm in m.pods):  # suspended for capacity room
            assert cfg.capacity_room.enabled and m.method == "suspend" and not m.partial
        else:
            assert all(pm.target is not None for pm in m.pods)

    # protected pods and non-reclaimable queues are never touched
    assert not (set(evicted) & protected)

    # priority is a rule: a victim outranks nobody it makes room for; a waiting gang
    # that says preemptionPolicy Never gets no room made
    prio = {v.key: v.priority for v in build_views(st_, cfg.queue_default).values()}
    never = {
        f"{pp.namespace}/{pp.annotations['scheduling.k8s.io/group-name']}"
        for pp in snap.pods
        if pp.preemption_policy == "Never"
    }
    for m in p.moves:
        assert m.priority == prio[m.unit]
        if m.for_gang is not None:
            assert m.for_gang not in never
            if all(pm.target is None for pm in m.pods):  # capacity room
                equal = cfg.capacity_room.equal_priority and m.priority == prio[m.for_gang]
                assert m.priority < prio[m.for_gang] or equal, (m.unit, m.for_gang)
            elif cfg.eviction.victim_priority == "LowerPriority":
                assert m.priority < prio[m.for_gang], (m.unit, m.for_gang)
            else:
                assert m.priority <= prio[m.for_gang], (m.unit, m.for_gang)

    # never a unit moved with more work at risk than the caps; each move's work at risk
    # is the engine's rule over its pods
    for m in p.moves:
        if m.kind == "release-stale":
            continue
        expected = sum(pod_work_at_risk(pods[pm.key], NOW) for pm in m.pods) / 3600
        assert m.at_risk == pytest.approx(expected, abs=1e-9)
        caps = [cfg.moves.max_gpu_hours_at_risk]
        if m.kind == "defragment":
            caps.append(cfg.defragment.max_gpu_hours_at_risk)
        for cap in caps:
            assert cap is None or m.at_risk <= cap + 1e-9, (m.unit, m.at_risk, cap)

    # never a pod moved in a way that loses it
    jobs = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in doc["items"]
        if o["kind"] == "Job"
    }
    for m in p.moves:
        owners = {(pods[pm.key].owner_kind, pods[pm.key].owner_name) for pm in m.pods}
        if m.method == "suspend":
            assert not m.partial and m.kind != "release-stale"
            assert owners == {("Job", name) for _, _, name in (w.split("/") for w in m.workloads)}
            continue
        for kind, name in owners:
            assert kind in ("ReplicaSet", "Job"), kind
            if kind == "Job":
                spec = jobs[(m.namespace, name)]["spec"]
                n = sum(1 for pm in m.pods if pods[pm.key].owner_name == name)
                assert "podFailurePolicy" in spec or n <= spec["backoffLimit"]

    # limits
    lim = cfg.limits
    if lim.max_evictions_per_run is not None:
        assert len(evicted) <= lim.max_evictions_per_run
    per_node = Counter(pods[k].node_name for k in evicted)
    per_ns = Counter(pods[k].namespace for k in evicted)
    per_q = Counter(m.queue for m in p.moves for _ in m.pods)
    if lim.max_evictions_per_node is not None:
        assert max(per_node.values(), default=0) <= lim.max_evictions_per_node
    if lim.max_evictions_per_namespace is not None:
        assert max(per_ns.values(), default=0) <= lim.max_evictions_per_namespace
    if lim.max_evictions_per_queue is not None:
        assert max(per_q.values(), default=0) <= lim.max_evictions_per_queue
    if lim.max_gpus_disrupted_per_run is not None:
        gpus = sum(pods[k].shape.gpu_demand_milli for k in evicted)
        assert gpus <= lim.max_gpus_disrupted_per_run * 1000

    # disruption budgets
    for o in doc["items"]:
        if o["kind"] != "PodDisruptionBudget":
            continue
        app = o["spec"]["selector"]["matchLabels"]["app"]
        ns = o["metadata"]["namespace"]
        hit = [k for k in evicted if pods[k].namespace == ns and pods[k].labels.get("app") == app]
        assert len(hit) <= o["status"]["disruptionsAllowed"]

    # every victim fits where the plan puts it, all moves made at once
    for k in evicted:
        snap.remove(pods[k])
    for m in p.moves:
        for pm in m.pods:
            if pm.target is None:
                continue
            pp = pods[pm.key]
            node = snap.node_index[pm.target]
            assert fits(snap, pp.shape, np.array([node]))[0]
            assert all(snap.gpu_free[node, g] >= pp.shape.gpu_milli for g in pm.target_gpus)
            snap.place(pp.shape, node, pm.target_gpus, pod=pp)
    assert (snap.used <= snap.alloc).all()
    assert (snap.gpu_free[snap.gpu_free >= 0] <= 1000).all()

    # a gang a move serves starts; no gang that could start is kept from it
    served = {m.for_gang for m in p.moves if m.for_gang}
    assert not (served & set(p.waiting_after))
    released = {m.unit for m in p.moves if m.kind == "release-stale"}
    assert set(p.waiting_after) <= set(p.waiting_before) | released


@pytest.mark.slow
@SETTINGS
@given(
    st.lists(st.sampled_from([4, 8, 8]), min_size=2, max_size=6),
    st.lists(running_st, min_size=1, max_size=12),
    st.lists(waiting_st, min_size=0, max_size=3),
    st.lists(st.integers(0, 50), min_size=1, max_size=20),
    st.floats(0.3, 0.8),
    limits_st,
    st.sampled_from(["binpack", "fgd"]),
    st.sampled_from(["LowerPriority", "LowerOrEqualPriority"]),
    st.booleans(),
)
def test_plan_invariants(
    node_gpus: list[int],
    gangs: list[Running],
    waiting: list[tuple[int, int, str, int, str]],
    order: list[int],
    fill: float,
    limits: dict[str, Any],
    policy: str,
    victim_priority: str,
    suspend: bool,
) -> None:
    doc, protected = build(node_gpus, gangs, waiting, order, fill)
    cfg = parse_config(
        {
            "limits": limits,
            "scheduling": {"policy": policy},
            "defragment": {"min_gain_gpus": 0.1, "min_total_gain_gpus": 0.1},
            "eviction": {"victim_priority": victim_priority},
            "moves": {"suspend": suspend},
        }
    )
    st_ = state_from_list(doc, NOW)
    fingerprint = st_.snapshot.state()
    p = plan(st_, cfg)
    assert st_.snapshot.state() == fingerprint, "the planner changed its input"
    check_plan(doc, p, cfg, protected)
    for m in p.moves:
        event(f"{m.kind} by {m.method}")
    again = plan(state_from_list(doc, NOW), cfg)
    assert again.to_dict() == p.to_dict(), "not deterministic"


small_st = st.builds(
    Running,
    st.integers(1, 3),
    st.sampled_from([1, 1, 2]),
    st.sampled_from([0.5, 1.0]),
    st.sampled_from(["none"] * 12 + ["evictable"]),
    st.sampled_from(["a", "b"]),
    st.sampled_from([None] * 6 + [0, 1]),
    st.integers(0, 200),
    st.sampled_from([0, 0, 0, 5000]),
    st.sampled_from(OWNERS),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(3, 6),
    st.lists(small_st, min_size=4, max_size=16),
    st.tuples(
        st.integers(1, 2),
        st.sampled_from([4, 6, 8]),
        st.just("b"),
        st.sampled_from([1000, 1000, 1000, 0, 5000]),
        st.sampled_from(["", "", "", "", "Never"]),
    ),
    st.one_of(st.just(list(range(64))), st.lists(st.integers(0, 50), min_size=1, max_size=20)),
    st.floats(0.25, 0.6),
    st.one_of(st.just({}), limits_st),
    st.sampled_from(["LowerPriority", "LowerOrEqualPriority"]),
)
def test_plan_invariants_when_small_jobs_scatter(
    n_nodes: int,
    gangs: list[Running],
    waiting: tuple[int, int, str, int, str],
    order: list[int],
    fill: float,
    limits: dict[str, Any],
    victim_priority: str,
) -> None:
    """Small jobs scattered over 8-GPU nodes and a big gang waiting: moves are the rule."""
    doc, protected = build([8] * n_nodes, gangs, [waiting], order, fill)
    cfg = parse_config({"limits": limits, "eviction": {"victim_priority": victim_priority}})
    p = plan(state_from_list(doc, NOW), cfg)
    check_plan(doc, p, cfg, protected)
    for m in p.moves:
        event(f"{m.kind} by {m.method}")


risky_st = st.builds(
    Running,
    st.integers(1, 3),
    st.sampled_from([1, 1, 2, 4]),
    st.sampled_from([0.5, 1.0]),
    st.just("none"),
    st.sampled_from(["a", "b"]),
    st.just(None),
    st.integers(0, 200),
    st.sampled_from([0, 0, 500, 1000, 5000]),
    st.sampled_from(["ReplicaSet", "job-6", "job-pfp"]),
    st.integers(0, 600),
    st.sampled_from(["", "", "interval", "last"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(3, 6),
    st.lists(risky_st, min_size=4, max_size=16),
    st.lists(
        st.tuples(
            st.integers(1, 2),
            st.sampled_from([4, 6, 8]),
            st.sampled_from(["a", "b"]),
            st.sampled_from([1000, 1000, 0, 500]),
            st.just(""),
        ),
        max_size=2,
    ),
    st.one_of(st.just(list(range(64))), st.lists(st.integers(0, 50), min_size=1, max_size=20)),
    st.floats(0.5, 1.0),
    st.sampled_from([None, None, 8.0, 2.0, 0.5]),
    st.sampled_from([None, 1.0, 0.25]),
    st.booleans(),
    st.sampled_from(["LowerPriority", "LowerOrEqualPriority"]),
    st.sampled_from([None, "lower", "lower", "equal"]),
)
def test_no_plan_inverts_priority_or_moves_above_the_work_at_risk_cap(
    n_nodes: int,
    gangs: list[Running],
    waiting: list[tuple[int, int, str, int, str]],
    order: list[int],
    fill: float,
    cap: float | None,
    defrag_cap: float | None,
    defrag: bool,
    victim_priority: str,
    capacity: str | None,
) -> None:
    """Gangs that ran from minutes to ten hours, some checkpointing: whatever the caps
    and the capacity room, no victim outranks the gang it makes room for and none has
    more work at risk than the caps allow (check_plan)."""
    doc, protected = build([8] * n_nodes, gangs, waiting, order, fill)
    cfg = parse_config(
        {
            "moves": {"max_gpu_hours_at_risk": cap},
            "defragment": {
                "enabled": defrag,
                "max_gpu_hours_at_risk": defrag_cap,
                "min_gain_gpus": 0.1,
                "min_total_gain_gpus": 0.1,
            },
            "eviction": {"victim_priority": victim_priority},
            "capacity_room": {
                "enabled": capacity is not None,
                "after": 0,
                "equal_priority": capacity == "equal",
            },
        }
    )
    p = plan(state_from_list(doc, NOW), cfg)
    check_plan(doc, p, cfg, protected)
    for m in p.moves:
        if all(pm.target is None for pm in m.pods) and m.kind == "make-room":
            event("capacity room")
        event(f"{m.kind}, at risk {'<=' if m.at_risk <= 1 else '>'} 1 GPU-hour")
    for u in p.unserved:
        event(f"unserved: {u.reason.split(':')[0][:60]}")
