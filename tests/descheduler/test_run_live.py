"""``corral-descheduler run`` against the in-memory API server over HTTP: a full run
evicts exactly what the plan says and leaves Events and cool-down marks; disruption
budgets skip a gang whole; a refusal mid-gang stops the run loudly; dry-run sends no
eviction; two replicas in a loop never act at once; a crash and a rerun never move a
gang twice, and together keep to one run's limits."""

from __future__ import annotations

import asyncio
import copy
import io
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from gangplace.engine.timeparse import format_time

from descheduler import DeschedulerConfig, Plan, parse_config, plan, state_from_list
from descheduler.planning.state import ANNOTATION_LAST_MOVED, ANNOTATION_ROOM_MADE, MOVE_LEDGER
from descheduler.running.process import RunOptions, run_descheduler
from tests.builders import objects as b
from tests.builders.descheduler_cluster import NOW, as_list, gang, gpu_node, pod, podgroup
from tests.kubeapi import ApiServer

# Whole runs of the descheduler over the in-memory API server.
pytestmark = pytest.mark.scenario

NS = "corral-system"
STAMP = format_time(NOW)


def real_evictions(api: ApiServer) -> list[Any]:
    """POSTed Evictions that were not dry runs (each gang is dry-run first)."""
    return [r for r in api.requests("POST", "/eviction") if "dryRun" not in r.query]


def two_gang_items() -> list[Any]:
    """Two waiting gangs, two groups of moves (as in test_runner): a 4-GPU job
    needs the gang "pair" moved off n5; a 2 x 8-GPU gang needs sweep-a and sweep-b moved
    off n0 and n1 into the 2-GPU holes of the other nodes."""
    holes = ["n2", "n3", "n7", "n8", "n9", "n10"]
    items: list[Any] = [gpu_node(f"n{i}") for i in range(11)]
    items += gang("sweep-a", ["n0"] * 3, 2, labels={"app": "sweep-a"})
    items += gang("sweep-b", ["n1"] * 3, 2, labels={"app": "sweep-b"})
    items += [pod(f"keep-{n}", n, 6, owner_kind="") for n in holes]
    items += [pod("big-4", "n4", 7, owner_kind=""), pod("big-5", "n5", 4, owner_kind="")]
    items += [pod("big-6", "n6", 7, owner_kind="")]
    items += gang("pair", ["n5", "n5"], 1, labels={"app": "pair"})
    items += gang("pretrain", [], 8, pending=2, phase="Inqueue")
    items += gang("llm", [], 4, pending=1, phase="Inqueue")
    return items


def issue_3948_items() -> list[Any]:
    """Volcano issue 3948: 1-GPU pods of their own (a Job each, no PodGroup) move."""
    items: list[Any] = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 4, owner_kind=""), pod("s0a", "n0", 1), pod("s0b", "n0", 1)]
    items += [pod("s0c", "n0", 1), pod("big-1", "n1", 4, owner_kind="")]
    items += [pod("s1a", "n1", 1), pod("s1b", "n1", 1), pod("big-2", "n2", 4, owner_kind="")]
    items += [pod("s2a", "n2", 1), pod("s2b", "n2", 1), pod("s2c", "n2", 1)]
    items += gang("llm", [], 4, pending=1, phase="Inqueue")
    return items


def expected_plan(items: list[Any], config: DeschedulerConfig | None = None) -> Plan:
    return plan(state_from_list(as_list(copy.deepcopy(items)), NOW), config)


