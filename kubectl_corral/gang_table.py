"""The gangs of a cluster: members placed, minAvailable, waiting, and why a waiting gang
cannot start, in the engine's words (a dry-run all-or-nothing placement of the members
it still needs on the cluster as it is now)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from gangplace.engine import GangOptions, place_gang
from gangplace.engine.membership import membership

from descheduler.api import ClusterState, GangView, SchedulingConfig, build_views, demand_of

__all__ = ["GangRow", "gang_rows", "render_gangs"]

RUNNING = "running"  # at least minAvailable members are on nodes
CAN_START = "can-start"  # waiting, and the members it needs fit now
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


def evaluate(view: GangView, state: ClusterState, scheduling: SchedulingConfig) -> tuple[str, str]:
    """(status, reason) of one gang on the cluster as it is."""
    placed = len(view.running)
    if placed >= view.min_available and view.min_available > 0:
        return RUNNING, ""
    demand = demand_of(view)
    if demand is None:
        if not view.pods:
            return NO_PODS, "no member pods yet, and its PodGroup names no minResources"
        return RUNNING, ""
    options = GangOptions(
        fewest_nodes=scheduling.fewest_nodes,
        topology_key=scheduling.topology_key,
        best_effort=False,
        dry_run=True,
    )
    res = place_gang(state.snapshot, demand.gang, options=options)
    if res.ok:
        nodes = ", ".join(res.nodes())
        est = " (sizes estimated from its PodGroup's minResources)" if demand.estimated else ""
        return CAN_START, (
            f"the {demand.gang.required} member(s) it needs fit now{est}, on {nodes}: it waits "
            "for the scheduler (or for its queue's quota)"
        )
    return BLOCKED, _name_members(res.why, view)


_MEMBER = re.compile(r"\bpod (r\d+)-(\d+)\b")


def _name_members(why: str, view: GangView) -> str:
    """The engine names the members of the gang it tried by role (``r0-2``: the third
    pod of the first shape, as the descheduler builds a waiting gang); say which pod
    that is, or that it does not exist yet."""
    by_role: dict[str, list[str]] = {}
    shapes: dict[Any, str] = {}
    for p in view.pending:
        role = shapes.setdefault(p.shape, f"r{len(shapes)}")
        by_role.setdefault(role, []).append(p.name)

    def name(m: re.Match[str]) -> str:
        pods = by_role.get(m[1], [])
        i = int(m[2])
        return f"pod {pods[i]}" if i < len(pods) else "a member not created yet"

    return _MEMBER.sub(name, why)


def gang_rows(
    state: ClusterState,
    *,
    namespace: str | None = None,
    scheduling: SchedulingConfig | None = None,
    default_queue: str = "default",
) -> list[GangRow]:
    """Every gang of ``namespace`` (None: all), sorted by namespace and name."""
    sched = scheduling or SchedulingConfig()
    rows = []
    for view in build_views(state, default_queue).values():
        if not view.is_gang or (namespace is not None and view.namespace != namespace):
            continue
        status, reason = evaluate(view, state, sched)
        pg = view.podgroup
        rows.append(
            GangRow(
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
            )
        )
    return sorted(rows, key=lambda r: (r.namespace, r.name))


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
