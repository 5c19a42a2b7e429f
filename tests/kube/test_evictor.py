"""The evictor: limits hold, budgets refuse clearly, retries are bounded, dry-run writes
nothing, Events name the plan, and a gang goes whole or not at all."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from gangplace.engine import EngineConfig
from gangplace.engine.node_pod_records import pod_from_json
from gangplace.engine.objects import pdb_from_json
from gangplace.kube import (
    Budget,
    EvictionTarget,
    Evictor,
    KubeClient,
    Limits,
    Outcome,
    check_disruption,
)

from tests.kubeapi import ApiServer, ApiStore
from tests.kubeapi import objects as o

# Pods of a workload with a scale (a budget with maxUnavailable needs one to be computed).
_RS = ("ReplicaSet", "w")


class Sleeps:
    """Records backoff delays instead of waiting them out."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def real_evictions(api: ApiServer) -> list[Any]:
    """POSTed Evictions that were not dry runs (each gang is dry-run first)."""
    return [r for r in api.requests("POST", "/eviction") if "dryRun" not in r.query]


def target(store: ApiStore, ns: str, name: str, **kw: str) -> EvictionTarget:
    """The target the descheduler would build from the cached pod record."""
    obj = store.get(store.resource("pods"), ns, name)
    return EvictionTarget.from_record(pod_from_json(obj, EngineConfig()), **kw)


def exists(store: ApiStore, ns: str, name: str) -> bool:
    return store.find(store.resource("pods"), ns, name) is not None


async def test_limits_are_never_exceeded(
    api: ApiServer, kube: KubeClient, kubelet: Callable[[], int]
) -> None:
    store = api.store
    store.load([o.pod(f"p{n}-{i}", f"ns{i % 2}", node=f"n{n}") for n in range(4) for i in range(5)])
    limits = [Budget.per_run(7), Budget.per_node(2), Budget.per_namespace(4)]
    ev = Evictor(kube, plan="plan-1", limits=limits, sleep=Sleeps())
    targets = [target(store, f"ns{i % 2}", f"p{n}-{i}") for n in range(4) for i in range(5)]
    random.Random(3).shuffle(targets)
    for t in targets:
        await ev.evict(t)
    evicted = [r.target for r in ev.results if r.outcome is Outcome.EVICTED]
    skipped = [r for r in ev.results if r.outcome is Outcome.SKIPPED_BY_LIMIT]
    assert len(evicted) + len(skipped) == 20
    assert len(evicted) <= 7
    for n in range(4):
        assert sum(t.node == f"n{n}" for t in evicted) <= 2
    for ns in ("ns0", "ns1"):
        assert sum(t.namespace == ns for t in evicted) <= 4
    # The limits bind: every namespace is full, so nothing more could have gone.
    assert len(evicted) == 7 or all(
        sum(t.namespace == ns for t in evicted) == 4 for ns in ("ns0", "ns1")
    )
    assert {r.limit for r in skipped} <= {"per-run", "per-node", "per-namespace"}
    assert all("would be exceeded" in r.message for r in skipped)
    # The server agrees: exactly the evicted pods are gone once their kubelets have ended
    # them, and no skipped pod was POSTed.
    kubelet()
    for r in ev.results:
        assert exists(store, r.target.namespace, r.target.name) is (
            r.outcome is not Outcome.EVICTED
        )
    assert len(real_evictions(api)) == len(evicted)
    assert ev.summary() == {"evicted": len(evicted), "skipped-by-limit": len(skipped)}


async def test_gpu_and_queue_budgets(api: ApiServer, kube: KubeClient) -> None:
    store = api.store
    store.load(
        [o.pod(f"g{i}", "ns1", node="n1", gpus=4) for i in range(3)]
        + [o.pod("c", "ns1", node="n1")]
    )
    limits = Limits([Budget.gpus_per_run(8000)])
    limits.add(Budget.per_queue(1))
    ev = Evictor(kube, plan="p", limits=limits)
    results = [await ev.evict(target(store, "ns1", f"g{i}", queue=f"q{i}")) for i in range(3)]
    assert [r.outcome for r in results] == [
        Outcome.EVICTED,
        Outcome.EVICTED,
        Outcome.SKIPPED_BY_LIMIT,
    ]
    assert results[2].limit == "gpu-milli-per-run"
    assert (
        await ev.evict(target(store, "ns1", "c"))
    ).outcome is Outcome.EVICTED  # no GPUs, no queue
    with pytest.raises(ValueError, match="exists already"):
        limits.add(Budget.per_queue(2))