def load(api: ApiServer, items: list[Any]) -> None:
    api.store.load([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    api.store.load(copy.deepcopy(items))


def evictions(api: ApiServer, token: str | None = None) -> list[str]:
    out = []
    for r in real_evictions(api):
        if token is None or r.authorization == f"Bearer {token}":
            out.append(r.path.split("/pods/")[1].removesuffix("/eviction"))
    return out


def get(api: ApiServer, plural: str, namespace: str, name: str, group: str = "") -> Any:
    return api.store.find(api.store.resource(plural, group), namespace, name)


def create(api: ApiServer, obj: dict[str, Any]) -> None:
    """Through the store's create, so that watches see it; a pod's status then through
    its status subresource, as its kubelet writes it (a create's status is dropped)."""
    group = obj["apiVersion"].rpartition("/")[0]
    plural = {"PodGroup": "podgroups"}.get(obj["kind"], obj["kind"].lower() + "s")
    ns = obj["metadata"].get("namespace", "")
    rt = api.store.resource(plural, group)
    created = api.store.create(rt, ns, copy.deepcopy(obj))
    if obj["kind"] == "Pod" and obj.get("status"):
        status = {**created, "status": {**created["status"], **copy.deepcopy(obj["status"])}}
        api.store.replace(rt, ns, obj["metadata"]["name"], status, subresource="status")


def events(api: ApiServer) -> list[dict[str, Any]]:
    return list(api.store.items(api.store.resource("events")))


async def run_once(
    api: ApiServer,
    config: DeschedulerConfig | None = None,
    *,
    clock: Callable[[], datetime] = lambda: NOW,
    **kw: Any,
) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    kw = {"sync_timeout": 5.0, **kw}
    opts = RunOptions(once=True, output="json", lease_namespace=NS, backoff_initial=0.01, **kw)
    code = await run_descheduler(
        opts,
        config or DeschedulerConfig(),
        client=api.client("once"),
        clock=clock,
        out=out,
        install_signals=False,
    )
    return code, json.loads(out.getvalue()) if out.getvalue() else {}


async def test_a_full_run_evicts_what_the_plan_says(
    api: ApiServer, kubelet: Callable[[], int]
) -> None:
    items = two_gang_items()
    want = expected_plan(items)
    assert {m.for_gang for m in want.moves} == {"default/llm", "default/pretrain"}
    load(api, items)
    code, doc = await run_once(api)
    assert code == 0
    planned = sorted(f"{e['namespace']}/{e['name']}" for e in want.evictions)  # type: ignore[misc]
    assert doc["evictions"] == want.evictions
    assert sorted(f"default/{p}" for p in evictions(api)) == planned
    kubelet()  # the evicted pods' kubelets end them
    for key in planned:  # gone from the cluster
        assert get(api, "pods", "default", key.split("/")[1]) is None
    statuses = {o["unit"]: o["status"] for o in doc["run"]["outcomes"]}
    assert set(statuses.values()) == {"evicted"}
    # the cool-down on every moved gang, room-made on every gang served
    for m in want.moves:
        pg = get(api, "podgroups", "default", m.gang or "", "scheduling.volcano.sh")
        assert pg["metadata"]["annotations"][ANNOTATION_LAST_MOVED] == STAMP
    for served in ("llm", "pretrain"):
        pg = get(api, "podgroups", "default", served, "scheduling.volcano.sh")
        assert pg["metadata"]["annotations"][ANNOTATION_ROOM_MADE] == STAMP
    # the mark goes on before the first eviction of its gang
    log = [(r.method, r.path) for r in api.log if r.method in ("PATCH", "POST")]
    first_patch = log.index(
        ("PATCH", "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/pair")
    )
    first_evict = log.index(("POST", "/api/v1/namespaces/default/pods/pair-0/eviction"))
    assert first_patch < first_evict
    # the run's record names every pod evicted, and is closed once the plan is through
    run = json.loads(get(api, "configmaps", NS, MOVE_LEDGER)["data"]["run"])
    assert run["plan"] == want.plan_id and run["finished"] is True
    assert sorted(f"default/{e['name']}" for e in run["evicted"]) == planned
    # an Event per gang, on its PodGroup, naming the plan and the gang it makes room for
    moved = [e for e in events(api) if e["reason"] == "GangMoved"]
    assert sorted(e["involvedObject"]["name"] for e in moved) == sorted(
        m.gang or "" for m in want.moves
    )
    for e in moved:
        assert e["involvedObject"]["kind"] == "PodGroup"
        assert want.plan_id in e["message"] and "make room for waiting gang" in e["message"]
    per_pod = [e for e in events(api) if e["reason"] == "Descheduled"]
    assert len(per_pod) == len(planned)


async def test_pods_without_a_podgroup_cool_down_in_the_move_ledger(api: ApiServer) -> None:
    items = issue_3948_items()
    load(api, items)
    code, doc = await run_once(api)
    assert code == 0
    assert sorted(evictions(api)) == ["s1a", "s1b"]
    cm = get(api, "configmaps", NS, MOVE_LEDGER)
    moved = json.loads(cm["data"]["last-moved"])
    assert moved == {"default/owner:ReplicaSet/s1a": STAMP, "default/owner:ReplicaSet/s1b": STAMP}
    assert json.loads(cm["data"]["room-made"]) == {}  # llm has a PodGroup: marked there
    # the Events go on the pods, which are gone but still named
    moved_events = [e for e in events(api) if e["reason"] == "GangMoved"]
    assert {e["involvedObject"]["name"] for e in moved_events} == {"s1a", "s1b"}
    # Their Jobs put the pods back (same owner, new names) where they were, and the
    # gang still waits: the ledger keeps them in place, and room was made for llm
    # already, so a rerun ten minutes later moves nothing.
    for name, node in (("s1a-x", "n1"), ("s1b-x", "n1")):
        p = pod(name, node, 1, owner=name[:3])
        api.store.create(api.store.resource("pods"), "default", p)
    later = NOW + timedelta(minutes=10)
    code, doc = await run_once(api, clock=lambda: later)
    assert code == 0 and doc["evictions"] == []
    assert len(evictions(api)) == 2
    reasons = {u["gang"]: u["reason"] for u in doc["unserved"]}
    assert reasons["default/llm"].startswith("room was made for it 10m")


async def test_budgets_that_changed_since_the_plan_skip_the_group_whole(
    api: ApiServer,
) -> None:
    items = two_gang_items()
    load(api, items)
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "sweep-b", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "sweep-b"}}, "minAvailable": 3},
    }

    def clock() -> datetime:
        # A budget appears after the informers listed (store.load sends no watch
        # event): the plan does not know it, the live check before evicting does.
        api.store.load([copy.deepcopy(budget)])
        return NOW

    code, doc = await run_once(api, clock=clock)
    assert code == 0
    statuses = {o["unit"]: o["status"] for o in doc["run"]["outcomes"]}
    assert statuses["default/sweep-a"] == statuses["default/sweep-b"] == "skipped"
    assert statuses["default/pair"] == "evicted"  # the other group goes on
    assert sorted(evictions(api)) == ["pair-0", "pair-1"]
    skipped = [e for e in events(api) if e["reason"] == "GangMoveSkipped"]
    assert {e["involvedObject"]["name"] for e in skipped} == {"sweep-a", "sweep-b"}
    assert all("disruption budget default/sweep-b" in e["message"] for e in skipped)
    # nothing of the skipped gangs was marked as moved
    pg = get(api, "podgroups", "default", "sweep-b", "scheduling.volcano.sh")
    assert ANNOTATION_LAST_MOVED not in pg["metadata"]["annotations"]


