"""The one place where the descheduler changes the cluster: policy/v1 Evictions.

Each pod is evicted through the Eviction API, which honours PodDisruptionBudgets (a 429
means a budget said no). 429s and 5xx are retried a bounded number of times with
jittered backoff. :class:`Limits` caps how much one run may evict -- in total, per node,
per namespace, and any other grouping a :class:`Budget` describes (queues, GPUs) -- and
a gang is admitted against the limits as a whole, so a limit never splits a gang. The
limits and the disruption budget check are the engine's
(:mod:`gangplace.engine.eviction_budget`), the ones the planner keeps to.
Dry-run does everything except the final POSTs. Every evicted pod gets an Event that
names the plan, and every pod gets an :class:`EvictionResult`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from gangplace.engine.eviction_budget import (
    Budget,
    DisruptionCheck,
    EvictionTarget,
    Limits,
    check_disruption,
)
from gangplace.engine.objects import PdbRecord, pdb_from_json
from gangplace.kube.backoff import Backoff
from gangplace.kube.client import REQUEST_ERRORS, TRANSIENT_ERRORS, ApiError, KubeClient
from gangplace.kube.events import event_body, post_event
from gangplace.kube.resources import PDBS

__all__ = [
    "Budget",
    "DisruptionCheck",
    "EvictionResult",
    "EvictionTarget",
    "Evictor",
    "Limits",
    "Outcome",
    "check_disruption",
]

log = logging.getLogger(__name__)


class Outcome(StrEnum):
    EVICTED = "evicted"
    DRY_RUN = "dry-run"
    REFUSED_BY_PDB = "refused-by-pdb"
    SKIPPED_BY_LIMIT = "skipped-by-limit"
    GONE = "gone"  # already deleted, or replaced by a new pod of the same name
    FAILED = "failed"
    ABORTED = "aborted"  # not attempted: the rest of its gang failed first, or leadership lost


@dataclass(frozen=True, slots=True)
class EvictionResult:
    target: EvictionTarget
    outcome: Outcome
    message: str
    attempts: int = 0  # eviction requests sent
    limit: str = ""  # the budget that skipped it
    event_error: str = ""  # the Event could not be written (the eviction itself stands)


def _is_pdb_refusal(e: ApiError) -> bool:
    return any(c.get("reason") == "DisruptionBudget" for c in e.causes) or (
        "disruption budget" in e.message.lower()
    )


def _describe(e: ApiError) -> str:
    causes = "; ".join(str(c.get("message")) for c in e.causes if c.get("message"))
    text = f"{e.status} {e.reason}: {e.message}"
    return f"{text} ({causes})" if causes else text


class Evictor:
    """Evicts pods for one descheduling run (one ``plan``); keeps every result.

    ``guard`` is asked before every request (for example ``lambda: elector.is_leader``):
    once it says no, no pod and no gang is begun. A gang of which a member is gone
    already is the exception: its other members follow (a gang is never left half
    evicted), and the guard's no is logged. Limits are per Evictor, that is per run.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        plan: str,
        limits: Limits | Iterable[Budget] = (),
        dry_run: bool = False,
        max_attempts: int = 4,
        backoff_initial: float = 1.0,
        backoff_max: float = 15.0,
        guard: Callable[[], bool] | None = None,
        component: str = "corral-descheduler",
        event_reason: str = "Descheduled",
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"evictor: max_attempts must be >= 1, got {max_attempts}")
        if not plan:
            raise ValueError("evictor: plan must name the plan (it goes into every Event)")
        self.client = client
        self.plan = plan
        self.limits = limits if isinstance(limits, Limits) else Limits(limits)
        self.dry_run = dry_run
        self.max_attempts = max_attempts
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.guard = guard
        self.component = component
        self.event_reason = event_reason
        self.instance = socket.gethostname()
        self._sleep = sleep
        self.results: list[EvictionResult] = []

    def summary(self) -> dict[str, int]:
        """How many pods ended in each outcome so far."""
        return dict(Counter(r.outcome.value for r in self.results))

    def _allowed(self) -> bool:
        return self.guard is None or self.guard()

    def _record(self, result: EvictionResult) -> EvictionResult:
        self.results.append(result)
        log.info(
            "%s %s: %s (%s)", result.outcome.value, result.target.key, result.message, self.plan
        )
        return result

    # --- one pod ----------------------------------------------------------------------

    async def evict(self, target: EvictionTarget, reason: str = "") -> EvictionResult:
        """Evict one pod within the limits."""
        if not self._allowed():
            return self._record(
                EvictionResult(target, Outcome.ABORTED, "not allowed to evict (guard)")
            )
        blocked = self.limits.blocking([target])
        if blocked:
            return self._record(
                EvictionResult(target, Outcome.SKIPPED_BY_LIMIT, blocked[1], limit=blocked[0])
            )
        self.limits.reserve([target])
        return self._record(await self._evict_reserved(target, reason))

    async def _evict_reserved(
        self, target: EvictionTarget, reason: str, *, guarded: bool = True
    ) -> EvictionResult:
        if self.dry_run:
            return EvictionResult(
                target, Outcome.DRY_RUN, f"dry run: would evict for plan {self.plan}"
            )
        outcome, message, attempts = await self._post(target, guarded=guarded)
        if outcome is not Outcome.EVICTED:
            self.limits.release([target])
            return EvictionResult(target, outcome, message, attempts)
        event_error = await self._event(target, reason)
        return EvictionResult(target, outcome, message, attempts, event_error=event_error)

    async def _post(self, t: EvictionTarget, *, guarded: bool = True) -> tuple[Outcome, str, int]:
        backoff = Backoff(initial=self.backoff_initial, maximum=self.backoff_max)
        last, refused = "", False
        for attempt in range(1, self.max_attempts + 1):
            try:
                await self.client.evict(t.namespace, t.name, uid=t.uid)
                return Outcome.EVICTED, f"evicted for plan {self.plan}", attempt
            except ApiError as e:
                if e.status == 404:
                    return Outcome.GONE, f"pod no longer exists ({e.message})", attempt
                if e.status == 409 and "precondition" in e.message.lower():
                    return Outcome.GONE, f"pod was replaced by a new one ({e.message})", attempt
                if "more than one PodDisruptionBudget" in e.message:
                    return Outcome.FAILED, _describe(e), attempt
                if e.status != 429 and e.status != 409 and e.status < 500:
                    return Outcome.FAILED, _describe(e), attempt
                last, refused = _describe(e), e.status == 429 and _is_pdb_refusal(e)
                delay = backoff.next()
                if e.retry_after is not None:
                    delay = min(self.backoff_max, e.retry_after)
            except TRANSIENT_ERRORS as e:
                last, refused = f"network error: {type(e).__name__}: {e}", False
                delay = backoff.next()
            if attempt < self.max_attempts:
                if guarded and not self._allowed():
                    return (
                        Outcome.ABORTED,
                        f"stopped retrying (guard); last answer: {last}",
                        attempt,
                    )
                await self._sleep(delay)
        tries = f"after {self.max_attempts} attempt(s)"
        if refused:
            return Outcome.REFUSED_BY_PDB, f"{last} [{tries}]", self.max_attempts
        return Outcome.FAILED, f"{last} [{tries}]", self.max_attempts

    async def _event(self, t: EvictionTarget, reason: str) -> str:
        """Write a core/v1 Event on the evicted pod; the error text, or '' if written."""
        message = f"Evicted by {self.component} for plan {self.plan}"
        if reason:
            message += f": {reason}"
        body = event_body(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": t.namespace,
                "name": t.name,
                "uid": t.uid,
            },
            reason=self.event_reason,
            message=message,
            action="Evict",
            component=self.component,
            instance=self.instance,
        )
        error = await post_event(self.client, body)
        if error:
            log.warning("event for evicted pod %s not written: %s", t.key, error)
        return error

    # --- a gang -----------------------------------------------------------------------

    async def _dry_run_all(self, members: Sequence[EvictionTarget]) -> list[EvictionResult]:
        """Dry-run evictions of every member, one attempt each; [] when all would go,
        else a result for every member (the one refused, the rest not attempted)."""
        for m in members:
            try:
                await self.client.evict(m.namespace, m.name, uid=m.uid, dry_run=True)
                continue
            except ApiError as e:
                if e.status == 404:
                    continue  # gone already: as good as evicted
                why = _describe(e)
                outcome = (
                    Outcome.REFUSED_BY_PDB
                    if e.status == 429 and _is_pdb_refusal(e)
                    else Outcome.FAILED
                )
            except TRANSIENT_ERRORS as e:
                why, outcome = f"network error: {type(e).__name__}: {e}", Outcome.FAILED
            msg = f"gang not evicted: the dry-run eviction of {m.key} was refused ({why})"
            rest = f"not attempted: the dry-run eviction of {m.key} was {outcome.value}"
            return [
                EvictionResult(x, outcome if x is m else Outcome.ABORTED, msg if x is m else rest)
                for x in members
            ]
        return []

    async def fetch_pdbs(self, namespaces: Iterable[str]) -> list[PdbRecord]:
        """The disruption budgets of some namespaces, read from the API server."""
        out: list[PdbRecord] = []
        for ns in sorted(set(namespaces)):
            token: str | None = None
            while True:
                page = await self.client.list(PDBS, namespace=ns, limit=500, continue_token=token)
                out.extend(pdb_from_json(o) for o in page.get("items") or ())
                token = (page.get("metadata") or {}).get("continue") or None
                if not token:
                    break
        return out

    async def check_gang_pdbs(
        self, members: Sequence[EvictionTarget], pdbs: Iterable[PdbRecord] | None = None
    ) -> DisruptionCheck:
        """Do the disruption budgets allow evicting every member? ``pdbs`` from an informer,
        or read from the API server when not given."""
        if pdbs is None:
            pdbs = await self.fetch_pdbs(m.namespace for m in members)
        return check_disruption(members, pdbs)

    async def evict_gang(
        self,
        members: Sequence[EvictionTarget],
        reason: str = "",
        *,
        pdbs: Iterable[PdbRecord] | None = None,
        check_pdbs: bool = True,
        dry_run_first: bool = True,
    ) -> list[EvictionResult]:
        """Evict a whole gang, or none of it when the limits or budgets do not allow all.

        The limits are reserved for every member up front. With ``dry_run_first`` every
        member is first evicted with ``dryRun: All`` (the API server checks the
        disruption budgets as they are at that moment and changes nothing); one refusal
        there and nothing is evicted. If the first real eviction is refused, the rest
        are not attempted (``aborted``); once a member is gone the rest follow, so the
        gang can be placed again as a whole: the guard too is asked only until then.
        """
        if not members:
            return []
        if not self._allowed():
            return [
                self._record(EvictionResult(m, Outcome.ABORTED, "not allowed to evict (guard)"))
                for m in members
            ]
        blocked = self.limits.blocking(members)
        if blocked:
            msg = f"gang of {len(members)} skipped: {blocked[1]}"
            return [
                self._record(EvictionResult(m, Outcome.SKIPPED_BY_LIMIT, msg, limit=blocked[0]))
                for m in members
            ]
        if check_pdbs:
            try:
                check = await self.check_gang_pdbs(members, pdbs)
            except REQUEST_ERRORS as e:
                msg = f"gang not evicted: its disruption budgets could not be read: {e}"
                return [self._record(EvictionResult(m, Outcome.FAILED, msg)) for m in members]
            if not check.allowed:
                msg = "gang not evicted: " + "; ".join(check.reasons)
                return [
                    self._record(EvictionResult(m, Outcome.REFUSED_BY_PDB, msg)) for m in members
                ]
        if dry_run_first and not self.dry_run:
            refused = await self._dry_run_all(members)
            if refused:
                return [self._record(r) for r in refused]
        self.limits.reserve(members)
        out: list[EvictionResult] = []
        evicted_any = overruled = False
        for i, m in enumerate(members):
            if not self._allowed():
                if not evicted_any:
                    rest = members[i:]
                    self.limits.release(rest)
                    out.extend(
                        self._record(
                            EvictionResult(r, Outcome.ABORTED, "not allowed to evict (guard)")
                        )
                        for r in rest
                    )
                    break
                if not overruled:
                    overruled = True
                    log.warning(
                        "guard says stop, but the gang's eviction has begun: its other %d "
                        "member(s) follow (%s)",
                        len(members) - i,
                        self.plan,
                    )
            result = self._record(await self._evict_reserved(m, reason, guarded=not evicted_any))
            out.append(result)
            if result.outcome in (Outcome.EVICTED, Outcome.GONE, Outcome.DRY_RUN):
                evicted_any = True
            elif not evicted_any:
                rest = members[i + 1 :]
                self.limits.release(rest)
                msg = f"not attempted: the eviction of {m.key} was {result.outcome.value}"
                out.extend(self._record(EvictionResult(r, Outcome.ABORTED, msg)) for r in rest)
                break
        return out