async def test_a_budget_refusal_is_a_clear_result(api: ApiServer, kube: KubeClient) -> None:
    store = api.store
    store.load([o.pod(f"w{i}", "ns1", node="n1", labels={"app": "w"}) for i in range(2)])
    store.create(
        store.resource("poddisruptionbudgets", "policy"),
        "ns1",
        o.pdb("keep-two", "ns1", match_labels={"app": "w"}, min_available=2),
    )
    sleeps = Sleeps()
    ev = Evictor(kube, plan="p", max_attempts=3, backoff_initial=0.5, backoff_max=2, sleep=sleeps)
    result = await ev.evict(target(store, "ns1", "w0"))
    assert result.outcome is Outcome.REFUSED_BY_PDB
    assert "Cannot evict pod as it would violate the pod's disruption budget." in result.message
    assert "keep-two needs 2 healthy pods and has 2 currently" in result.message
    assert "after 3 attempt(s)" in result.message and result.attempts == 3
    assert len(sleeps.delays) == 2 and all(0 < d <= 2 for d in sleeps.delays)
    assert exists(store, "ns1", "w0")
    assert len(real_evictions(api)) == 3
    assert ev.limits.used.total() == 0  # a refused pod gives its share of the limits back


async def test_server_errors_are_retried_then_succeed(
    api: ApiServer, kube: KubeClient, kubelet: Callable[[], int]
) -> None:
    store = api.store
    store.load([o.pod("p", "ns1", node="n1")])
    api.faults.fail(503, times=2, method="POST", path="/eviction$")
    ev = Evictor(kube, plan="p", sleep=Sleeps())
    result = await ev.evict(target(store, "ns1", "p"))
    assert (result.outcome, result.attempts) == (Outcome.EVICTED, 3)
    kubelet()
    assert not exists(store, "ns1", "p")


async def test_retries_are_bounded(api: ApiServer, kube: KubeClient) -> None:
    store = api.store
    store.load([o.pod("p", "ns1", node="n1")])
    api.faults.fail(500, times=-1, method="POST", path="/eviction$", message="etcd is unwell")
    sleeps = Sleeps()
    ev = Evictor(kube, plan="p", max_attempts=4, sleep=sleeps)
    result = await ev.evict(target(store, "ns1", "p"))
    assert result.outcome is Outcome.FAILED
    assert "500" in result.message and "etcd is unwell" in result.message
    assert result.attempts == 4 and len(sleeps.delays) == 3
    assert len(real_evictions(api)) == 4


async def test_throttling_is_not_a_budget_refusal(api: ApiServer, kube: KubeClient) -> None:
    store = api.store
    store.load([o.pod("p", "ns1", node="n1")])
    api.faults.fail(
        429,
        times=-1,
        method="POST",
        path="/eviction$",
        message="too many requests, slow down",
        retry_after=0.25,
    )
    sleeps = Sleeps()
    ev = Evictor(kube, plan="p", max_attempts=2, sleep=sleeps)
    result = await ev.evict(target(store, "ns1", "p"))
    assert result.outcome is Outcome.FAILED and "slow down" in result.message
    assert sleeps.delays == [0.25]  # Retry-After honoured


async def test_client_errors_are_not_retried(api: ApiServer, kube: KubeClient) -> None:
    store = api.store
    store.load([o.pod("p", "ns1", node="n1")])
    api.faults.fail(403, times=-1, method="POST", message="forbidden: no RBAC")
    ev = Evictor(kube, plan="p", sleep=Sleeps())
    result = await ev.evict(target(store, "ns1", "p"))
    assert (result.outcome, result.attempts) == (Outcome.FAILED, 1)
    assert "403" in result.message and "no RBAC" in result.message