async def test_a_refusal_mid_gang_stops_the_run_loudly(
    api: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A budget that changes between the dry run and the real evictions (the dry run is
    taken out here, so that only the real evictions meet the refusal)."""
    items = two_gang_items()
    want = expected_plan(items)
    first = want.moves[0]
    assert first.unit == "default/pair"
    load(api, items)
    without_dry_runs(monkeypatch)
    api.faults.fail(
        429,
        times=-1,
        method="POST",
        path=r"/pods/pair-1/eviction$",
        message="Cannot evict pod as it would violate the pod's disruption budget.",
    )
    code, doc = await run_once(api, parse_config({"moves": {"retry_deadline": 0.3}}))
    assert code == 1
    outcomes = doc["run"]["outcomes"]
    assert outcomes[0]["unit"] == "default/pair"
    assert outcomes[0]["status"] == "partially-moved"
    assert {o["status"] for o in outcomes[1:]} == {"not-attempted"}
    assert "stops evicting" in doc["run"]["stopped"]
    sent = evictions(api)  # retried until the deadline, then given up
    assert sent[0] == "pair-0" and set(sent[1:]) == {"pair-1"} and len(sent) >= 5
    (warning,) = [e for e in events(api) if e["type"] == "Warning"]
    assert warning["reason"] == "GangEvictionIncomplete"
    assert warning["involvedObject"] == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "namespace": "default",
        "name": "pair",
        "uid": "uid-pg-default-pair",
    }
    assert "1 of 2" in warning["message"] and want.plan_id in warning["message"]


@pytest.mark.parametrize("how", ["flag", "config"])
async def test_dry_run_evicts_nothing(api: ApiServer, how: str) -> None:
    items = two_gang_items()
    load(api, items)
    if how == "flag":
        code, doc = await run_once(api, dry_run=True)
    else:
        code, doc = await run_once(api, parse_config({"runner": {"dry_run": True}}))
    assert code == 0 and doc["evictions"] == expected_plan(items).evictions
    assert {o["status"] for o in doc["run"]["outcomes"]} == {"dry-run"}
    assert not [r for r in api.log if r.method in ("POST", "PATCH", "PUT", "DELETE")]


async def test_room_only_for_gangs_the_scheduler_can_place_now(api: ApiServer) -> None:
    items: list[Any] = [gpu_node("n0"), gpu_node("n1")]
    items += [pod("s0", "n0", 1), pod("s1", "n0", 1), pod("fill", "n0", 4, owner_kind="")]
    items += [pod("fill1", "n1", 6, owner_kind="")]
    items.append(
        podgroup("est", 1, phase="Inqueue", min_resources={"cpu": "4", "nvidia.com/gpu": "4"})
    )
    items += gang("queued", [], 4, pending=1, namespace="other", phase="Pending")
    load(api, items)
    code, doc = await run_once(api)
    assert code == 0 and len(doc["evictions"]) == 2  # planned, for one of them
    assert evictions(api) == []  # but not done: nobody could take the room yet
    (skip,) = {o["message"] for o in doc["run"]["outcomes"]}
    if doc["moves"][0]["for_gang"] == "default/est":
        assert "no pending pod yet" in skip
    else:
        assert "not enqueued by Volcano yet (PodGroup phase Pending)" in skip
    config = parse_config({"runner": {"only_schedulable_gangs": False}})
    code, doc = await run_once(api, config)
    assert code == 0 and sorted(evictions(api)) == ["s0", "s1"]


def without_dry_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Evictor's dry run of every member passes at once: a fault then meets only
    the real evictions (a request fault cannot tell the two apart)."""

    async def passes(self: Any, members: Any) -> list[Any]:
        return []

    monkeypatch.setattr("gangplace.kube.evictor.Evictor._dry_run_all", passes)


async def test_a_crash_mid_run_and_a_rerun_never_move_a_gang_twice(
    api: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = two_gang_items()
    want = expected_plan(items)
    load(api, items)
    without_dry_runs(monkeypatch)
    # The evictions of sweep-a's second pod hang; the run is killed while waiting.
    api.faults.delay(30, method="POST", path=r"/pods/sweep-a-1/eviction$")
    task = asyncio.create_task(run_once(api))
    for _ in range(500):
        if "sweep-a-1" in evictions(api):
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    api.faults.clear()
    first = evictions(api)
    assert "sweep-a-0" in first and "sweep-a-2" not in first
    # The rerun, a minute later: every gang touched before the crash is cooling down.
    code, doc = await run_once(api, clock=lambda: NOW + timedelta(minutes=1))
    assert code == 0
    again = {e["name"] for e in doc["evictions"]}
    assert not again & {"sweep-a-0", "sweep-a-1", "sweep-a-2", "pair-0", "pair-1"}
    every = evictions(api)
    sent = [p for p in every if p != "sweep-a-1"]
    assert len(sent) == len(set(sent))  # no pod evicted twice
    planned = {e["name"] for e in want.evictions}  # type: ignore[misc]
    limit = DeschedulerConfig().limits.max_evictions_per_run
    assert set(every) <= planned and limit is not None and len(set(every)) <= limit


async def interval_runner(
    api: ApiServer, token: str, stop: asyncio.Event, **kw: Any
) -> asyncio.Task[int]:
    opts = RunOptions(
        once=False,
        interval=0.2,
        lease_name="corral-descheduler",
        lease_namespace=NS,
        # Generous: a loaded machine must not make the leader lose the Lease by itself
        # (leader a, then b, would look like two replicas acting).
        lease_duration=4.0,
        renew_deadline=3.0,
        retry_period=0.1,
        metrics_host="127.0.0.1",
        metrics_port=0,
        backoff_initial=0.01,
        identity=token,
        **kw,
    )
    return asyncio.create_task(
        run_descheduler(
            opts,
            DeschedulerConfig(),
            client=api.accept(token).client(token, token=token),
            clock=lambda: NOW,
            stop=stop,
            install_signals=False,
        )
    )


async def until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


def ledger_reads(api: ApiServer, token: str) -> int:
    return sum(
        1
        for r in api.requests("GET", f"/configmaps/{MOVE_LEDGER}")
        if r.authorization == f"Bearer {token}"
    )


def holder(api: ApiServer) -> str:
    lease = get(api, "leases", NS, "corral-descheduler", "coordination.k8s.io")
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


async def test_two_replicas_never_act_at_once(api: ApiServer) -> None:
    items = two_gang_items()
    want = expected_plan(items)
    planned = sorted(e["name"] for e in want.evictions)  # type: ignore[misc]
    load(api, items)
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    a = await interval_runner(api, "a", stop_a)
    b = await interval_runner(api, "b", stop_b)
    await until(lambda: sorted(evictions(api)) == planned, 60)
    leader = holder(api)
    assert leader in ("a", "b")
    other = "b" if leader == "a" else "a"
    runs = ledger_reads(api, leader)  # each run reads the move ledger first
    await until(lambda: ledger_reads(api, leader) >= runs + 3, 60)  # nothing more to do
    assert sorted(evictions(api, leader)) == planned and evictions(api, other) == []
    # The leader is cut off from the API server: the other takes over and serves a new
    # waiting gang; the old leader sends nothing once its Lease is past renewal.
    api.faults.fail(503, times=-1, header=("Authorization", f"Bearer {leader}"))
    cut = len(api.log)
    await until(lambda: holder(api) == other, 60)
    # The scheduler starts the gangs room was made for; then a new node whose two 1-GPU
    # pods must move (to the 2-GPU holes) for a new gang.
    for name, node in (("pretrain-0", "n0"), ("pretrain-1", "n1"), ("llm-0", "n5")):
        bind = {"spec": {"nodeName": node}, "status": {"phase": "Running"}}
        pods = api.store.resource("pods")
        api.store.patch(pods, "default", name, "application/merge-patch+json", bind)
    late: list[Any] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "late"}},
        gpu_node("m0"),
        pod("m-big", "m0", 4, owner_kind="", namespace="late"),
        pod("m-s1", "m0", 1, namespace="late"),
        pod("m-s2", "m0", 1, namespace="late"),
        *gang("late", [], 4, pending=1, namespace="late", phase="Inqueue"),
    ]
    for obj in late:
        create(api, obj)
    await until(lambda: sorted(evictions(api, other)) == ["m-s1", "m-s2"], 60)
    after_cut = [
        r for r in api.log[cut:] if r.authorization == f"Bearer {leader}" and r.method != "GET"
    ]
    assert all(r.path.endswith("/leases/corral-descheduler") for r in after_cut), after_cut
    stop_a.set()
    stop_b.set()
    api.faults.clear()
    assert await asyncio.wait_for(a, 60) == 0 and await asyncio.wait_for(b, 60) == 0
    assert len(evictions(api)) == len(set(evictions(api)))


