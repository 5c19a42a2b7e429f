"""The suspender against the in-memory API server: a suspend move's Job is suspended
with corral's mark and its PodGroup removed; when the pods do not go within
``moves.suspend_grace`` (no controller acts on the switch) the suspend is undone and
the Job marked never to be suspended again."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from gangplace.kube import KubeClient

from descheduler import DeschedulerConfig, parse_config, plan
from descheduler.planning.resume import due_resumptions
from descheduler.running.cluster_view import ClusterView
from descheduler.running.kube_io import KubeIO
from descheduler.running.runner_port import MoveOutcome
from tests.builders import objects as b
from tests.builders.descheduler_cluster import NOW, gang, gpu_node, pod, podgroup
from tests.kubeapi import ApiServer

NS = "corral-system"


def job_gang(name: str, node: str) -> list[Any]:
    """A Job of one 1-GPU pod (backoffLimit 0: it moves by suspend), with its PodGroup."""
    pg = podgroup(name, 1)
    pg["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": f"uid-owner-{name}"}
    ]
    return [
        b.job(name, backoff_limit=0, uid=f"uid-owner-{name}"),
        pg,
        pod(f"{name}-0", node, 1, gang=name, owner_kind="Job", owner=name),
    ]


def cluster() -> list[Any]:
    """7/6/7: the 1-GPU Jobs on n1 make room for a waiting 4-GPU gang."""
    items: list[Any] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}]
    items += [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 7, owner_kind=""), pod("big-2", "n2", 7, owner_kind="")]
    items += [pod("big-1", "n1", 4, owner_kind=""), *job_gang("s1", "n1"), *job_gang("s2", "n1")]
    items += gang("llm", [], 4, pending=1, phase="Inqueue")
    return items


async def port(api: ApiServer, kube: KubeClient, config: DeschedulerConfig) -> KubeIO:
    view = ClusterView(kube, config, ledger_namespace=NS)
    await view.start()
    await view.wait_synced(5.0)
    return KubeIO(kube, view, config, clock=lambda: NOW, ledger_namespace=NS, settle_poll=0.02)


@pytest.fixture
async def loaded(api: ApiServer) -> AsyncIterator[list[KubeIO]]:
    api.store.load(copy.deepcopy(cluster()))
    ports: list[KubeIO] = []
    try:
        yield ports
    finally:
        for p in ports:
            await p.view.stop()


def job(api: ApiServer, name: str) -> Any:
    return api.store.find(api.store.resource("jobs", "batch"), "default", name)


def podgroup_of(api: ApiServer, name: str) -> Any:
    return api.store.find(api.store.resource("podgroups", "scheduling.volcano.sh"), "default", name)


async def suspend_first(
    api: ApiServer, kube: KubeClient, ports: list[KubeIO], config: DeschedulerConfig
) -> tuple[str, list[Any]]:
    kio = await port(api, kube, config)
    ports.append(kio)
    p = plan(await kio.fetch_state(), config)
    move = p.moves[0]
    assert move.method == "suspend" and move.unit in ("default/s1", "default/s2")
    await kio.begin(p)
    name = move.pods[0].name.removesuffix("-0")
    return name, list(await kio.suspend_gang(move, f"corral {p.plan_id}: {move.reason}"))


async def test_a_suspend_sets_the_switch_with_corrals_mark_and_removes_the_podgroup(
    api: ApiServer, kube: KubeClient, loaded: list[KubeIO]
) -> None:
    config = parse_config({"moves": {"suspend_grace": 0}})
    name, results = await suspend_first(api, kube, loaded, config)
    assert [r.outcome for r in results] == [MoveOutcome.SUSPENDED]
    j = job(api, name)
    assert j["spec"]["suspend"] is True
    mark = json.loads(j["metadata"]["annotations"]["corral.dev/suspended-by"])
    assert mark["for"] == "default/llm"
    assert podgroup_of(api, name) is None


async def test_a_switch_nobody_acts_on_is_rolled_back_and_not_tried_again(
    api: ApiServer, kube: KubeClient, loaded: list[KubeIO]
) -> None:
    config = parse_config({"moves": {"suspend_grace": 0.2}})
    name, results = await suspend_first(api, kube, loaded, config)
    assert [r.outcome for r in results] == [MoveOutcome.ROLLED_BACK]
    j = job(api, name)
    annotations = j["metadata"].get("annotations") or {}
    assert j["spec"]["suspend"] is False and "corral.dev/suspended-by" not in annotations
    assert "corral.dev/suspend-ignored" in annotations
    assert podgroup_of(api, name) is not None  # made again


async def test_a_held_room_is_written_in_the_mark_and_ends_it_at_the_hold(
    api: ApiServer, kube: KubeClient, loaded: list[KubeIO]
) -> None:
    """A capacity-room move holds its room: the mark says until when, and the resume
    rule reads it back from the cluster (resumed at the hold's end, not before)."""
    config = parse_config({"moves": {"suspend_grace": 0, "resume_after": "1m"}})
    kio = await port(api, kube, config)
    loaded.append(kio)
    p = plan(await kio.fetch_state(), config)
    move = dataclasses.replace(p.moves[0], hold_for=300.0)
    await kio.begin(p)
    results = await kio.suspend_gang(move, "held")
    assert [r.outcome for r in results] == [MoveOutcome.SUSPENDED]
    name = move.pods[0].name.removesuffix("-0")
    mark = json.loads(job(api, name)["metadata"]["annotations"]["corral.dev/suspended-by"])
    assert (mark["holdUntil"], mark["priority"]) == ("2026-12-02T12:05:00Z", move.priority)
    key = f"default/Job/{name}"
    for _ in range(250):  # the informer sees the suspend
        st = await kio.view.state(NOW)
        if key in st.workloads and st.workloads[key].suspended:
            break
        await asyncio.sleep(0.02)
    for minutes, due in ((2, []), (5, [f"Job default/{name}"])):
        st = await kio.view.state(NOW + timedelta(minutes=minutes))
        got = [r.workload.describe() for r in due_resumptions(st, config) if r.action == "resume"]
        assert got == due