async def test_gone_and_replaced_pods(
    api: ApiServer, kube: KubeClient, kubelet: Callable[[], int]
) -> None:
    store = api.store
    pods = store.resource("pods")
    store.load([o.pod("gone", "ns1", node="n1"), o.pod("sts-0", "ns1", node="n1")])
    gone, old = target(store, "ns1", "gone"), target(store, "ns1", "sts-0")
    store.delete(pods, "ns1", "gone")
    store.delete(pods, "ns1", "sts-0")
    kubelet()  # both deletions finish
    store.create(pods, "ns1", o.pod("sts-0", "ns1", node="n2"))  # same name, new pod
    ev = Evictor(kube, plan="p", sleep=Sleeps())
    r1, r2 = await ev.evict(gone), await ev.evict(old)
    assert r1.outcome is Outcome.GONE and "no longer exists" in r1.message
    assert r2.outcome is Outcome.GONE and "replaced" in r2.message
    assert exists(store, "ns1", "sts-0")  # the new pod was not evicted


async def test_dry_run_sends_no_post(api: ApiServer, kube: KubeClient) -> None:
    store = api.store
    store.load(
        [o.pod(f"g{i}", "ns1", node=f"n{i}", labels={"app": "g"}, owner=_RS) for i in range(3)]
        + [o.pod("solo", "ns1", node="n0")]
    )
    store.create(
        store.resource("poddisruptionbudgets", "policy"),
        "ns1",
        o.pdb("g", "ns1", match_labels={"app": "g"}, max_unavailable=3),
    )
    posts_before = len(api.requests("POST"))
    ev = Evictor(kube, plan="dry", dry_run=True, limits=[Budget.per_run(4)], sleep=Sleeps())
    gang = [target(store, "ns1", f"g{i}", gang="g") for i in range(3)]
    results = await ev.evict_gang(gang, "test")
    results.append(await ev.evict(target(store, "ns1", "solo")))
    assert [r.outcome for r in results] == [Outcome.DRY_RUN] * 4
    assert all("dry run" in r.message for r in results)
    # Limits are counted as if it were real: a fifth pod would be skipped.
    more = await ev.evict(target(store, "ns1", "g0"))
    assert more.outcome is Outcome.SKIPPED_BY_LIMIT
    assert len(api.requests("POST")) == posts_before  # no eviction, no Event
    assert api.requests("GET", "/poddisruptionbudgets")  # the budgets were still checked
    assert all(exists(store, "ns1", n) for n in ("g0", "g1", "g2", "solo"))


async def test_each_evicted_pod_gets_an_event(
    api: ApiServer, kube: KubeClient, kubelet: Callable[[], int]
) -> None:
    store = api.store
    store.load([o.pod("a", "ns1", node="n1"), o.pod("b", "ns2", node="n1")])
    ta, tb = target(store, "ns1", "a"), target(store, "ns2", "b")
    ev = Evictor(kube, plan="defrag-0042", sleep=Sleeps())
    await ev.evict(ta, "makes room for gang ns9/train (8 GPUs)")
    events = list(store.items(store.resource("events"), "ns1"))
    assert len(events) == 1
    e = events[0]
    assert e["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "ns1",
        "name": "a",
        "uid": ta.uid,
    }
    assert e["reason"] == "Descheduled" and e["type"] == "Normal"
    assert "defrag-0042" in e["message"] and "makes room for gang ns9/train" in e["message"]
    assert e["source"]["component"] == "corral-descheduler"
    # An Event that cannot be written does not undo or fail the eviction.
    api.faults.fail(500, times=1, method="POST", path="/events$")
    r = await ev.evict(tb)
    assert r.outcome is Outcome.EVICTED and "500" in r.event_error
    kubelet()
    assert not exists(store, "ns2", "b")


async def test_gang_is_checked_against_budgets_first(api: ApiServer, kube: KubeClient) -> None:
    store = api.store
    store.load([o.pod(f"g{i}", "ns1", node="n1", labels={"app": "g"}, owner=_RS) for i in range(4)])
    store.create(
        store.resource("poddisruptionbudgets", "policy"),
        "ns1",
        o.pdb("g", "ns1", match_labels={"app": "g"}, max_unavailable=1),
    )
    ev = Evictor(kube, plan="p", sleep=Sleeps())
    gang = [target(store, "ns1", f"g{i}", gang="g") for i in range(2)]
    check = await ev.check_gang_pdbs(gang)
    assert not check.allowed and "allows 1 more disruption(s); the move needs 2" in check.reasons[0]
    results = await ev.evict_gang(gang)
    assert [r.outcome for r in results] == [Outcome.REFUSED_BY_PDB] * 2
    assert not real_evictions(api)
    assert (await ev.check_gang_pdbs(gang[:1])).allowed
    # Budgets that cannot be read stop the gang too, with a result per member.
    api.faults.fail(503, times=1, path="/poddisruptionbudgets$")
    results = await ev.evict_gang(gang[:1])
    assert results[0].outcome is Outcome.FAILED and "could not be read" in results[0].message
    assert not real_evictions(api)