async def test_once_under_a_lease(api: ApiServer) -> None:
    items = issue_3948_items()
    load(api, items)
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "corral-descheduler", "namespace": NS},
        "spec": {"holderIdentity": "the-loop", "leaseDurationSeconds": 60},
    }
    create(api, lease)
    kw: dict[str, Any] = {**ONCE_LEASE, "sync_timeout": 30.0}
    code, doc = await run_once(api, **kw)  # the loop holds the Lease: nothing done
    assert code == 0 and doc == {} and evictions(api) == []
    released = {"spec": {"holderIdentity": "", "leaseDurationSeconds": 1}}
    leases = api.store.resource("leases", "coordination.k8s.io")
    merge = "application/merge-patch+json"
    api.store.patch(leases, NS, "corral-descheduler", merge, released)
    code, doc = await run_once(api, identity="cron", **kw)
    assert code == 0 and sorted(evictions(api)) == ["s1a", "s1b"]
    assert holder(api) == ""  # handed back after the run


async def test_the_cluster_cannot_be_read(api: ApiServer) -> None:
    load(api, issue_3948_items())
    api.faults.fail(503, times=-1)
    code, doc = await run_once(api, sync_timeout=0.5)
    assert code == 1 and doc == {}


def three_3948_items() -> list[Any]:
    """Volcano issue 3948's cluster three times over: three waiting 4-GPU gangs, each
    started by moving two 1-GPU pods of its own three nodes."""
    items: list[Any] = []
    for c in "abc":
        items += [gpu_node(f"{c}{i}") for i in range(3)]
        items += [pod(f"{c}-big-{i}", f"{c}{i}", 4, owner_kind="") for i in range(3)]
        for i, n in ((0, 3), (1, 2), (2, 3)):
            items += [pod(f"{c}-s{i}{k}", f"{c}{i}", 1) for k in "xyz"[:n]]
        items += gang(f"llm-{c}", [], 4, pending=1, phase="Inqueue")
    return items


