"""What the contract tests of the controller models share: the models of a replay (Job
controller, garbage collector, schedulers, the fake's kubelet), and comparisons of what
they made with what the real control plane made, on the fields the controllers own."""

from __future__ import annotations

import re
from typing import Any

from tests.controllers import ControllerSet, ManualClock, control_plane
from tests.kubeapi.kubelet import Kubelet
from tests.kubeapi.recording import Replay, assert_same

Json = dict[str, Any]

__all__ = ["Models", "pod_view", "same_events", "same_pods"]


class Models:
    """The control plane's controllers beside a replay, stepped by :meth:`settle`."""

    def __init__(
        self,
        r: Replay,
        *,
        fail_terminating: bool = False,
        gang: bool = False,
        backoff: float = 0.0,
    ) -> None:
        self.replay = r
        self.clock = ManualClock()
        self.kubelet = Kubelet(fail_terminating=fail_terminating)
        self.set = ControllerSet(
            control_plane(
                r.api.url,
                r.store,
                scheduler="gang" if gang else "pod",
                clock=self.clock,
                backoff=backoff,
                kubelet=self.kubelet,
            )
        )

    async def settle(self, only: tuple[str, ...] = ()) -> int:
        return await self.set.settle(only=only)

    async def step(self, *only: str) -> bool:
        return await self.set.step(only)

    async def close(self) -> None:
        await self.set.stop()

    def items(self, plural: str, namespace: str, group: str = "") -> list[Json]:
        store = self.replay.store
        return sorted(
            store.items(store.resource(plural, group), namespace),
            key=lambda o: o["metadata"]["name"],
        )

    def get(self, plural: str, namespace: str, name: str, group: str = "") -> Json:
        store = self.replay.store
        return store.get(store.resource(plural, group), namespace, name)

    def learn_uids(self) -> None:
        """Owner uids also appear as label values (``controller-uid``): the recording's and
        this run's stand for one another there too."""
        for recorded, mine in self.replay.values.items():
            if len(recorded) == 36 and recorded.count("-") == 4:
                self.replay.names[recorded] = self.replay.names[mine] = f"<uid {recorded[:8]}>"

    def learn_names(self, recorded: list[Json], mine: list[Json]) -> None:
        """Pair generated pod names of the recording with this run's, in order."""
        self.learn_uids()
        for a, b in zip(recorded, mine, strict=True):
            gen = a["metadata"].get("generateName") or a["metadata"]["name"]
            self.replay.names[a["metadata"]["name"]] = f"{gen}<gen>"
            self.replay.names[b["metadata"]["name"]] = f"{gen}<gen>"


def pod_view(pod: Json) -> Json:
    """The fields of a pod the controllers and the kubelet write, and the API server's
    deletion marks: the rest of a pod (defaults, volumes) is the API server's business and
    checked by its own contract tests."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    return {
        "metadata": {
            k: meta[k]
            for k in (
                "name",
                "generateName",
                "labels",
                "annotations",
                "finalizers",
                "ownerReferences",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            )
            if k in meta
        },
        "spec": {"nodeName": (pod.get("spec") or {}).get("nodeName")},
        "status": {
            "phase": status.get("phase"),
            "conditions": [
                {
                    k: c.get(k)
                    for k in ("type", "status", "reason", "message")
                    if c.get(k) is not None
                }
                for c in status.get("conditions") or ()
            ],
        },
    }


def same_pods(r: Replay, recorded: Json, mine: list[Json], what: str) -> None:
    """A recorded PodList and this run's pods agree pod by pod (in name order, after the
    generated names are paired)."""
    want = sorted(recorded.get("items") or (), key=lambda p: r.names.get(p["metadata"]["name"], ""))
    got = sorted(mine, key=lambda p: r.names.get(p["metadata"]["name"], ""))
    assert len(got) == len(want), f"{what}: {len(got)} pods, recorded {len(want)}"
    for a, b in zip(want, got, strict=True):
        assert_same(pod_view(a), pod_view(b), names=r.names, what=what)


def _event_key(e: Json, names: dict[str, str]) -> tuple[str, ...]:
    inv = e.get("involvedObject") or {}
    name = names.get(inv.get("name", ""), inv.get("name", ""))
    message = str(e.get("message", ""))
    for old in sorted(names, key=len, reverse=True):  # whole names only, longest first
        message = re.sub(rf"(?<![\w-]){re.escape(old)}(?![\w-])", names[old], message)
    component = (e.get("source") or {}).get("component") or e.get("reportingComponent") or ""
    return (e.get("type", ""), e.get("reason", ""), inv.get("kind", ""), name, message, component)


def same_events(r: Replay, recorded: Json, mine: list[Json], what: str) -> None:
    """The same Events (type, reason, object, message, component), each at least once;
    counts vary with timing and are not compared."""
    want = sorted({_event_key(e, r.names) for e in recorded.get("items") or ()})
    got = sorted({_event_key(e, r.names) for e in mine})
    assert got == want, f"{what}: events differ\n  recorded: {want}\n  got:      {got}"
