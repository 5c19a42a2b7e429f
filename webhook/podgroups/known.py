"""What the reconciler remembers about PodGroups between admissions, bounded.

Four memories, each with its own reason to exist:

* *made*: (key, owner uid) of PodGroups made or found for that owner. Keyed by uid,
  so a workload deleted and made again under the same name gets its PodGroup again.
* *seen*: PodGroups known to exist (whoever owns them) and when that was learnt, for
  ``RetryPolicy.exists_ttl`` seconds, so a gang's later pods are answered without a
  call.
* *parked*: intents whose owner never showed up, until a hint names the owner.
* *unowned*: PodGroups created without owners on the request path for a bare-pod
  gang, removed again if no pod of theirs ever shows up.

The first three are bounded: past its limit, *made* forgets what was marked first,
*seen* and *parked* what was touched least recently. The last is emptied by the work
itself."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from webhook.podgroup_intent import PodGroupIntent
from webhook.podgroups.work_item import Key


class KnownPodGroups:
    """The reconciler's memory; see the module docstring."""

    def __init__(
        self, *, remember: int, parked: int, ttl: float, clock: Callable[[], float]
    ) -> None:
        self._made: OrderedDict[tuple[Key, str], None] = OrderedDict()
        self._seen: OrderedDict[Key, float] = OrderedDict()
        self._parked: OrderedDict[Key, PodGroupIntent] = OrderedDict()
        self._unowned: set[Key] = set()
        self._remember = remember
        self._park_limit = parked
        self._ttl = ttl
        self._clock = clock

    # --- made for an owner ----------------------------------------------------------

    def made(self, key: Key, uid: str) -> bool:
        """Made or found for the owner with ``uid`` ("" for a gang nobody owns)."""
        return (key, uid) in self._made

    def mark_made(self, key: Key, uid: str) -> None:
        self._made[(key, uid)] = None
        while len(self._made) > self._remember:
            self._made.popitem(last=False)

    def forget(self, key: Key, uid: str) -> None:
        """Removed (a suspended workload): the resume must make it again."""
        self._made.pop((key, uid), None)
        self._seen.pop(key, None)

    # --- known to exist ---------------------------------------------------------------

    def exists(self, key: Key) -> bool:
        """Seen to exist less than the TTL ago."""
        when = self._seen.get(key)
        return when is not None and self._clock() - when < self._ttl

    def saw(self, key: Key) -> None:
        self._seen[key] = self._clock()
        self._seen.move_to_end(key)
        while len(self._seen) > self._remember:
            self._seen.popitem(last=False)

    def gone(self, key: Key) -> None:
        self._seen.pop(key, None)

    # --- parked until a hint names the owner ------------------------------------------

    def park(self, intent: PodGroupIntent) -> None:
        self._parked[intent.key] = intent
        self._parked.move_to_end(intent.key)
        while len(self._parked) > self._park_limit:
            self._parked.popitem(last=False)

    def parked_for(self, key: Key) -> PodGroupIntent | None:
        return self._parked.get(key)

    def unpark(self, key: Key) -> None:
        self._parked.pop(key, None)

    @property
    def parked(self) -> int:
        return len(self._parked)

    # --- made without owners on the request path ------------------------------------

    def mark_unowned(self, key: Key) -> None:
        self._unowned.add(key)

    def owned_now(self, key: Key) -> None:
        """A pod joined it, or its gang's work found it: not to be removed."""
        self._unowned.discard(key)

    def take_unowned(self, key: Key) -> bool:
        """Whether ``key`` was made without owners and still has none; forgets it."""
        if key not in self._unowned:
            return False
        self._unowned.discard(key)
        return True
