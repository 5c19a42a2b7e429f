"""The gangs table's statuses hold on any cluster: the waiting gangs called
``can-start`` all start together, served in the scheduler's order; each ``competing``
gang fits alone and names gangs called ``can-start`` that it competes with; ``blocked``
gangs do not fit alone. And the snapshot is left as it was."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gangplace.engine import EngineConfig, GangOptions, Snapshot, place_gang
from hypothesis import event, given, settings
from hypothesis import strategies as st

from descheduler.api import build_views, demand_of, state_from_objects, waiting_order
from kubectl_corral.gang_table import BLOCKED, CAN_START, COMPETING, gang_rows
from tests.kubeapi import objects as o
from tests.plugin.scattered_cluster import waiting_gang

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 5))):
        items.append(o.node(f"n{i}", gpus=8, gpu_model="A100", cpu="64", memory="512Gi"))
        used = draw(st.integers(0, 8))
        if used:
            items.append(o.pod(f"busy-{i}", "ml", node=f"n{i}", gpus=used))
    for g in range(draw(st.integers(1, 6))):
        items += waiting_gang(f"g{g}", draw(st.integers(1, 3)), draw(st.integers(1, 5)))
    return items


@settings(max_examples=40, deadline=None)
@given(clusters())
def test_statuses_hold(items: list[dict[str, Any]]) -> None:
    nodes = [x for x in items if x["kind"] == "Node"]
    pods = [x for x in items if x["kind"] == "Pod"]
    others = [x for x in items if x["kind"] not in ("Node", "Pod")]
    state = state_from_objects(Snapshot.from_objects(nodes, pods, EngineConfig()), NOW, others)
    before = state.snapshot.state()
    order = waiting_order(state)
    rows = {f"{r.namespace}/{r.name}": r for r in gang_rows(state, order=order)}
    assert state.snapshot.state() == before
    views = build_views(state, "default")
    opts = GangOptions(best_effort=False)

    def fits_alone(key: str) -> bool:
        demand = demand_of(views[key])
        assert demand is not None
        dry = GangOptions(best_effort=False, dry_run=True)
        return place_gang(state.snapshot, demand.gang, options=dry).ok

    for key, row in rows.items():
        event(row.status)
        if row.status == BLOCKED:
            assert not fits_alone(key)
        if row.status == COMPETING:
            assert fits_alone(key) and row.competes_with
            assert all(rows[k].status == CAN_START for k in row.competes_with)
    assert {k for k, r in rows.items() if r.status != "running"} <= set(order)
    with state.snapshot.what_if():
        for key in [k for k in order if rows[k].status == CAN_START]:
            demand = demand_of(views[key])
            assert demand is not None
            assert place_gang(state.snapshot, demand.gang, options=opts).ok, key
