"""The gangs of a cluster: members placed, minAvailable, waiting, and why a waiting gang
cannot start, in the engine's words (a dry-run all-or-nothing placement of the members
it still needs on the cluster as it is now). Gangs that each fit alone are then placed
one after another in the order the scheduler serves them, so that gangs competing for
the same room are told apart from those that can all start."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from gangplace.engine import GangOptions, place_gang
from gangplace.engine.feasibility import fits
from gangplace.engine.membership import membership

from descheduler.api import (
    ClusterState,
    Demand,
    GangView,
    SchedulingConfig,
    build_views,
    demand_of,
)
from kubectl_corral.room import scattered_gpus

__all__ = ["GangRow", "gang_rows", "render_gangs"]

RUNNING = "running"  # at least minAvailable members are on nodes
CAN_START = "can-start"  # waiting, and the members it needs fit now
COMPETING = "competing"  # waiting; it fits alone now, not after the gangs served before it
BLOCKED = "blocked"  # waiting, and they do not fit
NO_PODS = "no-pods"  # a PodGroup whose pods do not exist (or say too little) yet


@dataclass(slots=True)
class GangRow:
    namespace: str
    name: str
    keys: str  # the dialect its pods carry (volcano, coscheduling, ...), or its PodGroup's
    queue: str
    pods: int
    placed: int
    min_available: int
    waiting: int
    phase: str  # the PodGroup's status.phase, if it has one
    status: str
    reason: str
    # Where the members it needs fit now, alone (can-start and competing gangs).
    nodes: list[str] = field(default_factory=list)
    # The waiting gangs that want the same room: served before it (competing), or after
    # it (can-start).
    competes_with: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _keys(view: GangView) -> str:
    for p in view.pods:
        m = membership(p)
        if m is not None:
            return m.dialect
    if view.podgroup is not None:
        return view.podgroup.api_group
    return ""


def _options(scheduling: SchedulingConfig, dry_run: bool) -> GangOptions:
    return GangOptions(
        fewest_nodes=scheduling.fewest_nodes,
        topology_key=scheduling.topology_key,
        best_effort=False,
        dry_run=dry_run,
    )


def evaluate(
    view: GangView, state: ClusterState, scheduling: SchedulingConfig, ask: str | None = None
) -> tuple[str, str, list[str]]:
    """(status, reason, nodes it fits on) of one gang on the cluster as it is; a reason
    that names a member names the pod ``ask`` when it is one of the same shape."""
    placed = len(view.running)
    if placed >= view.min_available and view.min_available > 0:
        return RUNNING, "", []
    demand = demand_of(view)
    if demand is None:
        if not view.pods:
            return NO_PODS, "no member pods yet, and its PodGroup names no minResources", []
        return RUNNING, "", []
    res = place_gang(state.snapshot, demand.gang, options=_options(scheduling, dry_run=True))
    if res.ok:
        nodes = res.nodes()
        return CAN_START, _fits_now(demand, nodes), nodes
    why = _name_members(res.why, view, ask)
    # explain (``ask``) says it in full; the table points there
    spread = scattered_gpus(state.snapshot, demand.gang) if ask is None else None
    if spread is not None:
        why += (
            f"; {spread.idle:g} GPUs idle where its members may go, but scattered (at most "
            f"{spread.largest_piece:g} on one node): explain one of its pods for where, and "
            "what frag --plan would move"
        )
    return BLOCKED, why, []


def _fits_now(demand: Demand, nodes: Sequence[str], after: str = "") -> str:
    est = " (sizes estimated from its PodGroup's minResources)" if demand.estimated else ""
    return (
        f"the {demand.gang.required} member(s) it needs fit now{est}, on {names(nodes)}"
        f"{after}: it waits for the scheduler (or for its queue's quota)"
    )


def names(items: Sequence[str], shown: int = 4) -> str:
    """``a, b, c`` -- a long list cut after ``shown`` items, with how many are left."""
    if len(items) <= shown + 1:
        return ", ".join(items)
    return f"{', '.join(items[:shown])} and {len(items) - shown} more"


_MEMBER = re.compile(r"\bpod (r\d+)-(\d+)\b")


def _name_members(why: str, view: GangView, ask: str | None = None) -> str:
    """The engine names the members of the gang it tried by role (``r0-2``: the third
    pod of the first shape, as the descheduler builds a waiting gang); say which pod
    that is, or that it does not exist yet. Members of one role are alike, so when
    ``ask`` (the pod a user asked about) is of the role named, the reason names it."""
    by_role: dict[str, list[str]] = {}
    shapes: dict[Any, str] = {}
    for p in view.pending:
        role = shapes.setdefault(p.shape, f"r{len(shapes)}")
        by_role.setdefault(role, []).append(p.name)

    def name(m: re.Match[str]) -> str:
        pods = by_role.get(m[1], [])
        if ask is not None and ask in pods:
            return f"pod {ask}"
        i = int(m[2])
        return f"pod {pods[i]}" if i < len(pods) else "a member not created yet"

    return _MEMBER.sub(name, why)


def gang_rows(
    state: ClusterState,
    *,
    namespace: str | None = None,
    scheduling: SchedulingConfig | None = None,
    default_queue: str = "default",
    order: Sequence[str] = (),
    ask: tuple[str, str] | None = None,
) -> list[GangRow]:
    """Every gang of ``namespace`` (None: all), sorted by namespace and name.
    ``order``: the waiting gangs' keys in the order the scheduler serves them
    (``descheduler.api.waiting_order``); the gangs that fit alone are placed in that
    order (the rest after, by name), and those that no longer fit once the gangs
    before them started are ``competing``. ``ask``: (namespace, pod) a reason should
    name when it names a member of that pod's shape (``explain``)."""
    sched = scheduling or SchedulingConfig()
    views = build_views(state, default_queue)
    rows: dict[str, GangRow] = {}
    for view in views.values():
        if not view.is_gang:
            continue
        asked = ask[1] if ask is not None and ask[0] == view.namespace else None
        status, reason, nodes = evaluate(view, state, sched, asked)
        pg = view.podgroup
        rows[view.key] = GangRow(
            namespace=view.namespace,
            name=view.name,
            keys=_keys(view),
            queue=view.queue,
            pods=len(view.pods),
            placed=len(view.running),
            min_available=view.min_available,
            waiting=len(view.pending),
            phase=pg.phase if pg is not None else "",
            status=status,
            reason=reason,
            nodes=nodes,
        )
    _compete(state, views, rows, sched, order)
    return sorted(
        (r for r in rows.values() if namespace is None or r.namespace == namespace),
        key=lambda r: (r.namespace, r.name),
    )


