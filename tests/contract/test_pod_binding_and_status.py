"""pod-binding-and-status: a pod as created, bound (by kube-scheduler or by a Binding posted
by hand: the server sets spec.nodeName and PodScheduled itself; a second Binding is 409) and
marked Running by its kubelet, and the versions a watch sees; a pod no node fits, marked
Unschedulable by kube-scheduler, and the scheduler's Events."""

from __future__ import annotations

from tests.contract.conftest import ReplayFactory
from tests.contract.controller_models import same_events
from tests.controllers import PodScheduler, Rest
from tests.kubeapi.kubelet import Kubelet
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


async def test_an_unschedulable_pod_and_the_scheduler_events(replay: ReplayFactory) -> None:
    """kube-scheduler's part, played by the pod-by-pod scheduler model: it binds "plain"
    (a Scheduled Event), leaves "manual" (another scheduler's) alone, and marks "huge",
    which no node fits, PodScheduled=False Unschedulable with kube-scheduler's message and
    a FailedScheduling Event."""
    async with replay("pod-binding-and-status", controllers=[Kubelet()]) as r:
        scheduler = PodScheduler(Rest(r.api.url))

        async def schedule(r: Replay) -> None:
            await scheduler.step()

        rec = r.recording
        events = rec.step("Events in the namespace")
        try:
            await r.run(
                before={
                    "GET after kube-scheduler bound it": schedule,
                    "GET after the kubelet loop marked it Running": lambda r: r.settle(),
                    "GET the unschedulable pod": schedule,
                },
                until=events.index,
            )
            assert await scheduler.step() is False  # nothing new: no second Event
            answer = await r.send(events)
        finally:
            await scheduler.close()
        assert answer.status == 200
        mine = answer.body["items"]
        same_events(r, events.response, mine, "the namespace's Events")
        # The scheduler's Events are of the events.k8s.io kind, as recorded: an action and
        # an eventTime, no source or first/last timestamps. reportingInstance is the
        # scheduler's host name (the recording's "default-scheduler-vm").
        for e in mine:
            assert_same(
                next(w for w in events.response["items"] if w["reason"] == e["reason"]),
                e,
                names=r.names,
                ignore=("metadata.name", "reportingInstance", "message"),
                what=e["reason"],
            )
