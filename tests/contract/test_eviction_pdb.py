"""eviction-pdb-429, eviction-pdb-allowed and eviction-dry-run: the Eviction subresource
under a PodDisruptionBudget, the budget's status as the disruption controller writes it, and
dry runs that answer like real evictions and change nothing."""

from __future__ import annotations

from tests.contract.conftest import ReplayFactory
from tests.kubeapi.kubelet import Kubelet
from tests.kubeapi.recording import Replay, assert_same


def _schedule_and_run(r: Replay) -> None:
    r.bind_all()
    r.settle()


async def test_a_budget_with_no_room_refuses_with_429(replay: ReplayFactory) -> None:
    async with replay("eviction-pdb-429", controllers=[Kubelet()]) as r:

        def budget_filled(r: Replay) -> None:
            assert_same(
                r.recording.observation("pod web-a before").object,
                r.get("pods", "rec-pdb", "web-a"),
                names=r.names,
            )
            assert_same(
                r.recording.observation("disruption controller filled").object,
                r.get("poddisruptionbudgets", "rec-pdb", "web", "policy"),
                names=r.names,
            )

        await r.run(before={"create PDB": _schedule_and_run, "evict web-a": budget_filled})


async def test_a_budget_allows_one_eviction_then_refuses(replay: ReplayFactory) -> None:
    async with replay("eviction-pdb-allowed", controllers=[Kubelet()]) as r:

        def budget_filled(r: Replay) -> None:
            assert_same(
                r.recording.observation("disruption controller filled").object,
                r.get("poddisruptionbudgets", "rec-pdb-ok", "web", "policy"),
                names=r.names,
            )

        def first_pod_gone(r: Replay) -> None:
            r.settle()  # the kubelet ends web-a
            assert_same(
                r.recording.observation("web-a deleted").object,
                r.get("poddisruptionbudgets", "rec-pdb-ok", "web", "policy"),
                names=r.names,
            )

        await r.run(
            before={
                "create PDB": _schedule_and_run,
                "evict web-a": budget_filled,
                "evict web-b now": first_pod_gone,
            }
        )


async def test_dry_run_evictions_answer_alike_and_change_nothing(
    replay: ReplayFactory,
) -> None:
    async with replay("eviction-dry-run", controllers=[Kubelet()]) as r:

        def pod_running(r: Replay) -> None:
            _schedule_and_run(r)
            assert_same(
                r.recording.observation("pod before").object,
                r.get("pods", "rec-dry", "solo"),
                names=r.names,
            )

        def budget_filled(r: Replay) -> None:
            assert_same(
                r.recording.observation("PDB status filled").object,
                r.get("poddisruptionbudgets", "rec-dry", "solo", "policy"),
                names=r.names,
            )

        rv_before: list[str] = []

        def remember_rv(r: Replay) -> None:
            rv_before.append(r.get("pods", "rec-dry", "solo")["metadata"]["resourceVersion"])

        await r.run(
            before={
                "eviction with deleteOptions": lambda r: (pod_running(r), remember_rv(r))[0],
                "dry-run eviction the PDB": budget_filled,
            }
        )
        # "unchanged" means the very same version.
        pods = [a.body for i, a in r.answers.items() if r.recording.steps[i].do.startswith("GET")]
        assert {p["metadata"]["resourceVersion"] for p in pods} == set(rv_before)