async def test_gang_stops_when_its_first_member_is_refused(
    api: ApiServer, kube: KubeClient
) -> None:
    store = api.store
    store.load([o.pod(f"g{i}", "ns1", node="n1", labels={"app": "g"}) for i in range(3)])
    store.create(
        store.resource("poddisruptionbudgets", "policy"),
        "ns1",
        o.pdb("g", "ns1", match_labels={"app": "g"}, min_available=3),
    )
    ev = Evictor(kube, plan="p", max_attempts=1, limits=[Budget.per_run(3)], sleep=Sleeps())
    gang = [target(store, "ns1", f"g{i}") for i in range(3)]
    results = await ev.evict_gang(gang, check_pdbs=False, dry_run_first=False)
    assert [r.outcome for r in results] == [
        Outcome.REFUSED_BY_PDB,
        Outcome.ABORTED,
        Outcome.ABORTED,
    ]
    assert "refused-by-pdb" in results[1].message
    assert len(real_evictions(api)) == 1
    assert ev.limits.used.total() == 0


async def test_a_dry_run_of_every_member_comes_first(api: ApiServer, kube: KubeClient) -> None:
    """The budgets as the API server sees them at that moment: a member whose dry-run
    eviction is refused keeps the whole gang in place, with no real eviction sent."""
    store = api.store
    store.load([o.pod(f"g{i}", "ns1", node="n1", labels={"app": "g"}) for i in range(3)])
    store.load([o.pod("h0", "ns1", node="n1", labels={"app": "h"})])
    store.create(
        store.resource("poddisruptionbudgets", "policy"),
        "ns1",
        o.pdb("h", "ns1", match_labels={"app": "h"}, min_available=1),
    )
    ev = Evictor(kube, plan="p", max_attempts=1, limits=[Budget.per_run(4)], sleep=Sleeps())
    gang = [target(store, "ns1", n) for n in ("g0", "g1", "h0", "g2")]
    results = await ev.evict_gang(gang, check_pdbs=False)
    assert [r.outcome for r in results] == [
        Outcome.ABORTED,
        Outcome.ABORTED,
        Outcome.REFUSED_BY_PDB,
        Outcome.ABORTED,
    ]
    assert "dry-run eviction of ns1/h0" in results[2].message
    dry = [r for r in api.requests("POST", "/eviction") if r.query.get("dryRun") == "All"]
    assert [r.path.split("/pods/")[1] for r in dry] == ["g0/eviction", "g1/eviction", "h0/eviction"]
    assert not real_evictions(api)
    assert all(exists(store, "ns1", n) for n in ("g0", "g1", "g2", "h0"))
    assert ev.limits.used.total() == 0
    # Without the refusing member the gang goes whole, dry run first.
    results = await ev.evict_gang([gang[0], gang[1], gang[3]], check_pdbs=False)
    assert {r.outcome for r in results} == {Outcome.EVICTED}
    assert len(real_evictions(api)) == 3


async def test_gang_over_a_limit_is_skipped_whole(api: ApiServer, kube: KubeClient) -> None:
    store = api.store
    store.load([o.pod(f"g{i}", "ns1", node=f"n{i % 2}") for i in range(4)])
    ev = Evictor(kube, plan="p", limits=[Budget.per_node(1)], sleep=Sleeps())
    results = await ev.evict_gang([target(store, "ns1", f"g{i}") for i in range(4)])
    assert {r.outcome for r in results} == {Outcome.SKIPPED_BY_LIMIT}
    assert "gang of 4 skipped: per-node limit 1 for n0 would be exceeded" in results[0].message
    assert not api.requests("POST")


