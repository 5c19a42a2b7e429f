"""One PodGroup's work in progress in the reconciler, and the small reads on it.

Kept apart from the reconciler so that the owner lookup and the request-path wait can
read the same record without importing the loop that runs it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from webhook.podgroup_intent import OwnerHint, OwnerRef, PodGroupIntent

# PodGroupIntent.key, and the queue's unit of work: that key and, for a gang owned by
# its pods, the pod (each of its pods is an owner of its own that must join the group).
Key = tuple[str, str, str, str]
Slot = tuple[str, str, str, str, str]


def slot_of(intent: PodGroupIntent) -> Slot:
    owner = intent.owner
    pod = owner.name if owner is not None and is_pod(owner) else ""
    return (*intent.key, pod)


@dataclass(slots=True)
class WorkItem:
    """A queued intent: what is known of its owner so far, and who waits on it."""

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


async def settled(item: WorkItem) -> bool | None:
    """Wait for ``item`` to end; what it came to (see :attr:`WorkItem.made`)."""
    await item.settled.wait()
    return item.made


def names_owner(want: OwnerRef | None, got: OwnerRef) -> bool:
    """Whether a hint's owner is the one an intent waits for."""
    return want is not None and want.kind == got.kind and (not want.name or want.name == got.name)


def is_pod(owner: OwnerRef) -> bool:
    return owner.kind == "Pod" and owner.api_version == "v1"


def podgroup_name(key: tuple[str, ...]) -> str:
    """``namespace/name`` of a PodGroup key, as the logs name it."""
    return f"{key[1]}/{key[2]}"
