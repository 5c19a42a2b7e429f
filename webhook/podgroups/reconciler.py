"""Making sure each gang's PodGroup exists, off the request path.

Admission only *describes* the PodGroup it wants (a
:class:`~webhook.podgroups.intent.PodGroupIntent`); the
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
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from webhook.podgroups.intent import Existing, OwnerHint, OwnerRef, PodGroupIntent
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


# A queued unit of work: the PodGroup's key and, for a gang owned by its pods, the pod.
_Key = tuple[str, str, str, str]  # PodGroupIntent.key
_Slot = tuple[str, str, str, str, str]


def _slot(intent: PodGroupIntent) -> _Slot:
    owner = intent.owner
    pod = owner.name if owner is not None and _is_pod(owner) else ""
    return (*intent.key, pod)


@dataclass(slots=True)
class _Pending:
    intent: PodGroupIntent
    owner: OwnerRef | None
    since: float
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    again: PodGroupIntent | None = None  # a newer update, applied after this one
    ensure: OwnerHint | None = None  # the intent is to be read from this pod's workload
    # Set once the PodGroup is known to exist, or the work ended without it.
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    # True: made or found; None: not corral's to make (someone else's gang).
    made: bool | None = False


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
        # Intents whose owner never showed up, by key, until a hint names the owner.
        self._parked: OrderedDict[_Key, PodGroupIntent] = OrderedDict()
        self._park_limit = parked
        self._policy = policy or RetryPolicy()
        self._n_workers = workers
        self._queue: asyncio.Queue[_Slot] = asyncio.Queue(queue_size)
        # In progress, by PodGroup -- and by pod, for a bare-pod gang: each of its pods
        # is an owner of its own that must join the PodGroup.
        self._pending: dict[_Slot, _Pending] = {}
        # (key, owner uid) of PodGroups known to exist. Keyed by uid so a workload
        # deleted and made again under the same name gets its PodGroup again.
        self._done: OrderedDict[tuple[_Key, str], None] = OrderedDict()
        self._remember = remember
        self._on_outcome = on_outcome
        self._sleep = sleep
        self._clock = clock
        self._rng = random.Random(seed)
        self._tasks: list[asyncio.Task[None]] = []
        # PodGroups known to exist (whoever owns them), with when that was learnt: a
        # gang's later pods are answered without a call (see before_answer).
        self._exists: OrderedDict[_Key, float] = OrderedDict()
        # Unowned creates of bare-pod gangs in flight on the request path, by PodGroup.
        self._early: dict[_Key, asyncio.Task[bool]] = {}
        # Those it created (not found): removed again if no pod of theirs ever shows up.
        self._made_unowned: set[_Key] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    # --- called on the request path: never blocks, never raises ------------------------

    def submit(self, intent: PodGroupIntent, *, dry_run: bool) -> bool:
        """Queue ``intent``; False when it is dropped (dry run, duplicate, queue full)."""
        if dry_run:
            return False
        key = intent.key
        owner = intent.owner
        self._parked.pop(key, None)  # a newer intent for the same PodGroup supersedes it
        if intent.remove:
            if self._remove is None or owner is None or not owner.uid:
                return False
            self._forget(key, owner.uid)
        elif not intent.update:
            if owner is not None and owner.uid and (key, owner.uid) in self._done:
                return False
            if owner is None and (key, "") in self._done:
                return False
        slot = _slot(intent)
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
            log.warning("podgroup queue full; dropped", extra={"fields": {"podgroup": _name(key)}})
            self._report(intent, "dropped")
            return False
        self._pending[slot] = _Pending(intent, owner, self._clock())
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
            parked = self._parked.get(hint.key) if self._parked else None
            if parked is not None and _names(parked.owner, hint.owner):
                # The owner showed up after all (a workload suspended for a while).
                del self._parked[hint.key]
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
        if _names(pend.intent.owner, hint.owner):
            pend.owner = hint.owner
            pend.woken.set()

    def _ensure_for(self, hint: OwnerHint) -> None:
        """Queue a look at the workload of a pod whose PodGroup is not known to exist."""
        if self._ensure is None or _is_pod(hint.owner) or (hint.key, hint.owner.uid) in self._done:
            return
        slot = (*hint.key, "")
        try:
            self._queue.put_nowait(slot)
        except asyncio.QueueFull:
            return
        placeholder = PodGroupIntent(
            hint.api_version, hint.plural, hint.namespace, hint.name, {}, hint.owner
        )
        self._pending[slot] = _Pending(placeholder, hint.owner, self._clock(), ensure=hint)
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
                owner is not None and not owner.uid and not _is_pod(owner)
            ):
                waits.append(_settled(pend))
            elif owner is not None and not owner.uid:  # a bare pod: this one
                if not self._known(pend.intent.key):
                    waits.append(self._early_create(pend.intent, None))
            elif (pend.intent.key, owner.uid if owner else "") not in self._done:
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
    ) -> list[_Pending]:
        """The work in progress on the PodGroups a pod's admission named."""
        out: list[_Pending] = []
        # An update intent (a resumed or scaled workload) creates the PodGroup when it
        # is not there: waited for like any other. A removal is not.
        for intent in intents:
            if not intent.remove:
                pend = self._pending.get(_slot(intent))
                if pend is not None:  # else known to exist for this owner
                    out.append(pend)
        for hint in hints:
            pend = self._pending.get((*hint.key, ""))
            if pend is not None and not pend.intent.remove:
                out.append(pend)
        return out

    def _known(self, key: _Key) -> bool:
        when = self._exists.get(key)
        return when is not None and self._clock() - when < self._policy.exists_ttl

    def _known_now(self, key: _Key) -> None:
        self._exists[key] = self._clock()
        self._exists.move_to_end(key)
        while len(self._exists) > self._remember:
            self._exists.popitem(last=False)

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
                    self._known_now(intent.key)
                    return True
                if not retryable(status) or attempt == self._policy.attempts:
                    log.warning(
                        "PodGroup not made before its first pod was answered",
                        extra={
                            "fields": {
                                "podgroup": _name(intent.key),
                                "status": status,
                                "error": str(e),
                            }
                        },
                    )
                    return False
                await self._sleep(self._policy.delay(attempt, self._rng))
                continue
            self._known_now(intent.key)
            if owner is not None:
                self._mark_done((intent.key, owner.uid))
            elif intent.owner is None:
                self._mark_done((intent.key, ""))  # a gang nobody owns
            else:
                self._made_unowned.add(intent.key)
            log.info(
                "PodGroup created before its first pod was answered",
                extra={"fields": {"podgroup": _name(intent.key)}},
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
        return len(self._parked)

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
                    "podgroup reconcile failed", extra={"fields": {"podgroup": _name(key)}}
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

    async def _owner(self, pend: _Pending) -> OwnerRef | bool | None:
        """The owner with its uid; None for an unowned gang; False if it never showed."""
        if pend.intent.owner is None:
            return None
        deadline = pend.since + self._policy.owner_wait
        attempt = 0
        while True:
            if pend.owner is not None and pend.owner.uid:
                return pend.owner
            want = pend.owner or pend.intent.owner
            hinted_soon = self._clock() - pend.since < self._policy.hint_wait
            if hinted_soon and not _is_pod(want):
                # A pod or child workload usually names the owner within a moment,
                # which saves reading it from the API server.
                pend.woken.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        pend.woken.wait(),
                        max(0.0, pend.since + self._policy.hint_wait - self._clock()),
                    )
                continue
            if self._resolve is not None and want.name:
                try:
                    uid = await self._resolve(pend.intent.namespace, want)
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    log.info(
                        "owner lookup failed",
                        extra={"fields": {"owner": want.name, "error": str(e)}},
                    )
                    uid = None
                if uid:
                    pend.owner = OwnerRef(want.api_version, want.kind, want.name, uid)
                    return pend.owner
            attempt += 1
            left = deadline - self._clock()
            if left <= 0:
                return False
            pend.woken.clear()
            wait = min(left, self._policy.delay(attempt, self._rng))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pend.woken.wait(), wait)

    async def _reconcile(self, pend: _Pending) -> None:
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
                    extra={"fields": {"podgroup": _name(intent.key), "error": str(e)}},
                )
                return
            if found is False:
                self._mark_done((hint.key, hint.owner.uid))
                pend.made = None
                return
            if found is None or found.key != intent.key or found.remove:
                return
            pend.intent = found
            pend.owner = found.owner
            await self._make(pend)
            top = found.owner.uid if found.owner is not None else ""
            if (found.key, top) in self._done:
                # Its other pods name the same workload: no more looks at it.
                self._mark_done((hint.key, hint.owner.uid))
            return
        await self._make(pend)

    async def _make(self, pend: _Pending) -> None:
        intent = pend.intent
        owner = await self._owner(pend)
        if owner is False:
            log.warning(
                "owner never appeared; no PodGroup until one of its pods names it",
                extra={
                    "fields": {
                        "podgroup": _name(intent.key),
                        "owner": intent.owner and f"{intent.owner.kind}/{intent.owner.name}",
                    }
                },
            )
            self._park(intent)
            self._report(intent, "no-owner")
            await self._discard_unowned(intent)
            return
        assert owner is None or isinstance(owner, OwnerRef)
        done_key = (intent.key, owner.uid if owner else "")
        early = self._early.get(intent.key)
        if early is not None:
            # A pod's admission is creating it on the request path: no second create.
            with contextlib.suppress(Exception):
                await asyncio.shield(early)
        if done_key in self._done and not intent.update:
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
                                    "fields": {"podgroup": _name(intent.key), "attempts": attempt}
                                },
                            )
                            self._report(intent, "stale")
                            return
                        await self._sleep(self._policy.delay(attempt, self._rng))
                        continue
                    if found is not None:
                        self._mark_done(done_key)
                        self._made_unowned.discard(intent.key)
                        self._exists_for(pend)
                        self._report(intent, _EXISTING_OUTCOME[found])
                        return
                if not retryable(status) or attempt == self._policy.attempts:
                    log.error(
                        "PodGroup create failed",
                        extra={
                            "fields": {
                                "podgroup": _name(intent.key),
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
            self._mark_done(done_key)
            self._exists_for(pend)
            log.info("PodGroup created", extra={"fields": {"podgroup": _name(intent.key)}})
            self._report(intent, "created")
            return
        # Only a PodGroup that kept vanishing between the 409 and the look gets here.
        log.error("PodGroup create failed", extra={"fields": {"podgroup": _name(intent.key)}})
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
                                "podgroup": _name(intent.key),
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
            self._forget(intent.key, owner.uid)
            if got == "removed":
                log.info(
                    "PodGroup of a suspended workload removed",
                    extra={"fields": {"podgroup": _name(intent.key)}},
                )
            self._report(intent, "foreign" if got == "foreign" else got)
            return

    async def _discard_unowned(self, intent: PodGroupIntent) -> None:
        """Delete the PodGroup made without owners for a bare-pod gang whose pod never
        appeared (refused further down the admission chain), if it still has none:
        Volcano would hold it, without pods, Inqueue."""
        key = intent.key
        owner = intent.owner
        if key not in self._made_unowned or self._remove is None or owner is None:
            return
        if not _is_pod(owner):
            return
        self._made_unowned.discard(key)
        try:
            got = await self._remove(intent, OwnerRef(owner.api_version, owner.kind, owner.name))
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info(
                "PodGroup made for a pod that never appeared not removed",
                extra={"fields": {"podgroup": _name(key), "error": str(e)}},
            )
            return
        if got == "removed":
            self._exists.pop(key, None)
            log.info(
                "PodGroup made for a pod that never appeared removed",
                extra={"fields": {"podgroup": _name(key)}},
            )
            self._report(intent, "removed")

    def _forget(self, key: _Key, uid: str) -> None:
        self._done.pop((key, uid), None)
        self._exists.pop(key, None)

    def _exists_for(self, pend: _Pending) -> None:
        """The PodGroup of ``pend`` is there: tell the pods that wait for it."""
        self._known_now(pend.intent.key)
        pend.made = True
        pend.settled.set()

    async def _inspect(self, intent: PodGroupIntent, owner: OwnerRef | None) -> Existing:
        if intent.update and self._update is not None:
            return await self._update(intent, owner, intent.render(owner))
        if self._existing is None:
            return Existing.OURS  # nothing to tell them apart with: 409 is success
        return await self._existing(intent, owner)

    def _park(self, intent: PodGroupIntent) -> None:
        self._parked[intent.key] = intent
        self._parked.move_to_end(intent.key)
        while len(self._parked) > self._park_limit:
            self._parked.popitem(last=False)

    def _mark_done(self, key: tuple[_Key, str]) -> None:
        self._done[key] = None
        while len(self._done) > self._remember:
            self._done.popitem(last=False)

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


async def _settled(pend: _Pending) -> bool | None:
    await pend.settled.wait()
    return pend.made


def _names(want: OwnerRef | None, got: OwnerRef) -> bool:
    """Whether a hint's owner is the one an intent waits for."""
    return want is not None and want.kind == got.kind and (not want.name or want.name == got.name)


def _is_pod(owner: OwnerRef) -> bool:
    return owner.kind == "Pod" and owner.api_version == "v1"


def _name(key: tuple[str, ...]) -> str:
    return f"{key[1]}/{key[2]}"
