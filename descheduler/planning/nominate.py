"""Holding a capacity room through the scheduler's own means (``capacity_room.nominate``,
opt-in): which pending pods get ``status.nominatedNodeName``, and which lose it (pure).

The kube-scheduler keeps every pending pod that carries ``status.nominatedNodeName`` in
its nominator (pkg/scheduler/backend/queue/nominator.go) and, when it filters a pod of
the same or lower priority, counts the nominated pods' requests on their nodes
(``addGENominatedPods`` under ``RunFilterPluginsWithNominatedPods`` in
pkg/scheduler/framework/runtime/framework.go): the room is held against everything of the
gang's priority or lower, not only against what corral suspended. A pod of higher
priority may still take it -- the scheduler's rule, and corral's too: no priority is
inverted. KEP-5278 (NominatedNodeNameForExpectation, alpha 1.34, beta and on by default
1.35) makes a nomination by another component part of the API's contract: set it when
it is empty, never overwrite another's, clear it when the plan changes.

The scheduler itself clears a nomination when the pod fails a cycle and preemption
finds no victims (``NewPostFilterResultWithNominatedNode("")`` in
pkg/scheduler/framework/preemption/preemption.go): so corral writes the nomination again
on every run while the hold lasts, wherever the pod's nomination is empty. When the
hold ends and the gang is not bound, corral clears what it wrote (a pod whose nomination
another component changed is left alone); the API server clears it when the pod is bound
(ClearingNominatedNodeNameAfterBinding, beta 1.35).

Only a gang the kube-scheduler places is nominated (:func:`nomination_refusal`, the one
place that decides): native gangs, scheduler-plugins' coscheduling (built on the same
framework and queue) and Kueue's pods. Volcano reads a pod's own nomination only as the
node to try first for that pod (pkg/scheduler/actions/allocate/allocate.go, v1.12 and
v1.13) and holds nothing against other pods; YuniKorn and KAI have their own caches.

The nodes come from the plan
(:mod:`descheduler.planning.strategies.capacity_room.capacity_room`) and
are kept in corral's mark on each workload suspended for the room (``nominate``: pod name
-> node), so a later run knows them without planning again.
"""

from __future__ import annotations

from dataclasses import dataclass

from gangplace.engine import PodRecord
from gangplace.engine.gang import GangPlacement
from gangplace.engine.membership import OWN_SCHEDULERS, SCHEDULER_NAMES, membership

from descheduler.config import DeschedulerConfig
from descheduler.planning.gang_demand import role_pods
from descheduler.planning.gang_views import GangView, build_views
from descheduler.planning.resume import held_rooms, read_mark
from descheduler.planning.state import ClusterState

__all__ = [
    "Nomination",
    "due_nominations",
    "nomination_refusal",
    "planned_nominations",
]

# How the messages name the schedulers that are not kube-scheduler builds.
_TITLES = {"volcano": "Volcano", "yunikorn": "YuniKorn", "kai": "KAI"}
# Their schedulerNames, for a pod whose gang keys do not say the dialect.
_BY_NAME = {SCHEDULER_NAMES[d]: d for d in OWN_SCHEDULERS}


@dataclass(frozen=True, slots=True)
class Nomination:
    """One write to a pod's ``status.nominatedNodeName``: ``node`` None clears it; made
    only while the pod still carries ``was`` ('' none) and waits."""

    namespace: str
    name: str
    uid: str
    node: str | None
    gang: str
    reason: str
    was: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def describe(self) -> str:
        what = f"nominate node {self.node}" if self.node else "clear the nomination"
        return f"{what} of pod {self.key} ({self.reason})"


def nomination_refusal(view: GangView) -> str | None:
    """Why a nomination would not hold ``view``'s room, or None when the scheduler that
    places its pods counts nominated pods against others (the kube-scheduler)."""
    for p in view.pods:
        m = membership(p)
        dialect = m.dialect if m is not None and m.dialect in OWN_SCHEDULERS else None
        dialect = dialect or _BY_NAME.get(p.scheduler_name)
        if dialect is not None:
            who = _TITLES[dialect]
            return (
                f"gang {view.key} is placed by {who}, which does not hold a nominated node "
                "against other pods"
            )
    return None


def planned_nominations(view: GangView, placed: GangPlacement) -> dict[str, str]:
    """Pod name -> node the plan put it on, for ``view``'s pending pods placed by
    ``placed`` (the gang of :func:`~descheduler.planning.gang_demand.demand_of`, whose
    roles follow the pending pods in order)."""
    by_role = role_pods(view.pending)
    out: dict[str, str] = {}
    for a in placed.assignments:
        pods = by_role.get(a.role, [])
        if a.index < len(pods):
            out[pods[a.index].name] = a.node_name
    return out


def _waiting(p: PodRecord) -> bool:
    return not p.node_name and p.phase == "Pending"


def due_nominations(state: ClusterState, config: DeschedulerConfig) -> list[Nomination]:
    """The nominations to write now: for each room held, its gang's waiting pods whose
    nomination is empty get the node the plan put them on; for each room no longer held
    whose gang is not bound, the waiting pods still nominated where corral put them are
    cleared. With ``capacity_room.nominate`` off nothing is written, but what corral
    wrote while it was on is still cleared when its hold ends. A pod nominated elsewhere
    (by the scheduler's preemption, another component) is never touched."""
    write = config.capacity_room.nominate
    wanted: dict[str, dict[str, str]] = {}  # gang -> pod name -> node
    for w in state.workloads.values():
        mark = read_mark(w)
        if mark is None or mark.for_gang is None or not mark.nominate:
            continue
        wanted.setdefault(mark.for_gang, {}).update(mark.nominate)
    if not wanted:
        return []
    views = build_views(state, config.queue_default)
    holds = held_rooms(state, views)
    out: list[Nomination] = []
    for gang_key in sorted(wanted):
        view = views.get(gang_key)
        if view is None or nomination_refusal(view) is not None:
            continue
        nodes = wanted[gang_key]
        held = gang_key in holds
        bound = view.min_available > 0 and len(view.running) >= view.min_available
        for p in sorted(view.pods, key=lambda p: p.name):
            node = nodes.get(p.name)
            if node is None or not _waiting(p):
                continue
            if held and write and not p.nominated_node:
                why = f"the room held for gang {gang_key} (capacity_room.nominate)"
                out.append(Nomination(p.namespace, p.name, p.uid, node, gang_key, why))
            elif not held and not bound and p.nominated_node == node:
                why = f"the room held for gang {gang_key} is released"
                out.append(Nomination(p.namespace, p.name, p.uid, None, gang_key, why, node))
    return out
