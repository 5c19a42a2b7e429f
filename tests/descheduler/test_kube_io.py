"""The runner's port on a cluster (KubeIO) against the in-memory API server, one call
at a time: it reads the cluster into a state, records the run and each move, checks
the live disruption budgets before a group, evicts a gang through the Eviction API,
and closes the run's record at the end."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from gangplace.engine.timeparse import format_time
from gangplace.kube import KubeClient

from descheduler import DeschedulerConfig, plan
from descheduler.planning.state import ANNOTATION_LAST_MOVED, MOVE_LEDGER
from descheduler.running.cluster_view import ClusterView
from descheduler.running.kube_io import KubeIO
from descheduler.running.runner_port import MoveOutcome, RunnerPort
from tests.builders import objects as b
from tests.builders.descheduler_cluster import NOW, gang, gpu_node, pod
from tests.kubeapi import ApiServer

NS = "corral-system"


def cluster() -> list[Any]:
    """Three 8-GPU nodes at 7/6/7 GPUs used; the 2-pod gang "pair" on n1 makes room
    for a waiting 4-GPU gang."""
    items: list[Any] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}]
    items += [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 4, owner_kind=""), pod("s0", "n0", 3, owner_kind="")]
    items += [pod("big-1", "n1", 4, owner_kind="")]
    items += gang("pair", ["n1", "n1"], 1, labels={"app": "pair"})
    items += [pod("big-2", "n2", 4, owner_kind=""), pod("s2", "n2", 3, owner_kind="")]
    items += gang("llm", [], 4, pending=1, phase="Inqueue")
    return items


@pytest.fixture
async def kio(api: ApiServer, kube: KubeClient) -> AsyncIterator[KubeIO]:
    api.store.load(copy.deepcopy(cluster()))
    config = DeschedulerConfig()
    view = ClusterView(kube, config, ledger_namespace=NS)
    await view.start()
    try:
        await view.wait_synced(5.0)
        yield KubeIO(
            kube, view, config, clock=lambda: NOW, ledger_namespace=NS, backoff_initial=0.01
        )
    finally:
        await view.stop()


def ledger(api: ApiServer) -> dict[str, Any]:
    cm = api.store.find(api.store.resource("configmaps"), NS, MOVE_LEDGER)
    return dict((cm or {}).get("data") or {})


async def test_a_gang_moved_through_the_port(api: ApiServer, kio: KubeIO) -> None:
    port: RunnerPort = kio  # the runner's port, nothing more
    state = await port.fetch_state()
    p = plan(state)
    (move,) = p.moves
    assert move.unit == "default/pair" and move.for_gang == "default/llm"
    await port.begin(p)
    run = json.loads(ledger(api)["run"])
    assert run["plan"] == p.plan_id and run["finished"] is False and run["evicted"] == []
    assert await port.precheck([move]) is None
    await port.mark_moved(move, NOW)
    pg = api.store.find(api.store.resource("podgroups", "scheduling.volcano.sh"), "default", "pair")
    assert pg is not None
    assert pg["metadata"]["annotations"][ANNOTATION_LAST_MOVED] == format_time(NOW)
    run = json.loads(ledger(api)["run"])  # the pods are on the record before they go
    assert [e["name"] for e in run["evicted"]] == ["pair-0", "pair-1"]
    assert run["finished"] is False
    results = await port.evict_gang(move, "corral test: room for llm")
    assert [(r.name, r.outcome) for r in results] == [
        ("pair-0", MoveOutcome.EVICTED),
        ("pair-1", MoveOutcome.EVICTED),
    ]
    sent = [r.path for r in api.requests("POST", "/eviction") if "dryRun" not in r.query]
    assert [s.split("/pods/")[1] for s in sent] == ["pair-0/eviction", "pair-1/eviction"]
    await port.finish(p)
    assert json.loads(ledger(api)["run"])["finished"] is True


async def test_the_live_disruption_budgets_are_checked_before_a_group(
    api: ApiServer, kio: KubeIO
) -> None:
    state = await kio.fetch_state()
    p = plan(state)
    await kio.begin(p)
    # a budget made after the plan: the live check sees it, and nothing is evicted
    api.store.create(
        api.store.resource("poddisruptionbudgets", "policy"),
        "default",
        b.pdb("pair", "default", match_labels={"app": "pair"}, max_unavailable=0),
    )
    why = await kio.precheck(p.moves)
    assert why is not None and why.startswith("the disruption budgets do not allow it now: ")
    assert "disruption budget default/pair allows 0 more disruption(s); the move needs 2" in why
    assert not api.requests("POST", "/eviction")


async def test_evicting_before_begin_is_refused(kio: KubeIO) -> None:
    p = plan(await kio.fetch_state())
    with pytest.raises(RuntimeError, match=r"begin\(plan\) comes before any eviction"):
        await kio.evict_gang(p.moves[0], "too early")
