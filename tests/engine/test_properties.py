"""Invariants of the engine, over generated clusters and gangs."""

from __future__ import annotations

import numpy as np
from gangplace.engine import (
    Gang,
    GangOptions,
    PodShape,
    Snapshot,
    SpreadScorer,
    TaskRole,
    Toleration,
    place_gang,
    place_pod,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders.engine_json import node_json

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

nodes_st = st.lists(
    st.tuples(
        st.integers(1, 64),  # cores
        st.integers(1, 512),  # GiB
        st.sampled_from([0, 1, 2, 4, 8]),  # GPUs
        st.sampled_from(["a", "b", "c"]),  # rack
        st.booleans(),  # tainted
    ),
    min_size=1,
    max_size=10,
)

shape_st = st.builds(
    lambda cpu, mem, gpus, milli, tolerate: PodShape.of(
        {"cpu": cpu, "memory": mem * 2**30},
        gpus=gpus,
        gpu_milli=milli if gpus == 1 else None,
        tolerations=(Toleration("dedicated", "Exists"),) if tolerate else (),
    ),
    st.integers(0, 32_000),
    st.integers(0, 128),
    st.sampled_from([0, 0, 1, 1, 2, 4, 8]),
    st.sampled_from([100, 250, 500, 1000]),
    st.booleans(),
)

gang_st = st.builds(
    lambda roles, frac: Gang(
        "g",
        tuple(TaskRole(f"r{i}", s, n) for i, (s, n) in enumerate(roles)),
        max(1, int(sum(n for _, n in roles) * frac)),
    ),
    st.lists(st.tuples(shape_st, st.integers(1, 6)), min_size=1, max_size=3),
    st.floats(0.1, 1.0),
)


def build(spec: list[tuple[int, int, int, str, bool]]) -> Snapshot:
    taint = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    return Snapshot.from_objects(
        [
            node_json(
                f"n{i:02d}",
                str(c),
                f"{m}Gi",
                g,
                labels={"rack": r},
                taints=taint if t else None,
            )
            for i, (c, m, g, r, t) in enumerate(spec)
        ]
    )


def assert_not_overcommitted(s: Snapshot) -> None:
    assert (s.used <= s.alloc).all(), "a node is over its allocatable"
    assert (s.used >= 0).all()
    for i in range(s.n_nodes):
        devs = s.gpu_free[i, : s.gpu_total[i]]
        assert ((devs >= 0) & (devs <= 1000)).all(), "a GPU device over- or under-booked"


def recount(s: Snapshot, placed: list[tuple[PodShape, int, tuple[int, ...]]]) -> None:
    """``used`` and ``gpu_free`` equal a from-scratch sum of what was placed."""
    used = np.zeros_like(s.used)
    free = np.where(s.gpu_free >= 0, 1000, -1)
    for shape, node, gpus in placed:
        used[node] += s.vector(shape)[0]
        for g in gpus:
            free[node, g] -= shape.gpu_milli
    assert (used == s.used).all() and (free == s.gpu_free).all()


@SETTINGS
@given(nodes_st, st.lists(gang_st, min_size=1, max_size=6), st.booleans(), st.booleans())
def test_gangs_never_overcommit_and_are_all_or_nothing(
    spec: list[tuple[int, int, int, str, bool]], gangs: list[Gang], spread: bool, topo: bool
) -> None:
    s = build(spec)
    placed: list[tuple[PodShape, int, tuple[int, ...]]] = []
    opts = GangOptions(topology_key="rack" if topo else None)
    for gang in gangs:
        before = s.state()
        res = place_gang(s, gang, SpreadScorer() if spread else None, opts)
        if res.ok:
            assert res.placed >= gang.required
            per_role = {r.name: r for r in gang.roles}
            for a in res.assignments:
                placed.append((per_role[a.role].shape, a.node, a.gpus))
            need = gang.required_per_role()
            for role, n in zip(gang.roles, need, strict=True):
                assert sum(1 for a in res.assignments if a.role == role.name) >= n
        else:
            assert res.placed == 0 and res.reason
            assert s.state() == before
        assert_not_overcommitted(s)
    recount(s, placed)


@SETTINGS
@given(nodes_st, st.lists(gang_st, min_size=1, max_size=4))
def test_placement_is_deterministic(
    spec: list[tuple[int, int, int, str, bool]], gangs: list[Gang]
) -> None:
    runs = []
    for _ in range(2):
        s = build(spec)
        runs.append(
            [[(a.pod, a.node_name, a.gpus) for a in place_gang(s, g).assignments] for g in gangs]
        )
    assert runs[0] == runs[1]


@SETTINGS
@given(nodes_st, st.lists(shape_st, min_size=1, max_size=12), st.data())
def test_fork_revert_restores_exactly(
    spec: list[tuple[int, int, int, str, bool]], shapes: list[PodShape], data: st.DataObject
) -> None:
    s = build(spec)
    for shape in shapes[: len(shapes) // 2]:
        place_pod(s, shape)
    before = s.state()
    token = s.fork()
    for shape in shapes[len(shapes) // 2 :]:
        if data.draw(st.booleans(), label="nest"):
            inner = s.fork()
            place_pod(s, shape)
            if data.draw(st.booleans(), label="commit inner"):
                s.commit(inner)
            else:
                s.revert(inner)
        else:
            place_pod(s, shape)
    bound = [p for p in s.pods if p.bound]
    for p in bound[: data.draw(st.integers(0, len(bound)), label="removed")]:
        s.remove(p)
    s.revert(token)
    assert s.state() == before
    assert_not_overcommitted(s)
