"""Suspending and resuming workloads on the cluster, for moves whose method is
``suspend`` (see :mod:`descheduler.planning.move_method`).

A suspend sets the workload's suspend switch with corral's mark
(``corral.dev/suspended-by``, see :mod:`descheduler.planning.resume`) and removes the gang's
PodGroup; a resume makes the PodGroup again and clears both. A suspend is then checked:
the gang's pods must go (deleted, or terminating) within ``moves.suspend_grace``. If
they do not -- a controller that ignores the switch -- it is rolled back: the switch
off, the PodGroup made again, corral's mark removed, and ``corral.dev/suspend-ignored``
written so that no later run tries again. A gang whose second workload could not be
suspended after the first was is rolled back too: never half moved. Which suspensions are due
to end is decided by :func:`~descheduler.planning.resume.due_resumptions` (pure); this module
only carries the answer out, with an Event on each workload.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.owners import (
    ANNOTATION_SUSPEND_IGNORED,
    ANNOTATION_SUSPENDED_BY,
    WorkloadRecord,
)
from gangplace.engine.timeparse import format_time
from gangplace.kube import REQUEST_ERRORS, ApiError, KubeClient
from gangplace.kube.resources import (
    PODGROUP_APIS,
    PODS,
    VOLCANO_PODGROUPS,
    Resource,
    workload_resource,
)

from descheduler.config import DeschedulerConfig
from descheduler.planning.move_method import Owners
from descheduler.planning.nominate import Nomination, due_nominations
from descheduler.planning.plan_model import Move, PodMove
from descheduler.planning.resume import Resumption, due_resumptions, mark_text
from descheduler.planning.state import ANNOTATION_LAST_MOVED, ANNOTATION_ROOM_MADE, ClusterState
from descheduler.running.cluster_view import ClusterView
from descheduler.running.gang_events import post_gang_event, workload_ref
from descheduler.running.runner_port import GangOutcome, MoveOutcome, PodResult, Resumed

__all__ = ["Suspender"]

# The descheduler's cluster side logs under one name, whichever module writes.
log = logging.getLogger(__name__)

Json = dict[str, Any]

_MERGE_PATCH = "application/merge-patch+json"


class Suspender:
    """Suspends the workloads of a gang, and resumes (or heals) what corral suspended."""

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        config: DeschedulerConfig,
        *,
        clock: Callable[[], datetime],
        interrupted: Callable[[], str | None] = lambda: None,
        component: str = "corral-descheduler",
        settle_poll: float = 0.5,
    ) -> None:
        self.client = client
        self.view = view
        self.config = config
        self.clock = clock
        self.interrupted = interrupted
        self.component = component
        self.settle_poll = settle_poll

    async def _patch_workload(self, w: WorkloadRecord, body: Json) -> None:
        await self.client.patch(
            workload_resource(w.group, w.kind, self.config.kinds),
            w.name,
            body,
            namespace=w.namespace,
            content_type=_MERGE_PATCH,
        )

    @staticmethod
    def _switch(w: WorkloadRecord, on: bool, mark: str | None, rv: str | None) -> Json:
        """A merge patch setting the workload's suspend switch and corral's mark (None:
        removed); with ``rv`` it applies only to the version read (409 otherwise)."""
        body: Json = {}
        cur = body
        for part in w.suspend_path[:-1]:
            cur = cur.setdefault(part, {})
        cur[w.suspend_path[-1]] = on
        meta: Json = {"annotations": {ANNOTATION_SUSPENDED_BY: mark}}
        if rv:
            meta["resourceVersion"] = rv
        body["metadata"] = meta
        return body

    def _podgroup_copy(self, move: Move) -> tuple[Resource, Json] | None:
        """The live PodGroup of a moved gang, trimmed to what making it again needs."""
        if not move.podgroup:
            return None
        found = self.view.any_podgroup(f"{move.namespace}/{move.podgroup}")
        if found is None:
            return None
        r, obj = found
        meta = obj.get("metadata") or {}
        keep = {
            k: meta[k]
            for k in ("name", "namespace", "labels", "annotations", "ownerReferences")
            if meta.get(k)
        }
        ann = dict(keep.get("annotations") or {})
        ann.pop(ANNOTATION_ROOM_MADE, None)
        # made again on resume with the time of this move: the cool-down holds
        ann[ANNOTATION_LAST_MOVED] = format_time(self.clock())
        keep["annotations"] = ann
        copy: Json = {
            "apiVersion": r.api_version,
            "kind": r.kind,
            "metadata": keep,
            "spec": obj.get("spec") or {},
        }
        return r, copy

    async def suspend_gang(
        self,
        move: Move,
        message: str,
        *,
        state: ClusterState,
        pods: Mapping[str, PodRecord],
        plan_id: str,
    ) -> Sequence[PodResult]:
        """Suspend every workload of a suspend move, each marked with
        ``corral.dev/suspended-by`` (the PodGroup it held goes into the first mark), and
        remove the gang's PodGroup, which would otherwise sit Inqueue with no pods.
        The patch carries the resourceVersion the plan read: a workload changed since
        (a person resumed or suspended it) is not touched (409). ``state`` is the one
        the plan was made on, ``pods`` its pods by key, ``plan_id`` the plan's name."""
        owners = Owners(state.workloads, state.kinds)
        records = [state.workloads.get(k) for k in move.workloads]
        missing = [k for k, w in zip(move.workloads, records, strict=True) if w is None]
        if missing or not records:
            why = f"workload {', '.join(missing) or '(none)'} not in the cluster state"
            return [PodResult(p.namespace, p.name, MoveOutcome.FAILED, why) for p in move.pods]
        pg = self._podgroup_copy(move)
        now = self.clock()
        done: set[str] = set()
        failure = ""
        refused = False
        for i, w in enumerate(r for r in records if r is not None):
            held = pg[1] if pg is not None and i == 0 else None
            until = now + timedelta(seconds=move.hold_for) if move.hold_for > 0 else None
            mark = mark_text(
                plan_id,
                now,
                move.for_gang,
                held,
                priority=move.priority,
                until=until,
                nominate=move.nominate,
            )
            try:
                await self._patch_workload(w, self._switch(w, True, mark, w.resource_version))
            except REQUEST_ERRORS as e:
                failure = f"{w.describe()}: {e}"
                refused = isinstance(e, ApiError) and e.status in (404, 409)
                break
            done.add(w.key)
            await self._workload_event(w, "Normal", "Suspended", message)
        suspended = [w for w in records if w is not None and w.key in done]
        if done and failure:
            # never half moved: what was suspended is resumed (its PodGroup is still there)
            undo = await self._roll_back(suspended, None, "", plan_id, now)
            why = f"{failure}; the workloads suspended before it were resumed{undo}"
            return [PodResult(p.namespace, p.name, MoveOutcome.FAILED, why) for p in move.pods]
        pg_removed = False
        if done and pg is not None:
            r, copy = pg
            name = copy["metadata"]["name"]
            try:
                await self.client.delete(r, name, namespace=move.namespace)
                pg_removed = True
            except REQUEST_ERRORS as e:  # the next run removes it (heal)
                log.warning(
                    "PodGroup %s/%s of a suspended gang not removed: %s", move.namespace, name, e
                )
        if done and self.config.moves.suspend_grace > 0:
            left, stopped = await self._wait_gone(move.pods)
            if left:
                names = ", ".join(f"{p.namespace}/{p.name}" for p in left[:3])
                more = f" and {len(left) - 3} more" if len(left) > 3 else ""
                if stopped:  # not seen to stay: undone, but not marked ignored
                    why = f"{stopped}: pods {names}{more} not seen to go"
                    ignored = ""
                else:
                    grace = self.config.moves.suspend_grace
                    why = (
                        f"pods {names}{more} still run {grace:g}s after the suspend "
                        "(moves.suspend_grace): the controller ignores the switch"
                    )
                    ignored = why
                undo = await self._roll_back(
                    suspended,
                    pg[1] if pg_removed and pg is not None else None,
                    ignored,
                    plan_id,
                    now,
                )
                if undo:
                    return [
                        PodResult(p.namespace, p.name, MoveOutcome.FAILED, why + undo)
                        for p in move.pods
                    ]
                return [
                    PodResult(p.namespace, p.name, MoveOutcome.ROLLED_BACK, why) for p in move.pods
                ]
        if done and move.nominate:
            ns = move.for_gang_namespace
            await self.nominate(
                [
                    Nomination(ns, name, rec.uid, node, move.for_gang or "", "the room made")
                    for name, node in sorted(move.nominate.items())
                    if (rec := pods.get(f"{ns}/{name}")) is not None
                    and not rec.node_name
                    and not rec.nominated_node
                ]
            )
        out = []
        for pm in move.pods:
            rec = pods.get(pm.key)
            top = owners.top_of_pod(rec)[0] if rec is not None else None
            if top is not None and top.key in done:
                out.append(
                    PodResult(pm.namespace, pm.name, MoveOutcome.SUSPENDED, "workload suspended")
                )
            elif refused and not done:
                out.append(PodResult(pm.namespace, pm.name, MoveOutcome.REFUSED, failure))
            else:
                out.append(
                    PodResult(pm.namespace, pm.name, MoveOutcome.FAILED, failure or "not suspended")
                )
        return out

    async def _wait_gone(self, pods: Sequence[PodMove]) -> tuple[list[PodMove], str]:
        """Wait up to ``moves.suspend_grace`` for ``pods`` to go: deleted, replaced by
        another of the same name, terminating or finished. The pods still there, and why
        the wait stopped early or could not tell ('' when the pods were seen to stay).
        Read with a GET each: the informer keeps a terminating pod as it was."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.moves.suspend_grace
        left = list(pods)
        while True:
            still: list[PodMove] = []
            unread = ""
            for pm in left:
                try:
                    obj = await self.client.get(PODS, pm.name, namespace=pm.namespace)
                except ApiError as e:
                    if e.status != 404:
                        still.append(pm)
                        unread = f"pod {pm.namespace}/{pm.name} could not be read ({e})"
                    continue
                except REQUEST_ERRORS as e:
                    still.append(pm)
                    unread = f"pod {pm.namespace}/{pm.name} could not be read ({e})"
                    continue
                meta = obj.get("metadata") or {}
                phase = (obj.get("status") or {}).get("phase")
                if (pm.uid and meta.get("uid") != pm.uid) or meta.get("deletionTimestamp"):
                    continue
                if phase not in ("Succeeded", "Failed"):
                    still.append(pm)
            left = still
            rest = deadline - loop.time()
            stop = self.interrupted()
            if not left or rest <= 0:
                return left, unread
            if stop is not None:
                return left, stop
            await asyncio.sleep(min(self.settle_poll, rest))

    async def _roll_back(
        self,
        workloads: Sequence[WorkloadRecord],
        podgroup: Json | None,
        ignored: str,
        plan_id: str,
        at: datetime,
    ) -> str:
        """Undo a suspend: each workload's switch off and corral's mark removed (with
        ``ignored``, the reason its controller ignored the switch is written in
        ``corral.dev/suspend-ignored``), then ``podgroup`` made again. '' when all of it
        was done, else what was not (a workload left suspended keeps its mark, and the
        next run resumes it)."""
        errors: list[str] = []
        for w in workloads:
            body = self._switch(w, False, None, None)
            if ignored:
                note = {"plan": plan_id, "at": format_time(at), "why": ignored}
                body["metadata"]["annotations"][ANNOTATION_SUSPEND_IGNORED] = json.dumps(
                    note, separators=(",", ":"), sort_keys=True
                )
            try:
                await self._patch_workload(w, body)
            except REQUEST_ERRORS as e:
                errors.append(f"{w.describe()} still suspended: {e}")
                continue
            text = f"corral undid its suspend of {w.describe()}: {ignored or 'not all went'}"
            await self._workload_event(w, "Warning", "SuspendRolledBack", text)
        if podgroup is not None:
            r = next(
                (x for x in PODGROUP_APIS.values() if x.api_version == podgroup["apiVersion"]),
                VOLCANO_PODGROUPS,
            )
            try:
                await self.client.create(
                    r, dict(podgroup), namespace=podgroup["metadata"]["namespace"]
                )
            except ApiError as e:
                if e.status != 409:  # its controller made it again already
                    errors.append(f"PodGroup {podgroup['metadata']['name']} not made again: {e}")
            except REQUEST_ERRORS as e:
                errors.append(f"PodGroup {podgroup['metadata']['name']} not made again: {e}")
        for err in errors:
            log.error("roll back: %s", err)
        return f" (rolling back: {'; '.join(errors)})" if errors else ""

    async def _workload_event(
        self, w: WorkloadRecord, type_: str, reason: str, message: str
    ) -> None:
        error = await post_gang_event(
            self.client, workload_ref(w, self.config.kinds), type_, reason, message, self.component
        )
        if error:
            log.warning("event on %s not written: %s", w.describe(), error)

    async def _apply(self, res: Resumption) -> Resumed:
        w = res.workload
        try:
            if res.action == "heal" or res.action == "resume":
                pg = res.mark.podgroup
                meta = (pg or {}).get("metadata") or {}
                key = f"{meta.get('namespace') or w.namespace}/{meta.get('name')}"
                if pg is not None and meta.get("name"):
                    found = self.view.any_podgroup(key)
                    r = next(
                        (
                            x
                            for x in PODGROUP_APIS.values()
                            if x.api_version == pg.get("apiVersion")
                        ),
                        VOLCANO_PODGROUPS,
                    )
                    if res.action == "heal" and found is not None:
                        await self.client.delete(found[0], meta["name"], namespace=w.namespace)
                    elif res.action == "resume" and found is None:
                        try:
                            await self.client.create(r, dict(pg), namespace=w.namespace)
                        except ApiError as e:
                            if e.status != 409:
                                raise
            if res.action == "resume":
                await self._patch_workload(w, self._switch(w, False, None, w.resource_version))
                text = f"corral resumed {w.describe()}: {res.reason}"
                await self._workload_event(w, "Normal", "Resumed", text)
            elif res.action == "forget":
                body: Json = {"metadata": {"annotations": {ANNOTATION_SUSPENDED_BY: None}}}
                body["metadata"]["resourceVersion"] = w.resource_version
                await self._patch_workload(w, body)
        except REQUEST_ERRORS as e:
            log.warning("%s %s: %s", res.action, w.describe(), e)
            return Resumed(w.describe(), res.action, res.reason, False, str(e))
        log.info("%s %s: %s", res.action, w.describe(), res.reason)
        return Resumed(w.describe(), res.action, res.reason)

    async def nominate(self, nominations: Sequence[Nomination]) -> list[str]:
        """Write each nomination to its pod's ``status.nominatedNodeName``: the pod read
        again, then a merge patch of the status subresource with the resourceVersion read
        (None clears it), so that a nomination the scheduler wrote meanwhile is never
        overwritten (409: passed over, the next run looks again). A pod gone, replaced,
        bound, or nominated otherwise than ``was`` is passed over. What could not be
        written."""
        errors: list[str] = []
        for n in nominations:
            try:
                pod = await self.client.get(PODS, n.name, namespace=n.namespace)
                meta = pod.get("metadata") or {}
                current = str((pod.get("status") or {}).get("nominatedNodeName") or "")
                if (
                    (n.uid and meta.get("uid") != n.uid)
                    or meta.get("deletionTimestamp")
                    or (pod.get("spec") or {}).get("nodeName")
                    or current != n.was
                ):
                    continue
                body: Json = {
                    "metadata": {"resourceVersion": meta.get("resourceVersion")},
                    "status": {"nominatedNodeName": n.node},
                }
                await self.client.patch(
                    PODS,
                    n.name,
                    body,
                    namespace=n.namespace,
                    content_type=_MERGE_PATCH,
                    subresource="status",
                )
            except ApiError as e:
                if e.status in (404, 409):
                    continue
                errors.append(f"{n.describe()}: {e}")
                continue
            except REQUEST_ERRORS as e:
                errors.append(f"{n.describe()}: {e}")
                continue
            log.info("%s", n.describe())
        for err in errors:
            log.warning("not written: %s", err)
        return errors

    async def resume(self, state: ClusterState) -> list[Resumed]:
        """End the suspensions corral made that are due in ``state``, and heal what a
        crash left. Before that, the nominations of the rooms held are written again
        where the scheduler cleared them, and those of rooms released are cleared (the
        marks that name them go with the resumes)."""
        await self.nominate(due_nominations(state, self.config))
        return [await self._apply(r) for r in due_resumptions(state, self.config)]

    async def settle(self, outcomes: Sequence[GangOutcome]) -> list[Resumed]:
        """Wait up to ``moves.resume_wait`` for the gangs room was made for, resuming the
        workloads suspended for them as they are bound (and those of defragmenting
        moves once their pods are gone); later runs resume the rest."""
        wanted = {k for o in outcomes if o.status == "suspended" for k in o.move.workloads}
        out: list[Resumed] = []
        deadline = asyncio.get_running_loop().time() + self.config.moves.resume_wait
        while wanted:
            state = await self.view.state(self.clock())
            for r in due_resumptions(state, self.config):
                if r.workload.key in wanted and r.action == "resume":
                    done = await self._apply(r)
                    out.append(done)
                    wanted.discard(r.workload.key)
            left = deadline - asyncio.get_running_loop().time()
            if not wanted or left <= 0 or self.interrupted() is not None:
                break
            await asyncio.sleep(min(self.settle_poll, left))
        return out