async def test_a_crash_and_a_rerun_together_keep_to_the_limits(
    api: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_dry_runs(monkeypatch)
    items = three_3948_items()
    config = parse_config({"limits": {"max_evictions_per_run": 4}})
    want = expected_plan(items, config)
    names = [e["name"] for e in want.evictions]  # type: ignore[index]
    assert len(names) == 4 and len({m.for_gang for m in want.moves}) == 2
    assert len(expected_plan(items).evictions) == 6  # without the limit: all three gangs
    load(api, items)
    # The first eviction for the second gang hangs; the run is killed while waiting.
    api.faults.delay(30, method="POST", path=rf"/pods/{names[2]}/eviction$")
    task = asyncio.create_task(run_once(api, config))
    for _ in range(500):
        if names[2] in evictions(api):
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    api.faults.clear()
    assert set(evictions(api)) == set(names[:3])
    run = json.loads(get(api, "configmaps", NS, MOVE_LEDGER)["data"]["run"])
    assert run["finished"] is False and {e["name"] for e in run["evicted"]} == set(names[:3])
    # The rerun a minute later would move two pods for llm-c (a fifth and sixth
    # eviction); the 3 recorded by the run cut short leave it room for one, so none.
    code, doc = await run_once(api, config, clock=lambda: NOW + timedelta(minutes=1))
    assert code == 0 and doc["evictions"] == []
    assert any("3 pod(s) evicted by run" in n for n in doc["notes"])
    assert len(set(evictions(api))) <= 4
    # the rerun ended on its own: it took the open record over and closed it
    run = json.loads(get(api, "configmaps", NS, MOVE_LEDGER)["data"]["run"])
    assert run["finished"] is True and len(run["evicted"]) == 3
    # A run an interval later has its limit whole again.
    later = NOW + timedelta(seconds=config.runner.interval + 60)
    code, doc = await run_once(api, config, clock=lambda: later)
    assert code == 0 and not any("evicted by run" in n for n in doc["notes"])


async def test_a_move_the_ledger_cannot_record_is_skipped_and_leaves_no_mark(
    api: ApiServer,
) -> None:
    items = two_gang_items()
    load(api, items)
    # The run's record is created (POST); every later write of it (PUT) fails.
    api.faults.fail(500, times=-1, method="PUT", path=rf"/configmaps/{MOVE_LEDGER}$")
    code, doc = await run_once(api)
    assert code == 1 and evictions(api) == []  # nothing went, but a write was refused
    assert {o["status"] for o in doc["run"]["outcomes"]} <= {"skipped", "not-attempted"}
    for m in expected_plan(items).moves:
        pg = get(api, "podgroups", "default", m.gang or "", "scheduling.volcano.sh")
        assert ANNOTATION_LAST_MOVED not in (pg["metadata"].get("annotations") or {})


# --- suspend and resume -------------------------------------------------------------------


def job_gang(name: str, node: str, gpus: int, **job_kw: Any) -> list[Any]:
    """A Job of one pod, with its PodGroup owned by the Job (as the webhook makes it)."""
    pg = podgroup(name, 1)
    pg["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": name,
            "uid": f"uid-owner-{name}",
            "controller": True,
        }
    ]
    return [
        b.job(name, backoff_limit=0, uid=f"uid-owner-{name}", **job_kw),
        pg,
        pod(f"{name}-0", node, gpus, gang=name, owner_kind="Job", owner=name),
    ]


