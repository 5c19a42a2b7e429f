"""A gang scheduler that binds by Volcano v1.7's rules, as volcano-gang-lifecycle shows.

One pass is one scheduling session (Volcano runs one a second):

- enqueue: a Pending PodGroup goes Inqueue when it has no minResources, or when they fit
  in what the cluster has left (allocatable x ``overcommit`` 1.2, less what bound pods
  and the other Inqueue PodGroups hold, as Volcano's overcommit plugin counts); if not,
  a Normal event "resource in cluster is overused" each session and it stays Pending.
- allocate: for an Inqueue (or Running) PodGroup, the engine places its pending pods,
  at least minMember minus those bound or succeeded already, all at once or none
  (``place_gang``); a gang with fewer pods (pending, bound or succeeded) than minMember
  is skipped -- it never binds short (the gang plugin's ``validJobFn`` and
  ``actions/allocate`` at v1.7.0, unchanged through v1.12) and reads as a gang that
  does not fit;
  the pods are bound through the Binding subresource with an event "Successfully
  assigned". PodGroups go highest pod priority first, then oldest.
- a gang that does not fit: condition Unschedulable NotEnoughResources on the PodGroup,
  PodScheduled=False on each pod (Schedulable "can possibly be assigned to nX" for
  those the engine could place alone, Unschedulable for the rest) with a
  FailedScheduling event when that changes, and a Warning event each session. An empty
  PodGroup is Inqueue with the Unschedulable condition and a Warning event each session.
- status: phase Running once minMember pods are bound (condition Scheduled True "tasks
  in gang are ready to be scheduled", a Normal event "pod group is ready" each session),
  back to Pending when fewer are, Unknown when some run but the rest cannot be placed;
  running/succeeded/failed count the pods.

Differences from Volcano (deterministic on purpose): a pod that cannot be placed gets
the same node in its "can possibly be assigned" message each session, so its condition
does not churn as in the recording; pods with no group-name annotation are left alone
(Volcano's controller would make a PodGroup for them); no queue capability, no
preemption or reclaim (not in the chart's default actions).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime

from gangplace.engine import Gang, GangOptions, Snapshot, TaskRole, place_gang, shape_from_pod
from gangplace.engine.quantity import to_int, to_milli

from tests.controllers.common import condition, status_patch
from tests.controllers.events import EventRecorder, iso
from tests.controllers.rest import Json, Rest, RestError
from tests.controllers.runner import wall_clock
from tests.controllers.snapshot import TERMINAL, snapshot_of

__all__ = ["GROUP_NAME", "PODGROUP_API", "GangScheduler"]

GROUP_NAME = "scheduling.k8s.io/group-name"
PODGROUP_API = "scheduling.volcano.sh/v1beta1"


def _qty(resource: str, value: str | int) -> int:
    return to_milli(value) if resource == "cpu" else to_int(value)


def _requests(pod: Json) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in (pod.get("spec") or {}).get("containers") or ():
        for r, v in ((c.get("resources") or {}).get("requests") or {}).items():
            out[r] = out.get(r, 0) + _qty(r, v)
    return out


def _bound(p: Json) -> bool:
    return bool((p.get("spec") or {}).get("nodeName")) and not p["metadata"].get(
        "deletionTimestamp"
    )


class GangScheduler:
    """See the module docstring. ``scheduler_names``: the pods it schedules."""

    name = "volcano"

    def __init__(
        self,
        rest: Rest,
        *,
        scheduler_names: tuple[str, ...] = ("volcano",),
        clock: Callable[[], datetime] = wall_clock,
        overcommit: float = 1.2,
    ) -> None:
        self.rest = rest
        self.scheduler_names = scheduler_names
        self.clock = clock
        self.overcommit = overcommit
        self.events = EventRecorder(rest, "volcano", clock)

    async def close(self) -> None:
        await self.rest.close()

    async def step(self) -> bool:
        nodes = await self.rest.list("v1", "nodes")
        pods = await self.rest.list("v1", "pods")
        groups = await self.rest.list(PODGROUP_API, "podgroups")
        snap = snapshot_of(nodes, pods)
        members: dict[tuple[str, str], list[Json]] = {}
        for p in pods:
            group = (p["metadata"].get("annotations") or {}).get(GROUP_NAME)
            spec = p.get("spec") or {}
            if group and spec.get("schedulerName") in self.scheduler_names:
                members.setdefault((p["metadata"]["namespace"], group), []).append(p)

        idle = self._idle(nodes, pods)
        for pg in groups:  # what Inqueue PodGroups reserve
            if (pg.get("status") or {}).get("phase") == "Inqueue":
                self._reserve(idle, pg, members.get(self._key(pg), []))

        def order(pg: Json) -> tuple[int, str, str, str]:
            tasks = members.get(self._key(pg), [])
            prio = max((int((t.get("spec") or {}).get("priority") or 0) for t in tasks), default=0)
            m = pg["metadata"]
            return (-prio, str(m.get("creationTimestamp", "")), m["namespace"], m["name"])

        changed = False
        for pg in sorted(groups, key=order):
            if pg["metadata"].get("deletionTimestamp"):
                continue
            changed |= await self._session(pg, members.get(self._key(pg), []), snap, idle)
        return changed

    @staticmethod
    def _key(pg: Json) -> tuple[str, str]:
        return (pg["metadata"]["namespace"], pg["metadata"]["name"])

    # --- enqueue ------------------------------------------------------------------------

    def _idle(self, nodes: list[Json], pods: list[Json]) -> dict[str, float]:
        idle: dict[str, float] = {}
        for n in nodes:
            for r, v in ((n.get("status") or {}).get("allocatable") or {}).items():
                idle[r] = idle.get(r, 0.0) + _qty(r, v) * self.overcommit
        for p in pods:
            if (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get(
                "phase"
            ) not in TERMINAL:
                for r, v in _requests(p).items():
                    idle[r] = idle.get(r, 0.0) - v
        return idle

    @staticmethod
    def _min_resources(pg: Json) -> dict[str, int]:
        raw = (pg.get("spec") or {}).get("minResources") or {}
        return {r: _qty(r, v) for r, v in raw.items()}

    def _reserve(self, idle: dict[str, float], pg: Json, tasks: list[Json]) -> None:
        want = self._min_resources(pg)
        held: dict[str, int] = {}
        for t in tasks:
            if _bound(t):
                for r, v in _requests(t).items():
                    held[r] = held.get(r, 0) + v
        for r, v in want.items():
            idle[r] = idle.get(r, 0.0) - max(0, v - held.get(r, 0))

    def _enqueueable(self, idle: dict[str, float], pg: Json) -> bool:
        want = self._min_resources(pg)
        return all(v <= idle.get(r, 0.0) for r, v in want.items() if v > 0)

    # --- one PodGroup -------------------------------------------------------------------

    async def _session(
        self, pg: Json, tasks: list[Json], snap: Snapshot, idle: dict[str, float]
    ) -> bool:
        status: Json = dict(pg.get("status") or {})
        old_status = dict(status)
        phase = status.get("phase") or "Pending"
        min_member = int((pg.get("spec") or {}).get("minMember", 1))
        live = [t for t in tasks if (t.get("status") or {}).get("phase") not in TERMINAL]
        bound = [t for t in live if _bound(t)]
        pending = [
            t
            for t in live
            if not (t.get("spec") or {}).get("nodeName")
            and not t["metadata"].get("deletionTimestamp")
        ]
        pg_events: list[tuple[str, str, str]] = []
        pod_status: dict[str, tuple[str, str]] = {}  # pod name -> (reason, message)
        binds: list[tuple[Json, str]] = []
        unschedulable = False
        schedulable: dict[str, str] = {}

        if phase == "Pending":
            if self._enqueueable(idle, pg):
                phase = "Inqueue"
                self._reserve(idle, pg, tasks)
            else:
                pg_events.append(("Normal", "Unschedulable", "resource in cluster is overused"))
                unschedulable = True

        succeeded = sum(1 for t in tasks if (t.get("status") or {}).get("phase") == "Succeeded")
        # gang.go's validJobFn: fewer valid tasks (pending, bound, succeeded) than
        # minMember and allocate skips the gang -- nothing binds until its pods are there.
        valid = len(bound) + len(pending) + succeeded >= min_member
        if phase in ("Inqueue", "Running", "Unknown") and pending and not valid:
            unschedulable = True
        elif phase in ("Inqueue", "Running", "Unknown") and pending:
            # JobInfo.Ready: bound and succeeded tasks count towards minMember.
            need = max(0, min_member - len(bound) - succeeded)
            gang = self._gang(pg, pending, need)
            placement = place_gang(snap, gang, options=GangOptions(best_effort=True, explain=False))
            if placement.ok:
                by_role = self._by_role(pending)
                for a in placement.assignments:
                    binds.append((by_role[a.role][a.index], a.node_name))
                if need:
                    self._unreserve(idle, pg)
            else:
                unschedulable = True
                alone = place_gang(
                    snap,
                    self._gang(pg, pending, 0),
                    options=GangOptions(best_effort=True, dry_run=True, explain=False),
                )
                by_role = self._by_role(pending)
                for a in alone.assignments:
                    schedulable[by_role[a.role][a.index]["metadata"]["name"]] = a.node_name
        elif phase == "Inqueue" and not live:
            unschedulable = True

        allocated = len(bound) + len(binds)
        running = sum(
            1
            for t in live
            if (t.get("status") or {}).get("phase") == "Running"
            and not t["metadata"].get("deletionTimestamp")  # Releasing, in Volcano's words
        )
        if unschedulable or (
            phase in ("Inqueue", "Running", "Unknown") and allocated < min_member and not binds
        ):
            n_ok = len(schedulable)
            unready = max(0, min_member - allocated - n_ok)
            fit = self._fit_error(pending, live, min_member, n_ok)
            message = f"{unready}/{len(live)} tasks in gang unschedulable: {fit}"
            status["conditions"] = self._set(status, "Unschedulable", "NotEnoughResources", message)
            first = unready if live else 0
            pg_events.append(
                (
                    "Warning",
                    "Unschedulable",
                    f"{first}/{len(live)} tasks in gang unschedulable: {fit}",
                )
            )
            for t in pending:
                name = t["metadata"]["name"]
                if name in schedulable:
                    pod_status[name] = (
                        "Schedulable",
                        f"Pod {t['metadata']['namespace']}/{name} can possibly be assigned "
                        f"to {schedulable[name]}",
                    )
                else:
                    pod_status[name] = ("Unschedulable", message)

        if running and unschedulable and phase != "Pending":
            phase = "Unknown"
        elif allocated >= min_member and allocated > 0:
            phase = "Running"
        elif phase != "Inqueue":
            phase = "Pending"
        if phase == "Running":
            status["conditions"] = self._set(
                status, "Scheduled", "tasks in gang are ready to be scheduled", None, always=True
            )
            pg_events.append(("Normal", "Scheduled", "pod group is ready"))
        status["phase"] = phase
        for k, n in (
            ("running", running),
            (
                "succeeded",
                sum(1 for t in tasks if (t.get("status") or {}).get("phase") == "Succeeded"),
            ),
            ("failed", sum(1 for t in tasks if (t.get("status") or {}).get("phase") == "Failed")),
        ):
            if n:
                status[k] = n
            else:
                status.pop(k, None)

        changed = False
        for pod, node in binds:
            m = pod["metadata"]
            try:
                await self.rest.bind(m["namespace"], m["name"], node)
            except RestError as e:
                if e.status in (404, 409):
                    continue
                raise
            await self.events.record(
                pod,
                "Normal",
                "Scheduled",
                f"Successfully assigned {m['namespace']}/{m['name']} to {node}",
            )
            changed = True
        if status != old_status and not (
            self._only_scheduled_churn(old_status, status) and not binds
        ):
            try:
                await self.rest.patch(
                    PODGROUP_API,
                    "podgroups",
                    pg["metadata"]["namespace"],
                    pg["metadata"]["name"],
                    {"status": status_patch(old_status, status)},
                )
            except RestError as e:
                if e.status != 404:
                    raise
            changed = True
        for t in pending:
            name = t["metadata"]["name"]
            if name in pod_status:
                changed |= await self._pod_condition(t, *pod_status[name])
        for type_, reason, message in pg_events:
            await self.events.record(pg, type_, reason, message)
        return changed

    def _unreserve(self, idle: dict[str, float], pg: Json) -> None:
        for r, v in self._min_resources(pg).items():
            idle[r] = idle.get(r, 0.0) + v

    @staticmethod
    def _only_scheduled_churn(old: Json, new: Json) -> bool:
        """True when the only change is the Scheduled condition's transitionID/time:
        Volcano rewrites it with every status update, but only updates on a change."""
        strip = lambda s: {  # noqa: E731
            **s,
            "conditions": [
                {k: v for k, v in c.items() if k not in ("transitionID", "lastTransitionTime")}
                for c in s.get("conditions") or ()
            ],
        }
        return bool(strip(old) == strip(new))

    def _set(
        self, status: Json, type_: str, reason: str, message: str | None, always: bool = False
    ) -> list[Json]:
        conds = [dict(c) for c in status.get("conditions") or ()]
        now = iso(self.clock())
        new: Json = {
            "lastTransitionTime": now,
            "reason": reason,
            "status": "True",
            "transitionID": str(uuid.uuid4()),
            "type": type_,
        }
        if message is not None:
            new["message"] = message
        for i, c in enumerate(conds):
            if c.get("type") == type_:
                if not always and c.get("message") == message and c.get("reason") == reason:
                    return conds
                conds[i] = new
                return conds
        conds.append(new)
        return conds

    @staticmethod
    def _by_role(pending: list[Json]) -> dict[str, list[Json]]:
        roles: dict[str, list[Json]] = {}
        for t in sorted(pending, key=lambda t: t["metadata"]["name"]):
            roles.setdefault(repr(shape_from_pod(t)), []).append(t)
        return roles

    def _gang(self, pg: Json, pending: list[Json], need: int) -> Gang:
        roles = self._by_role(pending)
        task_roles = tuple(
            TaskRole(name, shape_from_pod(ts[0]), len(ts)) for name, ts in roles.items()
        )
        return Gang(
            pg["metadata"]["name"],
            task_roles,
            min(need, len(pending)),
            namespace=pg["metadata"]["namespace"],
        )

    @staticmethod
    def _fit_error(pending: list[Json], live: list[Json], min_member: int, n_ok: int) -> str:
        counts: dict[str, int] = {}
        for t in live:
            if t in pending:
                s = "Pending"
            elif (t.get("status") or {}).get("phase") == "Running":
                s = "Running"
            else:
                s = "Bound"
            counts[s] = counts.get(s, 0) + 1
        parts = [f"{n} {s}" for s, n in sorted(counts.items())]
        text = "pod group is not ready, " + ", ".join([*parts, f"{min_member} minAvailable"])
        if pending:
            bad = len(pending) - n_ok
            why = [f"{bad} Unschedulable"] if bad else []
            if n_ok:
                why.append(f"{n_ok} Schedulable")
            text += "; Pending: " + ", ".join(why)
        return text

    async def _pod_condition(self, pod: Json, reason: str, message: str) -> bool:
        old = condition(pod, "PodScheduled")
        if old and old.get("reason") == reason and old.get("message") == message:
            return False
        conds = [
            c
            for c in (pod.get("status") or {}).get("conditions") or ()
            if c.get("type") != "PodScheduled"
        ]
        ltt = (
            old.get("lastTransitionTime")
            if old and old.get("status") == "False"
            else iso(self.clock())
        )
        conds.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": ltt,
                "reason": reason,
                "message": message,
            }
        )
        m = pod["metadata"]
        try:
            await self.rest.patch(
                "v1",
                "pods",
                m["namespace"],
                m["name"],
                {"status": {"conditions": conds}},
                subresource="status",
            )
        except RestError as e:
            if e.status == 404:
                return False
            raise
        await self.events.record(pod, "Warning", "FailedScheduling", message)
        return True
