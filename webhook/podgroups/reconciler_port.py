"""What the PodGroup reconciler is given and reports: the injected calls it makes to
the API server (their types), its outcomes, and how it retries. Kept apart from the
reconciler's machinery so the callers that wire it (webhook.podgroups.calls, the server)
read its contract in one short place."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from webhook.podgroup_intent import Existing, OwnerHint, OwnerRef, PodGroupIntent, Removed

__all__ = [
    "CreateFn",
    "EnsureFn",
    "ExistingFn",
    "PodGroupOutcome",
    "RemoveFn",
    "ResolveOwnerFn",
    "RetryPolicy",
    "UpdateFn",
    "Wait",
    "retryable",
    "status_of",
]


# create(intent, body): POST the PodGroup. Raise on failure; an exception carrying an
# integer ``status`` (kubernetes_asyncio's ApiException does) is read as the HTTP code.
CreateFn = Callable[[PodGroupIntent, dict[str, Any]], Awaitable[None]]
# resolve_owner(namespace, owner): the owner's uid, or None while it does not exist (or
# when its kind cannot be looked up: then only hints can tell).
ResolveOwnerFn = Callable[[str, OwnerRef], Awaitable[str | None]]
# existing(intent, owner): after a 409, what the PodGroup there is to us (may raise like
# create; the owner has its uid, or is None for an unowned gang).
ExistingFn = Callable[[PodGroupIntent, OwnerRef | None], Awaitable[Existing]]
# update(intent, owner, body): after a 409 for an ``update`` intent, bring the PodGroup
# there to ``body``'s minMember and minResources if it is this owner's (may raise like
# create): OURS (nothing to change), UPDATED, OTHER or GONE.
UpdateFn = Callable[[PodGroupIntent, OwnerRef | None, dict[str, Any]], Awaitable[Existing]]
# remove(intent, owner): delete the PodGroup if corral made it and ``owner`` (with its
# uid) owns it (may raise like create).
RemoveFn = Callable[[PodGroupIntent, OwnerRef], Awaitable[Removed]]
# ensure(hint): the PodGroup intent of the gang a pod named (read from its live
# workload, whose uid the hint carries), or None: the workload is gone, suspended,
# being deleted, not a gang, or of a kind that is not read.
# False: never (not a gang corral named): the gang's other pods do not ask again.
EnsureFn = Callable[["OwnerHint"], Awaitable["PodGroupIntent | Literal[False] | None"]]
# What :meth:`PodGroupReconciler.before_answer` found: "ready" (nothing to wait for),
# "made" (made or found within the deadline), "late" (not within it; the work goes on),
# "failed" (the work ended without a PodGroup).
Wait = Literal["ready", "made", "late", "failed"]
# on_outcome(intent, outcome): for metrics and logs.
# "created" | "exists" | "joined" | "updated" | "foreign" | "stale" | "failed" | "no-owner"
# | "dropped" | "removed" | "absent"
PodGroupOutcome = str


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (kubernetes_asyncio's ApiException does)."""
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


def retryable(status: int | None) -> bool:
    """Worth another try: transport errors (no status), 408, 429 and 5xx."""
    return status is None or status == 429 or status == 408 or status >= 500


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard and how long the reconciler tries (backoff, owner and hint waits)."""

    attempts: int = 8
    base_delay: float = 0.2
    max_delay: float = 10.0
    owner_wait: float = 60.0  # how long an owner may take to appear
    # How long to wait for a hint (a pod or child workload naming the owner with its
    # uid) before looking the owner up; owners that are Pods are looked up at once.
    hint_wait: float = 1.0
    # How long a PodGroup made or found stays known to exist for the request path: a
    # bare-pod gang's later pods are answered without a call within it (a gang deleted
    # and made again under the same names after it gets its PodGroup made again).
    exists_ttl: float = 30.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Full jitter over a capped exponential (attempt counts from 1)."""
        cap = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return rng.uniform(cap / 2, cap)