def suspend_items() -> list[Any]:
    """7/6/7: the two 1-GPU Jobs on n1 (backoffLimit 0) make room for a 4-GPU gang of
    priority 1000; a Job a person suspended has its (pod-less) PodGroup."""
    items: list[Any] = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 7, owner_kind=""), pod("big-2", "n2", 7, owner_kind="")]
    items += [pod("big-1", "n1", 4, owner_kind="")]
    items += job_gang("s1", "n1", 1) + job_gang("s2", "n1", 1)
    held = job_gang("held", "", 1, suspend=True)
    items += held[:2]  # its pod does not exist: the Job is suspended
    items += gang("llm", [], 4, pending=1, phase="Inqueue")
    return items


def job_of(api: ApiServer, name: str) -> Any:
    return get(api, "jobs", "default", name, "batch")


async def test_a_suspend_a_crash_and_the_resume(api: ApiServer) -> None:
    """Run 1 suspends both Jobs (never evicts them), but cannot remove one PodGroup;
    run 2 heals that and leaves the Jobs suspended while the gang waits; once the gang
    is bound, run 3 makes the PodGroups again and resumes the Jobs. The Job a person
    suspended is never touched."""
    load(api, suspend_items())
    api.faults.fail(500, times=-1, method="DELETE", path=r"/podgroups/s2$")
    # No Job controller runs here: the pods go by hand, so the check is off (see
    # tests/scenarios/test_suspend_takes_effect.py for it).
    config = parse_config({"moves": {"resume_wait": 0, "suspend_grace": 0}})
    code, doc = await run_once(api, config)
    assert code == 0, doc
    assert [(m["unit"], m["method"]) for m in doc["moves"]] == [
        ("default/s1", "suspend"),
        ("default/s2", "suspend"),
    ]
    assert {o["status"] for o in doc["run"]["outcomes"]} == {"suspended"}
    assert evictions(api) == [] and not api.requests("POST", "/eviction")
    for name in ("s1", "s2"):
        j = job_of(api, name)
        assert j["spec"]["suspend"] is True
        mark = json.loads(j["metadata"]["annotations"]["corral.dev/suspended-by"])
        assert mark["for"] == "default/llm" and mark["plan"] == doc["plan"]
    assert (
        json.loads(job_of(api, "s1")["metadata"]["annotations"]["corral.dev/suspended-by"])[
            "podGroup"
        ]["metadata"]["name"]
        == "s1"
    )
    assert get(api, "podgroups", "default", "s1", "scheduling.volcano.sh") is None
    assert get(api, "podgroups", "default", "s2", "scheduling.volcano.sh") is not None  # crash
    reasons = {(e["involvedObject"]["kind"], e["reason"]) for e in events(api)}
    assert ("Job", "Suspended") in reasons and ("Job", "GangSuspended") in reasons
    api.faults.clear()

    # The Job controller would delete the pods; here they go by hand.
    pods = api.store.resource("pods")
    for name in ("s1-0", "s2-0"):
        api.store.delete(pods, "default", name, grace_period_seconds=0)
    code, doc = await run_once(api, config, clock=lambda: NOW + timedelta(minutes=1))
    assert code == 0 and doc["moves"] == []
    assert [(r["workload"], r["action"]) for r in doc["run"]["resumed"]] == [
        ("Job default/s2", "heal")
    ]
    assert get(api, "podgroups", "default", "s2", "scheduling.volcano.sh") is None
    assert job_of(api, "s1")["spec"]["suspend"] is True  # the gang still waits
    suspended = {x["unit"]: x["reason"] for x in doc["suspended_gangs"]}
    assert suspended["default/held"].endswith("is suspended (not by corral): it is not waiting")
    assert "default/s1" not in suspended  # nothing of it remains: no pod, no PodGroup

    # The gang is bound (the scheduler's doing): the next run resumes what it suspended.
    llm = get(api, "pods", "default", "llm-0")
    api.store.replace(pods, "default", "llm-0", {**llm, "spec": {**llm["spec"], "nodeName": "n1"}})
    code, doc = await run_once(api, config, clock=lambda: NOW + timedelta(minutes=2))
    assert code == 0
    assert sorted((r["workload"], r["action"]) for r in doc["run"]["resumed"]) == [
        ("Job default/s1", "resume"),
        ("Job default/s2", "resume"),
    ]
    for name in ("s1", "s2"):
        j = job_of(api, name)
        assert j["spec"]["suspend"] is False
        assert "corral.dev/suspended-by" not in (j["metadata"].get("annotations") or {})
        pg = get(api, "podgroups", "default", name, "scheduling.volcano.sh")
        assert pg["metadata"]["ownerReferences"][0]["name"] == name
        # made again with the time of the move: the cool-down holds after the resume
        assert pg["metadata"]["annotations"][ANNOTATION_LAST_MOVED] == STAMP
    assert ("Job", "Resumed") in {(e["involvedObject"]["kind"], e["reason"]) for e in events(api)}
    held = job_of(api, "held")
    assert held["spec"]["suspend"] is True
    assert not [r for r in api.log if r.method == "PATCH" and r.path.endswith("/jobs/held")]


