"""eviction-created: an Eviction of a bound, Running pod is 201; the pod is then terminating
(deletionTimestamp, grace 30, DisruptionTarget) until its kubelet ends it; evicting it again
is 201, once gone 404. A watch sees every version in order."""

from __future__ import annotations

from tests.contract.conftest import ReplayFactory
from tests.kubeapi.kubelet import Kubelet
from tests.kubeapi.recording import Replay, assert_same

NS = "rec-evict"


async def test_every_answer_and_every_version_is_the_recorded_one(
    replay: ReplayFactory,
) -> None:
    # The kubelet runs only when the test settles the cluster: held back in between.
    def bind_and_run(r: Replay) -> None:
        r.bind(NS, "victim")  # kube-scheduler's choice
        r.settle()
        pod = r.store.get(r.store.resource("pods"), NS, "victim")
        assert_same(r.recording.observation("pod bound").object, pod, names=r.names)

    async with replay("eviction-created", controllers=[Kubelet()]) as r:
        watched = r.recording.observation("watch on the namespace").object
        async with r.watching(f"/api/v1/namespaces/{NS}/pods?watch=1") as events:
            await r.run(
                before={
                    "evict the pod": bind_and_run,
                    "GET after the kubelet loop": lambda r: r.settle(),
                }
            )
        assert [e["type"] for e in events] == [e["type"] for e in watched["events"]]
        assert_same([e["event"] for e in watched["events"]], events, names=r.names)
