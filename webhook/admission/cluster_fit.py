"""The webhook's view of the cluster, and the feasibility questions it asks the engine.

The server never builds a snapshot on the request path: it asks a
:class:`SnapshotSource` for the current :class:`ClusterCapacity` (None when not synced,
or when running without a cluster). A ClusterState pairs the live snapshot, kept
current by the informers, with ``capacity``: the same nodes with no pods, rebuilt by
the source only when the node set changes. "Can this gang ever start here?" is a
dry-run placement on ``capacity``; "can it start now?" one on the live snapshot.
Both answers come from the engine alone, placing with the configured policy (one of
``gangplace.engine.policies.POLICIES``; FGD and its kin weigh the gang's own shapes, so
an answer depends on the gang and the nodes alone). Answers about ``capacity`` are kept
per gang shape and policy for the state's life; answers about the live snapshot until
its ``version`` changes (the informer-backed source bumps it with every pod it moves).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from gangplace.engine import (
    Gang,
    GangOptions,
    PodShape,
    Snapshot,
    TaskRole,
    member_capacity,
    place_gang,
)
from gangplace.engine.fragmentation import TargetWorkload
from gangplace.engine.policies import DEFAULT_POLICY, PolicyContext, make_policy

__all__ = [
    "ClusterCapacity",
    "NoCluster",
    "SnapshotSource",
    "StaticSource",
    "Verdict",
    "check_gang",
]

_CACHE_LIMIT = 4096
_DRY_RUN = GangOptions(dry_run=True, best_effort=False)


@runtime_checkable
class SnapshotSource(Protocol):
    """What the server asks for the cluster (:class:`webhook.live.InformerSource` with an
    API server)."""

    def state(self) -> ClusterCapacity | None:
        """The current cluster view, or None (not synced yet, or no cluster)."""
        ...

    def ready(self) -> bool:
        """Whether ``/readyz`` should report ready (informers synced)."""
        ...


_Key = tuple[tuple[tuple[PodShape, int], ...], int, str]


@dataclass(slots=True)
class ClusterCapacity:
    """A live snapshot and an empty copy of its nodes (see the module docstring).

    A source that changes ``snapshot`` in place bumps ``version`` with every change,
    so that answers about the snapshot as it is now can be kept until it changes."""

    snapshot: Snapshot
    capacity: Snapshot
    version: int = 0
    # (roles, required, policy) -> reason or "" ; answers on ``capacity`` never change.
    _never: dict[_Key, str] = field(default_factory=dict, repr=False)
    # The same, on ``snapshot`` at ``_now_version``.
    _now: dict[_Key, str] = field(default_factory=dict, repr=False)
    _now_version: int = field(default=0, repr=False)

    @classmethod
    def of(cls, snapshot: Snapshot) -> ClusterCapacity:
        """Pair ``snapshot`` with an empty copy of its nodes. This builds a snapshot:
        call it when the node set changes, never per request."""
        return cls(snapshot, Snapshot(snapshot.nodes, (), snapshot.config))


class NoCluster:
    """``--no-cluster``: no view, no warnings; always ready."""

    def state(self) -> ClusterCapacity | None:
        return None

    def ready(self) -> bool:
        return True


class StaticSource:
    """A fixed view (a cluster dump read once at start, or a test's snapshot)."""

    def __init__(self, state: ClusterCapacity) -> None:
        self._state = state

    def state(self) -> ClusterCapacity | None:
        return self._state

    def ready(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a gang can never start here, or cannot start now ("" when it can)."""

    never: str = ""
    now: str = ""


def _fits(snap: Snapshot, gang: Gang, policy: str) -> str:
    """ "" if ``gang`` fits ``snap`` as it is, placed by ``policy``, else the engine's reason."""
    if len(gang.roles) == 1:
        # One shape: the per-node capacities add up exactly, so their sum answers the
        # question without placing members one by one (whatever the policy).
        role = gang.roles[0]
        if int(member_capacity(snap, role.shape).sum()) >= gang.required:
            return ""
    own = TargetWorkload.from_shapes(r.shape for r in gang.roles for _ in range(r.count))
    scorer = make_policy(policy, PolicyContext(own))
    result = place_gang(snap, gang, scorer, options=_DRY_RUN)
    # Callers cache the answer across gangs, so it must not name this one.
    return "" if result.ok else result.why


def check_gang(
    state: ClusterCapacity,
    name: str,
    roles: Sequence[tuple[str, PodShape, int]],
    required: int,
    *,
    now: bool = False,
    policy: str = DEFAULT_POLICY,
) -> Verdict:
    """Ask the engine whether ``required`` members of the gang (roles of
    ``(name, shape, count)``) could ever start on this cluster, and -- with ``now`` --
    whether they could start on it as it is now, placed by ``policy``."""
    gang = Gang(name, tuple(TaskRole(r, s, c) for r, s, c in roles), required)
    key = (tuple((s, c) for _, s, c in roles), required, policy)
    never = state._never.get(key)
    if never is None:
        never = _fits(state.capacity, gang, policy)
        if len(state._never) >= _CACHE_LIMIT:
            state._never.clear()
        state._never[key] = never
    if never or not now:
        return Verdict(never=never)
    if state._now_version != state.version:
        state._now.clear()
        state._now_version = state.version
    answer = state._now.get(key)
    if answer is None:
        answer = _fits(state.snapshot, gang, policy)
        if len(state._now) >= _CACHE_LIMIT:
            state._now.clear()
        state._now[key] = answer
    return Verdict(now=answer)