async def test_a_workload_changed_since_the_plan_is_not_suspended(api: ApiServer) -> None:
    """The suspend is conditional on the version the plan read: a Job changed in between
    (here: the patch answers 409) is left alone, and nothing else of its group moves."""
    load(api, suspend_items())
    api.faults.fail(409, times=-1, method="PATCH", path=r"/jobs/s1$")
    code, doc = await run_once(api, parse_config({"moves": {"resume_wait": 0, "suspend_grace": 0}}))
    statuses = [(o["unit"], o["status"]) for o in doc["run"]["outcomes"]]
    assert statuses == [("default/s1", "skipped"), ("default/s2", "not-attempted")]
    assert code == 0
    assert job_of(api, "s1")["spec"]["suspend"] is False
    assert job_of(api, "s2")["spec"]["suspend"] is False


async def test_pods_that_cannot_be_read_after_a_suspend_undo_it_without_blame(
    api: ApiServer,
) -> None:
    """After the suspend, the gang's pods cannot be read within moves.suspend_grace:
    whether they went is unknown, so the suspend is undone, but the workload is not
    marked as one whose controller ignores the switch; the rest of the group waits."""
    load(api, suspend_items())
    api.faults.fail(500, times=-1, method="GET", path=r"/pods/s1-0$")
    config = parse_config({"moves": {"resume_wait": 0, "suspend_grace": 0.3}})
    code, doc = await run_once(api, config)
    statuses = [(o["unit"], o["status"]) for o in doc["run"]["outcomes"]]
    assert statuses == [("default/s1", "rolled-back"), ("default/s2", "not-attempted")]
    assert "pod default/s1-0 could not be read" in doc["run"]["outcomes"][0]["message"]
    assert code == 0
    s1 = job_of(api, "s1")
    assert s1["spec"]["suspend"] is False
    ann = s1["metadata"].get("annotations") or {}
    assert "corral.dev/suspended-by" not in ann and "corral.dev/suspend-ignored" not in ann
    assert get(api, "podgroups", "default", "s1", "scheduling.volcano.sh") is not None
    assert job_of(api, "s2")["spec"]["suspend"] is False


async def test_a_gang_whose_second_workload_cannot_be_suspended_is_not_left_half_moved(
    api: ApiServer,
) -> None:
    """One gang of two Jobs: the first is suspended, the second's patch fails. The first
    is resumed at once (its mark gone), the PodGroup never removed, and the run says so
    and exits 1."""
    items: list[Any] = [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 7, owner_kind=""), pod("big-2", "n2", 7, owner_kind="")]
    items += [pod("big-1", "n1", 4, owner_kind=""), podgroup("pair", 2)]
    for name in ("j1", "j2"):
        items.append(b.job(name, backoff_limit=0, uid=f"uid-owner-{name}"))
        items.append(pod(f"{name}-0", "n1", 1, gang="pair", owner_kind="Job", owner=name))
    items += gang("llm", [], 4, pending=1, phase="Inqueue")
    load(api, items)
    api.faults.fail(500, times=-1, method="PATCH", path=r"/jobs/j2$")
    code, doc = await run_once(api, parse_config({"moves": {"resume_wait": 0}}))
    assert [(m["unit"], m["method"], m["workloads"]) for m in doc["moves"]] == [
        ("default/pair", "suspend", ["Job default/j1", "Job default/j2"])
    ]
    (out,) = doc["run"]["outcomes"]
    assert out["status"] == "failed" and code == 1
    assert "the workloads suspended before it were resumed" in out["message"]
    j1 = job_of(api, "j1")
    assert len(api.requests("PATCH", "/jobs/j1")) == 2  # suspended, then resumed
    assert j1["spec"]["suspend"] is False
    assert "corral.dev/suspended-by" not in (j1["metadata"].get("annotations") or {})
    assert job_of(api, "j2")["spec"]["suspend"] is False
    assert get(api, "podgroups", "default", "pair", "scheduling.volcano.sh") is not None
    assert not api.requests("DELETE", "/podgroups/")


