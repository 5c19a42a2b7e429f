"""Making sure each gang's PodGroup exists, off the request path.

Admission only *describes* the PodGroup it wants (a
:class:`~webhook.podgroup_intent.PodGroupIntent`); the
:class:`PodGroupReconciler` creates it in the background through an injected async
``create`` function, so an admission answer never waits on the API server.

* Idempotent: intents for the same PodGroup collapse while pending, a created one is
  remembered, and the API server's 409 Conflict counts as success.
* Retried with capped exponential backoff and jitter on 429, 5xx and transport
  errors; other 4xx are final (a 404 usually means the CRD is not installed).
* Garbage-collected with the workload: the PodGroup's ownerReference points to the
  top-level owner. At CREATE admission the owner has no uid yet, so the uid comes from
  an :class:`OwnerHint` (a later admission of one of its pods, or of a child workload,
  names it with its uid), or -- when no hint came within ``RetryPolicy.hint_wait`` --
  from the injected ``resolve_owner`` lookup once the owner exists. An owner that never
  shows up (admission was refused further down the chain) gets no PodGroup; its intent
  is parked, and a hint that names the owner later (the pods of a workload that was
  suspended for a while) revives it.
* A PodGroup that exists already (409) is inspected through the injected ``existing``
  function (:class:`Existing`): ours; a bare-pod gang's, which this pod joins as one
  more owner (so the PodGroup lives as long as any of its pods); someone else's, left
  alone; or a stale one of a deleted workload of the same name, which the garbage
  collector is about to remove -- then creation is retried until it is gone.
* Never for dry-run requests: :meth:`PodGroupReconciler.submit` drops them.
* Following a scaled workload: an intent made with ``update=True`` (an UPDATE of the
  workload changed its replica counts) brings an existing PodGroup of the same owner
  to the new minMember and minResources through the injected ``update`` function; a
  newer update for the same PodGroup queued meanwhile is applied after it, so the
  last one wins.
* Removed with a suspended workload: an intent made with ``remove=True`` (an UPDATE
  suspended the workload) deletes the PodGroup through the injected ``remove``
  function -- only one corral made that this owner owns -- and forgets it was made, so
  that the resume makes it again. A suspended workload has no PodGroup: Volcano would
  hold one without pods ``Inqueue`` (docs/safe-moves.md).
* Made before a gang's first pod is answered: :meth:`PodGroupReconciler.before_answer`
  (called on the request path of a pod CREATE, with a deadline) waits for the
  PodGroup of the pod's gang to exist -- Volcano's ``/pods/validate`` (on by default
  through Volcano 1.11) refuses a pod whose PodGroup is not there yet. A workload's
  PodGroup is in progress already (its intent, given the owner's uid by the pod's
  hint); a bare-pod gang's cannot wait for its owner, the pod being answered, so it is
  created at once without ownerReferences and the pods join it as owners afterwards.
  Later pods of the gang find it known to exist and make no call.
* Made when its pods come without one: a pod of a gang whose PodGroup is neither
  pending, parked nor known to exist (the UPDATE that resumed its workload never
  reached the webhook, or the webhook restarted) makes the reconciler ask the injected
  ``ensure`` function for the gang's intent -- read from the live workload, none while
  it is suspended -- and make it as any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence

from webhook.podgroup_intent import Existing, OwnerHint, OwnerRef, PodGroupIntent
from webhook.podgroups.known import KnownPodGroups
from webhook.podgroups.owner_lookup import find_owner
from webhook.podgroups.reconciler_port import (
    CreateFn,
    EnsureFn,
    ExistingFn,
    PodGroupOutcome,
    RemoveFn,
    ResolveOwnerFn,
    RetryPolicy,
    UpdateFn,
    Wait,
    retryable,
    status_of,
)
from webhook.podgroups.work_item import (
    Key,
    Slot,
    WorkItem,
    is_pod,
    names_owner,
    podgroup_name,
    settled,
    slot_of,
)

__all__ = [
    "CreateFn",
    "EnsureFn",
    "ExistingFn",
    "PodGroupOutcome",
    "PodGroupReconciler",
    "RemoveFn",
    "ResolveOwnerFn",
    "RetryPolicy",
    "UpdateFn",
    "Wait",
    "status_of",
]

log = logging.getLogger(__name__)


class PodGroupReconciler:
    """Background creation of PodGroups; see the module docstring."""

    def __init__(
        self,
        create: CreateFn,
        resolve_owner: ResolveOwnerFn | None = None,
        *,
        policy: RetryPolicy | None = None,
        workers: int = 4,
        queue_size: int = 10_000,
        remember: int = 50_000,
        on_outcome: Callable[[PodGroupIntent, PodGroupOutcome], None] | None = None,
        existing: ExistingFn | None = None,
        update: UpdateFn | None = None,
        remove: RemoveFn | None = None,
        ensure: EnsureFn | None = None,
        parked: int = 10_000,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        seed: int | None = None,
    ) -> None:
        self._create = create
        self._resolve = resolve_owner
        self._existing = existing
        self._update = update
        self._remove = remove
        self._ensure = ensure
        self._policy = policy or RetryPolicy()
        self._known = KnownPodGroups(
            remember=remember, parked=parked, ttl=self._policy.exists_ttl, clock=clock
        )
        self._n_workers = workers
        self._queue: asyncio.Queue[Slot] = asyncio.Queue(queue_size)
        # In progress, by PodGroup -- and by pod, for a bare-pod gang: each of its pods
        # is an owner of its own that must join the PodGroup.
        self._pending: dict[Slot, WorkItem] = {}
        self._on_outcome = on_outcome
        self._sleep = sleep
        self._clock = clock
        self._rng = random.Random(seed)
        self._tasks: list[asyncio.Task[None]] = []
        # Creates on the request path in flight, by PodGroup (see before_answer).
        self._early: dict[Key, asyncio.Task[bool]] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    # --- called on the request path: never blocks, never raises ------------------------

    def submit(self, intent: PodGroupIntent, *, dry_run: bool) -> bool:
        """Queue ``intent``; False when it is dropped (dry run, duplicate, queue full)."""
        if dry_run:
            return False
        key = intent.key
        owner = intent.owner
        self._known.unpark(key)  # a newer intent for the same PodGroup supersedes it
        if intent.remove:
            if self._remove is None or owner is None or not owner.uid:
                return False
            self._known.forget(key, owner.uid)
        elif not intent.update:
            if owner is not None and owner.uid and self._known.made(key, owner.uid):
                return False
            if owner is None and self._known.made(key, ""):
                return False
        slot = slot_of(intent)
        pend = self._pending.get(slot)
        if pend is not None and (intent.update or intent.remove):
            pend.again = intent
            return True
        if pend is not None:
            if (pend.owner is None or not pend.owner.uid) and owner is not None and owner.uid:
                pend.owner = owner
                pend.woken.set()
            return False
        try:
            self._queue.put_nowait(slot)
        except asyncio.QueueFull:
            log.warning(
                "podgroup queue full; dropped", extra={"fields": {"podgroup": podgroup_name(key)}}
            )
            self._report(intent, "dropped")
            return False
        self._pending[slot] = WorkItem(intent, owner, self._clock())
        self._idle.clear()
        return True

    def hint(self, hint: OwnerHint) -> None:
        """Give a pending intent its owner's uid, named by one of the gang's pods.

        Only pending intents take hints: a remembered hint could be stale (a workload
        deleted and made again under the same name has a new uid)."""
        if not hint.owner.uid:
            return
        pend = self._pending.get((*hint.key, ""))
        if pend is None:
            parked = self._known.parked_for(hint.key)
            if parked is not None and names_owner(parked.owner, hint.owner):
                # The owner showed up after all (a workload suspended for a while).
                self._known.unpark(hint.key)
                intent = PodGroupIntent(
                    parked.api_version,
                    parked.plural,
                    parked.namespace,
                    parked.name,
                    parked.body,
                    hint.owner,
                )
                self.submit(intent, dry_run=False)
            elif parked is None:
                self._ensure_for(hint)
            return
        if pend.owner is not None and pend.owner.uid:
            return
        if names_owner(pend.intent.owner, hint.owner):
            pend.owner = hint.owner
            pend.woken.set()

    def _ensure_for(self, hint: OwnerHint) -> None:
        """Queue a look at the workload of a pod whose PodGroup is not known to exist."""
        if self._ensure is None or is_pod(hint.owner) or self._known.made(hint.key, hint.owner.uid):
            return
        slot = (*hint.key, "")
        try:
            self._queue.put_nowait(slot)
        except asyncio.QueueFull:
            return
        placeholder = PodGroupIntent(
            hint.api_version, hint.plural, hint.namespace, hint.name, {}, hint.owner
        )
        self._pending[slot] = WorkItem(placeholder, hint.owner, self._clock(), ensure=hint)
        self._idle.clear()

    # --- called on the request path of a pod CREATE: bounded, never raises ---------------

    async def before_answer(
        self,
        intents: Sequence[PodGroupIntent],
        hints: Sequence[OwnerHint],
        timeout: float,
    ) -> Wait:
        """Wait, at most ``timeout`` seconds, until the PodGroups a pod's admission named
        (already given to :meth:`submit` and :meth:`hint`) exist. A PodGroup known to
        exist costs nothing. One pending whose owner is known (a workload's, its uid
        named by this pod) is created now, on the request path, rather than behind the
        queue; a bare-pod gang's, which would wait for its owner (this pod, not yet
        created), is created now without ownerReferences. Either is one create shared
        by every pod of the gang that asks meanwhile; the background work then finds
        it. One to be read from the pod's workload first (the fallback) is waited for."""
        waits: list[Awaitable[bool | None]] = []
        for pend in self._waited(intents, hints):
            owner = pend.owner or pend.intent.owner
            if pend.ensure is not None or (
                owner is not None and not owner.uid and not is_pod(owner)
            ):
                waits.append(settled(pend))
            elif owner is not None and not owner.uid:  # a bare pod: this one
                if not self._known.exists(pend.intent.key):
                    waits.append(self._early_create(pend.intent, None))
            elif not self._known.made(pend.intent.key, owner.uid if owner else ""):
                waits.append(self._early_create(pend.intent, owner))
        if not waits:
            return "ready"
        try:
            got = await asyncio.wait_for(asyncio.gather(*waits), timeout)
        except TimeoutError:
            return "late"
        if any(g is False for g in got):
            return "failed"
        return "made" if any(got) else "ready"

    def _waited(
        self, intents: Sequence[PodGroupIntent], hints: Sequence[OwnerHint]
    ) -> list[WorkItem]:
        """The work in progress on the PodGroups a pod's admission named."""
        out: list[WorkItem] = []
        # An update intent (a resumed or scaled workload) creates the PodGroup when it
        # is not there: waited for like any other. A removal is not.
        for intent in intents:
            if not intent.remove:
                pend = self._pending.get(slot_of(intent))
                if pend is not None:  # else known to exist for this owner
                    out.append(pend)
        for hint in hints:
            pend = self._pending.get((*hint.key, ""))
            if pend is not None and not pend.intent.remove:
                out.append(pend)
        return out

    def _early_create(self, intent: PodGroupIntent, owner: OwnerRef | None) -> Awaitable[bool]:
        """The one create of a gang's PodGroup on the request path, shared by its pods
        and shielded: a pod that stops waiting leaves it running for the next."""
        key = intent.key
        task = self._early.get(key)
        if task is None:
            task = asyncio.create_task(self._create_early(intent, owner), name="podgroup-early")
            self._early[key] = task
            task.add_done_callback(
                lambda t: self._early.pop(key, None) if self._early.get(key) is t else None
            )
        return asyncio.shield(task)

    async def _create_early(self, intent: PodGroupIntent, owner: OwnerRef | None) -> bool:
        """Create ``intent`` with ``owner`` (a workload with its uid), or without
        ownerReferences (a bare-pod gang: its pods join it as owners later, the
        background work of each, :meth:`PodGroupApi.existing`). 409 is success: what is
        there is the background work's to inspect."""
        body = intent.render(owner)
        for attempt in range(1, self._policy.attempts + 1):
            try:
                await self._create(intent, body)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                status = status_of(e)
                if status == 409:
                    self._known.saw(intent.key)
                    return True
                if not retryable(status) or attempt == self._policy.attempts:
                    log.warning(
                        "PodGroup not made before its first pod was answered",
                        extra={
                            "fields": {
                                "podgroup": podgroup_name(intent.key),
                                "status": status,
                                "error": str(e),
                            }
                        },
                    )
                    return False
                await self._sleep(self._policy.delay(attempt, self._rng))
                continue
            self._known.saw(intent.key)
            if owner is not None:
                self._known.mark_made(intent.key, owner.uid)
            elif intent.owner is None:
                self._known.mark_made(intent.key, "")  # a gang nobody owns
            else:
                self._known.mark_unowned(intent.key)
            log.info(
                "PodGroup created before its first pod was answered",
                extra={"fields": {"podgroup": podgroup_name(intent.key)}},
            )
            self._report(intent, "created")
            return True
        return False

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._worker(), name=f"podgroup-worker-{i}")
                for i in range(self._n_workers)
            ]

    async def stop(self, drain_timeout: float = 5.0) -> None:
        """Finish what is queued (up to ``drain_timeout`` seconds), then stop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.drain(), drain_timeout)
        early = list(self._early.values())
        for t in [*self._tasks, *early]:
            t.cancel()
        for t in [*self._tasks, *early]:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks = []
        self._early.clear()

    async def drain(self) -> None:
        """Wait until nothing is queued or in progress."""
        await self._idle.wait()

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def parked(self) -> int:
        """Intents waiting for a hint about an owner that did not show up in time."""
        return self._known.parked

    # --- the work -----------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            pend = self._pending.get(key)
            try:
                while pend is not None:
                    await self._reconcile(pend)
                    if pend.again is None:
                        break
                    pend.intent, pend.again = pend.again, None
                    if pend.intent.owner is not None and pend.intent.owner.uid:
                        pend.owner = pend.intent.owner
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug here must not kill the worker
                log.exception(
                    "podgroup reconcile failed", extra={"fields": {"podgroup": podgroup_name(key)}}
                )
                if pend is not None:
                    self._report(pend.intent, "failed")
            finally:
                if pend is not None:
                    pend.settled.set()
                self._pending.pop(key, None)
                self._queue.task_done()
                if not self._pending:
                    self._idle.set()

    async def _reconcile(self, pend: WorkItem) -> None:
        intent = pend.intent
        if intent.remove:
            await self._removal(intent)
            return
        if pend.ensure is not None:
            assert self._ensure is not None
            hint, pend.ensure = pend.ensure, None
            try:
                found = await self._ensure(hint)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.info(
                    "the workload of a pod without a known PodGroup was not read",
                    extra={"fields": {"podgroup": podgroup_name(intent.key), "error": str(e)}},
                )
                return
            if found is False:
                self._known.mark_made(hint.key, hint.owner.uid)
                pend.made = None
                return
            if found is None or found.key != intent.key or found.remove:
                return
            pend.intent = found
            pend.owner = found.owner
            await self._make(pend)
            top = found.owner.uid if found.owner is not None else ""
            if self._known.made(found.key, top):
                # Its other pods name the same workload: no more looks at it.
                self._known.mark_made(hint.key, hint.owner.uid)
            return
        await self._make(pend)

    async def _make(self, pend: WorkItem) -> None:
        intent = pend.intent
        owner = await find_owner(
            pend, resolve=self._resolve, policy=self._policy, clock=self._clock, rng=self._rng
        )
        if owner is False:
            log.warning(
                "owner never appeared; no PodGroup until one of its pods names it",
                extra={
                    "fields": {
                        "podgroup": podgroup_name(intent.key),
                        "owner": intent.owner and f"{intent.owner.kind}/{intent.owner.name}",
                    }
                },
            )
            self._known.park(intent)
            self._report(intent, "no-owner")
            await self._discard_unowned(intent)
            return
        assert owner is None or isinstance(owner, OwnerRef)
        uid = owner.uid if owner else ""
        early = self._early.get(intent.key)
        if early is not None:
            # A pod's admission is creating it on the request path: no second create.
            with contextlib.suppress(Exception):
                await asyncio.shield(early)
        if self._known.made(intent.key, uid) and not intent.update:
            self._exists_for(pend)
            return
        body = intent.render(owner)
        for attempt in range(1, self._policy.attempts + 1):
            try:
                await self._create(intent, body)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                status = status_of(e)
                if status == 409:
                    try:
                        found = await self._inspect(intent, owner)
                    except asyncio.CancelledError:
                        raise
                    except Exception as err:  # read like a failed create
                        e, status, found = err, status_of(err), None
                        if status == 409:
                            status = None  # it kept changing under us: try again
                    if found is Existing.GONE:
                        continue
                    if found is Existing.STALE:
                        if attempt == self._policy.attempts:
                            log.error(
                                "a PodGroup of an earlier owner of the same name is still "
                                "there; gave up waiting for the garbage collector",
                                extra={
                                    "fields": {
                                        "podgroup": podgroup_name(intent.key),
                                        "attempts": attempt,
                                    }
                                },
                            )
                            self._report(intent, "stale")
                            return
                        await self._sleep(self._policy.delay(attempt, self._rng))
                        continue
                    if found is not None:
                        self._known.mark_made(intent.key, uid)
                        self._known.owned_now(intent.key)
                        self._exists_for(pend)
                        self._report(intent, _EXISTING_OUTCOME[found])
                        return
                if not retryable(status) or attempt == self._policy.attempts:
                    log.error(
                        "PodGroup create failed",
                        extra={
                            "fields": {
                                "podgroup": podgroup_name(intent.key),
                                "status": status,
                                "error": str(e),
                                "attempts": attempt,
                            }
                        },
                    )
                    self._report(intent, "failed")
                    return
                await self._sleep(self._policy.delay(attempt, self._rng))
                continue
            self._known.mark_made(intent.key, uid)
            self._exists_for(pend)
            log.info("PodGroup created", extra={"fields": {"podgroup": podgroup_name(intent.key)}})
            self._report(intent, "created")
            return
        # Only a PodGroup that kept vanishing between the 409 and the look gets here.
        log.error(
            "PodGroup create failed", extra={"fields": {"podgroup": podgroup_name(intent.key)}}
        )
        self._report(intent, "failed")

    async def _removal(self, intent: PodGroupIntent) -> None:
        """Delete a suspended workload's PodGroup, retried like a create."""
        owner = intent.owner
        assert self._remove is not None and owner is not None
        for attempt in range(1, self._policy.attempts + 1):
            try:
                got = await self._remove(intent, owner)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                status = status_of(e)
                if not retryable(status) or attempt == self._policy.attempts:
                    log.error(
                        "PodGroup of a suspended workload not removed",
                        extra={
                            "fields": {
                                "podgroup": podgroup_name(intent.key),
                                "status": status,
                                "error": str(e),
                            }
                        },
                    )
                    self._report(intent, "failed")
                    return
                await self._sleep(self._policy.delay(attempt, self._rng))
                continue
            # A create that finished meanwhile must not be remembered as made.
            self._known.forget(intent.key, owner.uid)
            if got == "removed":
                log.info(
                    "PodGroup of a suspended workload removed",
                    extra={"fields": {"podgroup": podgroup_name(intent.key)}},
                )
            self._report(intent, "foreign" if got == "foreign" else got)
            return

    async def _discard_unowned(self, intent: PodGroupIntent) -> None:
        """Delete the PodGroup made without owners for a bare-pod gang whose pod never
        appeared (refused further down the admission chain), if it still has none:
        Volcano would hold it, without pods, Inqueue."""
        key = intent.key
        owner = intent.owner
        if self._remove is None or owner is None or not is_pod(owner):
            return
        if not self._known.take_unowned(key):
            return
        try:
            got = await self._remove(intent, OwnerRef(owner.api_version, owner.kind, owner.name))
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info(
                "PodGroup made for a pod that never appeared not removed",
                extra={"fields": {"podgroup": podgroup_name(key), "error": str(e)}},
            )
            return
        if got == "removed":
            self._known.gone(key)
            log.info(
                "PodGroup made for a pod that never appeared removed",
                extra={"fields": {"podgroup": podgroup_name(key)}},
            )
            self._report(intent, "removed")

    def _exists_for(self, pend: WorkItem) -> None:
        """The PodGroup of ``pend`` is there: tell the pods that wait for it."""
        self._known.saw(pend.intent.key)
        pend.made = True
        pend.settled.set()

    async def _inspect(self, intent: PodGroupIntent, owner: OwnerRef | None) -> Existing:
        if intent.update and self._update is not None:
            return await self._update(intent, owner, intent.render(owner))
        if self._existing is None:
            return Existing.OURS  # nothing to tell them apart with: 409 is success
        return await self._existing(intent, owner)

    def _report(self, intent: PodGroupIntent, outcome: PodGroupOutcome) -> None:
        if self._on_outcome is not None:
            try:
                self._on_outcome(intent, outcome)
            except Exception:
                log.exception("podgroup outcome callback failed")


_EXISTING_OUTCOME: dict[Existing, PodGroupOutcome] = {
    Existing.OURS: "exists",
    Existing.UPDATED: "updated",
    Existing.JOINED: "joined",
    Existing.OTHER: "foreign",
}