async def test_gang_follows_through_once_started(api: ApiServer, kube: KubeClient) -> None:
    store = api.store
    store.load([o.pod(f"g{i}", "ns1", node="n1") for i in range(3)])
    api.faults.fail(500, times=-1, method="POST", path="/pods/g1/eviction$")
    ev = Evictor(kube, plan="p", max_attempts=2, sleep=Sleeps())
    gang = [target(store, "ns1", f"g{i}") for i in range(3)]
    results = await ev.evict_gang(gang, dry_run_first=False)
    assert [r.outcome for r in results] == [Outcome.EVICTED, Outcome.FAILED, Outcome.EVICTED]


async def test_guard_stops_evictions_but_never_halfway_through_a_gang(
    api: ApiServer, kube: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Leadership lost once the first member is gone: the gang is finished (a gang half
    evicted is worse than a request sent by a leader a moment late), and nothing more
    is begun: neither a pod nor another gang."""
    store = api.store
    store.load([o.pod(f"g{i}", "ns1", node="n1") for i in range(3)])
    store.load([o.pod(f"h{i}", "ns1", node="n1") for i in range(2)])
    leading = [True]
    ev = Evictor(kube, plan="p", guard=lambda: leading[0], sleep=Sleeps())
    original = ev._evict_reserved

    async def lose_after_first(t: EvictionTarget, reason: str, **kw: Any):  # type: ignore[no-untyped-def]
        r = await original(t, reason, **kw)
        leading[0] = False
        return r

    ev._evict_reserved = lose_after_first  # type: ignore[method-assign]
    results = await ev.evict_gang(
        [target(store, "ns1", f"g{i}") for i in range(3)], check_pdbs=False
    )
    assert [r.outcome for r in results] == [Outcome.EVICTED] * 3
    assert "guard says stop, but the gang's eviction has begun" in caplog.text
    other = await ev.evict_gang([target(store, "ns1", f"h{i}") for i in range(2)])
    assert [r.outcome for r in other] == [Outcome.ABORTED] * 2
    assert (await ev.evict(target(store, "ns1", "h1"))).outcome is Outcome.ABORTED
    assert len(real_evictions(api)) == 3


def test_disruption_check_rules() -> None:
    pdbs = [
        pdb_from_json(
            {
                **o.pdb("a", "ns1", match_labels={"app": "a"}),
                "status": {"disruptionsAllowed": 2, "observedGeneration": 1},
                "metadata": {"name": "a", "namespace": "ns1", "generation": 1},
            }
        ),
        pdb_from_json(
            {
                **o.pdb("b", "ns1", match_labels={"tier": "x"}),
                "status": {"disruptionsAllowed": 5, "observedGeneration": 1},
                "metadata": {"name": "b", "namespace": "ns1", "generation": 2},
            }
        ),
        pdb_from_json(
            {**o.pdb("c", "ns2", match_labels={"app": "a"}), "status": {"disruptionsAllowed": 0}}
        ),
    ]

    def t(
        name: str, labels: dict[str, str], ns: str = "ns1", phase: str = "Running"
    ) -> EvictionTarget:
        return EvictionTarget(ns, name, labels=labels, phase=phase)

    assert check_disruption([t("1", {"app": "a"}), t("2", {"app": "a"})], pdbs).allowed
    three = check_disruption([t(str(i), {"app": "a"}) for i in range(3)], pdbs)
    assert not three.allowed and "ns1/a allows 2" in three.reasons[0]
    # Pending pods are evicted without consulting budgets.
    assert check_disruption(
        [t(str(i), {"app": "a"}, phase="Pending") for i in range(3)], pdbs
    ).allowed
    both = check_disruption([t("x", {"app": "a", "tier": "x"})], pdbs)
    assert not both.allowed and "covered by 2 disruption budgets (a, b)" in both.reasons[0]
    stale = check_disruption([t("y", {"tier": "x"})], pdbs)
    assert not stale.allowed and "has no current status" in stale.reasons[0]
    assert not check_disruption([t("z", {"app": "a"}, ns="ns2")], pdbs).allowed
    assert check_disruption([t("free", {"app": "none"})], pdbs).allowed


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="plan"):
        Evictor(None, plan="")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_attempts"):
        Evictor(None, plan="p", max_attempts=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit must be >= 0"):
        Budget.per_run(-1)
    with pytest.raises(ValueError, match="unique"):
        Limits([Budget.per_run(1), Budget.per_run(2)])