# --- run --once losing its Lease mid-run ------------------------------------------------


class Gate:
    """Holds the descheduler's requests that ``hold`` picks until ``open`` is called."""

    def __init__(self, kube: Any, method: str, hold: Callable[..., bool]) -> None:
        self.opened = asyncio.Event()
        self.held = asyncio.Event()
        original = getattr(kube, method)

        async def gated(*args: Any, **kw: Any) -> Any:
            if hold(*args, **kw) and not self.opened.is_set():
                self.held.set()
                await self.opened.wait()
            return await original(*args, **kw)

        setattr(kube, method, gated)

    def open(self) -> None:
        self.opened.set()


def take_the_lease(api: ApiServer, holder: str) -> None:
    """Another replica writes the Lease as its own (fresh, for a minute)."""
    leases = api.store.resource("leases", "coordination.k8s.io")
    spec = {"holderIdentity": holder, "leaseDurationSeconds": 60, "renewTime": STAMP}
    api.store.patch(
        leases, NS, "corral-descheduler", "application/merge-patch+json", {"spec": spec}
    )


def lease_lost(caplog: pytest.LogCaptureFixture) -> bool:
    """The elector of the run said it no longer leads (its work is being cancelled)."""
    return any(
        r.name == "gangplace.kube.leader"
        and ("lost the lease" in r.getMessage() or "lease not renewed" in r.getMessage())
        for r in caplog.records
    )


# Generous: a renewal must fail for 2 s on end before leadership is lost by itself.
ONCE_LEASE: dict[str, Any] = {
    "lease_name": "corral-descheduler",
    "lease_duration": 3.0,
    "renew_deadline": 2.0,
    "retry_period": 0.1,
}


async def once_with_gate(
    api: ApiServer, method: str, hold: Callable[..., bool]
) -> tuple[asyncio.Task[int], Gate, io.StringIO]:
    kube = api.client("once")
    gate = Gate(kube, method, hold)
    out = io.StringIO()
    opts = RunOptions(
        once=True,
        output="json",
        lease_namespace=NS,
        backoff_initial=0.01,
        sync_timeout=30.0,
        identity="cron",
        **ONCE_LEASE,
    )
    run = run_descheduler(
        opts, DeschedulerConfig(), client=kube, clock=lambda: NOW, out=out, install_signals=False
    )
    return asyncio.create_task(run), gate, out


async def test_once_losing_the_lease_mid_gang_finishes_the_gang_and_says_so(
    api: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The Lease is taken by another replica while the first gang's second pod is being
    evicted: that gang is finished (never left half evicted), no other is begun, the
    run reports what it did and exits 3, with a log line that says the Lease was lost."""
    items = two_gang_items()
    want = expected_plan(items)
    assert want.moves[0].unit == "default/pair" and len(want.moves) > 1
    load(api, items)
    task, gate, out = await once_with_gate(
        api, "evict", lambda ns, name, **kw: name == "pair-1" and not kw.get("dry_run")
    )
    try:
        await until(lambda: gate.held.is_set() or task.done(), 30)
        assert evictions(api) == ["pair-0"]
        take_the_lease(api, "the-loop")
        await until(lambda: lease_lost(caplog) or task.done(), 30)
        assert not task.done()
    finally:
        gate.open()
    code = await asyncio.wait_for(task, 30)
    assert code == 3
    assert evictions(api) == ["pair-0", "pair-1"]  # the gang whole, and nothing else
    doc = json.loads(out.getvalue())
    outcomes = [(o["unit"], o["status"]) for o in doc["run"]["outcomes"]]
    assert outcomes[0] == ("default/pair", "evicted")
    assert {s for _, s in outcomes[1:]} == {"not-attempted"}
    assert len(outcomes) == len(want.moves)
    assert doc["run"]["stopped"].startswith("leadership lost")
    assert doc["run"]["exit_code"] == 3 and doc["run"]["pods_evicted"] == 2
    assert "lost the Lease mid-run: the run stopped part way" in caplog.text
    assert "AssertionError" not in caplog.text
    assert holder(api) == "the-loop"  # not handed back: it was not ours any more


async def test_once_losing_the_lease_before_any_eviction_does_nothing(
    api: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The Lease is lost while the first gang's cool-down mark is being written: no
    pod is evicted, and the run exits 0 with no report, as when another replica holds
    the Lease from the start."""
    load(api, two_gang_items())
    task, gate, out = await once_with_gate(
        api, "patch", lambda resource, name, *a, **kw: name == "pair"
    )
    try:
        await until(lambda: gate.held.is_set() or task.done(), 30)
        take_the_lease(api, "the-loop")
        await until(lambda: lease_lost(caplog) or task.done(), 30)
        assert not task.done()
    finally:
        gate.open()
    assert await asyncio.wait_for(task, 30) == 0
    assert evictions(api) == [] and out.getvalue() == ""
    assert "lost the Lease before the run did anything; nothing done" in caplog.text
