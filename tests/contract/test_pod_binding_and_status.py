"""pod-binding-and-status: a pod as created, bound (by kube-scheduler or by a Binding posted
by hand: the server sets spec.nodeName and PodScheduled itself; a second Binding is 409) and
marked Running by its kubelet, and the versions a watch sees."""

from __future__ import annotations

import pytest

from tests.contract.conftest import ReplayFactory
from tests.kubeapi.controllers import Kubelet
from tests.kubeapi.recording import Replay, assert_same

NS = "rec-bind"
WATCH = "watch on the namespace's pods"


def _scheduled(r: Replay) -> None:
    r.bind(NS, "plain")  # kube-scheduler's choice


async def test_created_bound_running_and_bound_by_hand(replay: ReplayFactory) -> None:
    async with replay("pod-binding-and-status", controllers=[Kubelet()]) as r:
        async with r.watching(f"/api/v1/namespaces/{NS}/pods?watch=1") as events:
            await r.run(
                before={
                    "GET after kube-scheduler bound it": _scheduled,
                    "GET after the kubelet loop marked it Running": lambda r: r.settle(),
                },
                until=r.recording.step("create a pod too big").index,
            )
            r.settle()  # the kubelet loop, held back until now, starts "manual"
        recorded = [
            e["event"]
            for e in r.recording.observation(WATCH).object["events"]
            if e["event"]["object"]["metadata"]["name"] in ("plain", "manual")
        ]
        assert [e["type"] for e in events] == [e["type"] for e in recorded]
        assert_same(recorded, events, names=r.names)


@pytest.mark.xfail(
    strict=True,
    reason="kube-scheduler's part is missing: a pod no node fits gets PodScheduled=False "
    "Unschedulable with the scheduler's message and a FailedScheduling Event, and a bound "
    "pod a Scheduled Event; that needs a pod-by-pod scheduler model in the replay",
)
async def test_an_unschedulable_pod_and_the_scheduler_events(replay: ReplayFactory) -> None:
    async with replay("pod-binding-and-status", controllers=[Kubelet()]) as r:
        await r.run(
            before={
                "GET after kube-scheduler bound it": _scheduled,
                "GET after the kubelet loop marked it Running": lambda r: r.settle(),
            }
        )