def _compete(
    state: ClusterState,
    views: dict[str, GangView],
    rows: dict[str, GangRow],
    sched: SchedulingConfig,
    order: Sequence[str],
) -> None:
    """Start the gangs that fit alone one after another, in the serving order, on a
    fork of the snapshot (reverted after): a gang that no longer fits once those before
    it took their room competes with the ones on the nodes it would have had."""
    fit = [k for k in order if k in rows and rows[k].status == CAN_START]
    fit += sorted(k for k, r in rows.items() if r.status == CAN_START and k not in fit)
    if len(fit) < 2:
        return
    snap = state.snapshot
    demands = {k: demand_of(views[k]) for k in fit}
    # The nodes each could use now, alone: where one of its members fits.
    room: dict[str, set[str]] = {}
    for k, d in demands.items():
        assert d is not None  # it fit alone
        ok = np.zeros(len(snap.node_names), dtype=bool)
        for role in d.gang.roles:
            ok |= fits(snap, role.shape)
        room[k] = {snap.node_names[i] for i in np.flatnonzero(ok)}
    took: dict[str, set[str]] = {}
    with snap.what_if():
        for k in fit:
            demand = demands[k]
            assert demand is not None
            res = place_gang(snap, demand.gang, options=_options(sched, dry_run=False))
            row = rows[k]
            if res.ok:
                took[k] = set(res.nodes())
                if took[k] != set(row.nodes) and len(took) > 1:
                    row.nodes = res.nodes()
                    row.reason = _fits_now(demand, row.nodes, " once those served before it start")
                continue
            before = [g for g, nodes in took.items() if nodes & room[k]] or list(took)
            shared = sorted(set().union(*(room[k] & took[g] for g in before)))
            where = names(shared) if shared else "the same room"
            row.status, row.competes_with = COMPETING, before
            row.reason = (
                f"its {demand.gang.required} member(s) fit now alone, but not once "
                f"{names(before, 3)}, served before it, start: they compete for {where}"
            )
    for k, row in rows.items():
        if row.status == COMPETING:
            for g in row.competes_with:
                rows[g].competes_with.append(k)
    for k in fit:
        row = rows[k]
        if row.status == CAN_START and row.competes_with:
            row.reason += (
                f"; {names(row.competes_with, 3)}, served after it, compete with it for "
                "the same room"
            )


def render_gangs(rows: list[GangRow], all_namespaces: bool) -> str:
    """A kubectl-style table; the reasons of gangs that cannot start follow it."""
    if not rows:
        return "No gangs found."
    head = ["NAMESPACE"] if all_namespaces else []
    head += ["GANG", "KEYS", "QUEUE", "PLACED/MIN", "WAITING", "PHASE", "STATUS"]
    table = [head]
    for r in rows:
        line = [r.namespace] if all_namespaces else []
        line += [
            r.name,
            r.keys or "-",
            r.queue,
            f"{r.placed}/{r.min_available}",
            str(r.waiting),
            r.phase or "-",
            r.status,
        ]
        table.append(line)
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table
    ]
    why = [r for r in rows if r.reason and r.status != RUNNING]
    if why:
        lines.append("")
        lines.append("Why they have not started:")
        lines.extend(f"  {r.namespace}/{r.name}: {r.reason}" for r in why)
    return "\n".join(lines)
