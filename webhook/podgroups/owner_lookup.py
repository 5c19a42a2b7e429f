"""Finding the uid of a PodGroup's owner, which its ownerReference needs.

At CREATE admission a workload has no uid yet. A pod or child workload usually names
it within a moment (an :class:`~webhook.podgroup_intent.OwnerHint` that wakes the
work item), which saves reading it from the API server; after
``RetryPolicy.hint_wait`` it is looked up through the injected ``resolve_owner``,
retried with backoff until ``RetryPolicy.owner_wait`` has passed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable

from webhook.podgroup_intent import OwnerRef
from webhook.podgroups.reconciler_port import ResolveOwnerFn, RetryPolicy
from webhook.podgroups.work_item import WorkItem, is_pod

log = logging.getLogger(__name__)


async def find_owner(
    item: WorkItem,
    *,
    resolve: ResolveOwnerFn | None,
    policy: RetryPolicy,
    clock: Callable[[], float],
    rng: random.Random,
) -> OwnerRef | bool | None:
    """The owner with its uid; None for an unowned gang; False if it never showed."""
    if item.intent.owner is None:
        return None
    deadline = item.since + policy.owner_wait
    attempt = 0
    while True:
        if item.owner is not None and item.owner.uid:
            return item.owner
        want = item.owner or item.intent.owner
        hinted_soon = clock() - item.since < policy.hint_wait
        if hinted_soon and not is_pod(want):
            item.woken.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    item.woken.wait(), max(0.0, item.since + policy.hint_wait - clock())
                )
            continue
        if resolve is not None and want.name:
            uid = await _look_up(resolve, item.intent.namespace, want)
            if uid:
                item.owner = OwnerRef(want.api_version, want.kind, want.name, uid)
                return item.owner
        attempt += 1
        left = deadline - clock()
        if left <= 0:
            return False
        item.woken.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(item.woken.wait(), min(left, policy.delay(attempt, rng)))


async def _look_up(resolve: ResolveOwnerFn, namespace: str, want: OwnerRef) -> str | None:
    """The owner's uid from the API server; None when it is not there or the read failed."""
    try:
        return await resolve(namespace, want)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        log.info("owner lookup failed", extra={"fields": {"owner": want.name, "error": str(e)}})
        return None
