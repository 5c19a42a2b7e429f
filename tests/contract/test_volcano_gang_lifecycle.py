"""volcano-gang-lifecycle: the gang scheduler model (Volcano's rules, placement by the
engine) keeps an unfittable gang whole and unbound -- Pending when its minResources are
more than the cluster has, Inqueue without them -- binds a fitting gang in one session
(Inqueue -> Running), and keeps an empty PodGroup Inqueue, with Volcano's conditions and
Events."""

from __future__ import annotations

import pytest

from tests.contract.conftest import ReplayFactory
from tests.contract.controller_models import Models, same_events
from tests.kubeapi.recording import Replay

# The scheduler's part alone, then every field the in-memory API server writes too.
STRICT = [pytest.param(False, id="scheduler"), pytest.param(True, id="every-field")]
SESSIONS = 3  # Volcano sessions (one a second) run between the recording's steps


# A gang's whole life with the Job controller, the gang scheduler and the kubelet: not in
# `make test-fast`.
pytestmark = pytest.mark.scenario


@pytest.mark.parametrize("strict", STRICT)
async def test_the_podgroup_lifecycle(replay: ReplayFactory, strict: bool) -> None:
    async with replay("volcano-gang-lifecycle") as r:
        r.store.load([r.recording.steps[0].response])  # Volcano's default Queue
        m = Models(r, gang=True)
        store = r.store
        watched = {  # what the recording watched: every version of each object
            (ns, plural): store.watch(store.resource(plural, group), ns)
            for ns in ("rec-vc-a1", "rec-vc-c", "rec-vc-a2", "rec-vc-b")
            for plural, group in (("podgroups", "scheduling.volcano.sh"), ("pods", ""))
            if not (ns == "rec-vc-c" and plural == "pods")
            and not (ns == "rec-vc-a2" and plural == "pods")  # churns in Volcano: see below
        }
        try:

            async def sessions(_: Replay) -> None:
                for _ in range(SESSIONS):
                    await m.step("volcano")
                    await m.settle(("kubelet",))

            def versions(*namespaces: str) -> None:
                """Every version of each object, as the recording's watch saw them until
                that part of it ended."""
                for (ns, plural), w in watched.items():
                    if ns not in namespaces:
                        continue
                    store.unwatch(w)
                    got: dict[str, list[str]] = {}
                    while not w.queue.empty():
                        item = w.queue.get_nowait()
                        if item is not None:
                            got.setdefault(item[1]["metadata"]["name"], []).append(item[0])
                    (recorded,) = [
                        o.object
                        for o in r.recording.observed
                        if f"/namespaces/{ns}/{plural}?" in o.object.get("watch", "")
                    ]
                    want: dict[str, list[str]] = {}
                    for e in recorded["events"]:
                        name = e["event"]["object"]["metadata"]["name"]
                        want.setdefault(name, []).append(e["type"])
                    assert got == want, f"{ns} {plural}: versions {got}, recorded {want}"

            async def a1_and_c_done(_: Replay) -> None:
                await sessions(_)
                versions("rec-vc-a1", "rec-vc-c")

            async def a2_done(_: Replay) -> None:
                versions("rec-vc-a2")

            generation = [] if strict else ["metadata.generation"]
            answers = await r.run(
                before={
                    "[a1] create PodGroup": sessions,  # [c] went Inqueue
                    "[a1] GET PodGroup at the end": sessions,
                    "[a2] create PodGroup": a1_and_c_done,
                    "[b] create PodGroup": a2_done,
                    "[a2] GET PodGroup at the end": sessions,
                    "[b] create pod pair-0": sessions,  # Inqueue before its pods were seen
                    "[b] GET PodGroup at the end": sessions,
                },
                ignore={
                    # Volcano's a2 conditions churn between sessions (a random node each
                    # time); the model's are stable: compared below on what a user reads.
                    "[a2] list pods at the end": ["items"],
                    # Events: names and counts vary; compared as sets below.
                    "[a1] Events": ["items"],
                    "[c] Events": ["items"],
                    "[a2] Events": ["items"],
                    "[b] Events": ["items"],
                    # the pods' own fields (defaults, volumes) are the API server's business
                    "[a1] list pods": ["items.*.spec", "items.*.metadata.labels"],
                    "[b] list pods": ["items.*.spec", "items.*.metadata.labels"],
                    **{f"[{g}] GET PodGroup": generation for g in ("a1", "c", "a2", "b")},
                },
            )
            for ns in ("rec-vc-a1", "rec-vc-c", "rec-vc-b"):
                step = next(
                    s for s in r.recording.steps if s.path == f"/api/v1/namespaces/{ns}/events"
                )
                same_events(r, step.response, m.items("events", ns), f"Events of {ns}")
            # a2: nothing bound; three pods "can possibly be assigned", one Unschedulable
            step = r.recording.step("[a2] list pods at the end")
            reasons = sorted(
                p["status"]["conditions"][0]["reason"] for p in answers[step.index].body["items"]
            )
            assert reasons == ["Schedulable", "Schedulable", "Schedulable", "Unschedulable"]
            assert all(not p["spec"].get("nodeName") for p in answers[step.index].body["items"])
            versions("rec-vc-b")
        finally:
            await m.close()
