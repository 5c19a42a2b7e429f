"""A capacity room held through the kube-scheduler (``capacity_room.nominate``): corral's
descheduler over the in-memory API server, with the Job controller, the kubelet and a
default-scheduler model that counts nominated pods as the kube-scheduler does
(:mod:`tests.controllers.nominated`) and retries a pod that failed only after its backoff.

Three 8-GPU nodes: fillers of priority 1,000,000 hold n1's first 4 GPUs and all of n2
and n3; Job ``low`` (priority 0) holds n1's other 4. Gang ``llm`` (one 4-GPU pod,
priority 1000, corral's own gang keys, placed by the default scheduler) waits. corral
suspends ``low`` to make room on n1 and, with nominate, writes n1 into the llm pod's
``status.nominatedNodeName``. Then a pod nobody waited for arrives, while llm's pod is in
its backoff: without the nomination it takes n1 and llm keeps waiting; with it, a pod of
llm's priority or lower stays pending and llm binds; a pod of higher priority still may
take the room (the scheduler's rule: no priority is inverted)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from descheduler import parse_config
from tests.controllers.pod_scheduler import PodScheduler
from tests.kubeapi import ApiServer
from tests.kubeapi.versions import Versions
from tests.scenarios.story import (
    DESCHED_NS,
    NS,
    Cluster,
    Json,
    job,
    place,
    run_descheduler,
    setup,
    submit,
)

pytestmark = pytest.mark.scenario

FILLERS = {"n1": [("fill-1", 4)], "n2": [("fill-2", 8)], "n3": [("fill-3", 8)]}


def config(nominate: bool) -> Any:
    return parse_config(
        {
            "capacity_room": {"enabled": True, "after": "0s", "nominate": nominate},
            "moves": {"suspend_grace": 0, "resume_wait": 0},
        }
    )


def gang_job(name: str, gpus: int, priority: int) -> Json:
    """A Job whose one pod is a gang in corral's own keys, placed by the default scheduler."""
    j = job(name, gpus, priority=priority)
    j["spec"]["template"]["metadata"]["annotations"] = {
        "corral.dev/gang": name,
        "corral.dev/min-available": "1",
    }
    return j


def bare_pod(name: str, gpus: int, priority: int) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "priority": priority,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                        "limits": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
    }


@pytest.fixture
async def cluster(api: ApiServer) -> AsyncIterator[Cluster]:
    setup(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DESCHED_NS}})
    c = Cluster(api, scheduler="pod")
    for m in c.models.controllers:
        if isinstance(m, PodScheduler):
            m.backoff = True
    try:
        await place(c, FILLERS, priority=1_000_000)
        await submit(c.rest, job("low", 4, priority=0))
        await c.models.settle(only=["job-controller"])
        (pod,) = c.pods("low")
        await c.rest.bind(NS, pod["metadata"]["name"], "n1")
        await submit(c.rest, gang_job("llm", 4, 1000))
        await c.settle()
        yield c
    finally:
        await c.close()


def where(c: Cluster, name: str) -> tuple[str, str]:
    """(node bound to, node nominated) of the pod of Job or pod ``name``."""
    pods = c.pods(name) or [p for p in c.pods() if p["metadata"]["name"] == name]
    (p,) = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return (
        (p.get("spec") or {}).get("nodeName") or "",
        (p.get("status") or {}).get("nominatedNodeName") or "",
    )


async def room_made_then(c: Cluster, nominate: bool, other_priority: int) -> None:
    assert where(c, "llm") == ("", "")  # waits: no room anywhere
    doc = await run_descheduler(c.api, config(nominate))
    (move,) = doc["moves"]
    assert move["for_gang"] == f"{NS}/llm" and move["workloads"] == [f"Job {NS}/low"]
    assert c.job("low")["spec"]["suspend"] is True
    await c.settle()  # low's pod goes: the room is free
    assert c.pods("low") == []
    # the pod nobody waited for arrives while llm's pod waits out its backoff
    await c.rest.create("v1", "pods", NS, bare_pod("other", 4, other_priority))
    await c.settle()
    c.clock.advance(30)  # llm's backoff is over
    await c.settle()


async def test_without_nominate_a_later_pod_takes_the_room(cluster: Cluster) -> None:
    await room_made_then(cluster, nominate=False, other_priority=0)
    assert where(cluster, "other") == ("n1", "")
    assert where(cluster, "llm") == ("", "")


async def test_with_nominate_the_gang_binds_and_the_lower_pod_waits(cluster: Cluster) -> None:
    await room_made_then(cluster, nominate=True, other_priority=0)
    assert where(cluster, "llm") == ("n1", "n1")
    assert where(cluster, "other") == ("", "")


async def test_a_pod_of_the_gangs_priority_waits_too(cluster: Cluster) -> None:
    await room_made_then(cluster, nominate=True, other_priority=1000)
    assert where(cluster, "llm")[0] == "n1"
    assert where(cluster, "other") == ("", "")


async def test_a_pod_of_higher_priority_still_takes_the_room(cluster: Cluster) -> None:
    await room_made_then(cluster, nominate=True, other_priority=2000)
    assert where(cluster, "other") == ("n1", "")
    # llm failed on n1: the scheduler cleared the nomination; corral's next run writes
    # it again while the hold lasts (the pod waits for room that is no longer there)
    assert where(cluster, "llm") == ("", "")


@pytest.mark.parametrize(("kube", "cleared"), [("1.34", False), ("1.35", True)])
async def test_binding_clears_the_nomination_from_1_35(
    cluster: Cluster, kube: str, cleared: bool
) -> None:
    """The API server clears a bound pod's nomination from 1.35
    (ClearingNominatedNodeNameAfterBinding, beta): corral has nothing to clear then."""
    cluster.api.store.versions = Versions.of(kube)
    await room_made_then(cluster, nominate=True, other_priority=0)
    assert where(cluster, "llm") == ("n1", "" if cleared else "n1")


def nominate_config(**room: Any) -> Any:
    return parse_config(
        {
            "capacity_room": {"enabled": True, "after": "0s", "nominate": True, **room},
            "moves": {"suspend_grace": 0, "resume_wait": 0},
        }
    )


async def test_each_run_writes_again_what_the_scheduler_cleared(cluster: Cluster) -> None:
    c = cluster
    await run_descheduler(c.api, nominate_config())
    (llm,) = c.pods("llm")
    assert where(c, "llm") == ("", "n1")
    # the scheduler clears it after a failed cycle (preemption found no victims)
    name = llm["metadata"]["name"]
    await c.rest.patch(
        "v1", "pods", NS, name, {"status": {"nominatedNodeName": None}}, subresource="status"
    )
    assert where(c, "llm") == ("", "")
    doc = await run_descheduler(c.api, nominate_config())
    assert doc["moves"] == []  # the room is held: nothing more is moved for it
    assert where(c, "llm") == ("", "n1")
    # a nomination another component wrote is left as it is
    await c.rest.patch(
        "v1", "pods", NS, name, {"status": {"nominatedNodeName": "n2"}}, subresource="status"
    )
    await run_descheduler(c.api, nominate_config())
    assert where(c, "llm") == ("", "n2")


async def test_the_hold_ends_unbound_the_nomination_is_cleared(cluster: Cluster) -> None:
    c = cluster
    await run_descheduler(c.api, nominate_config(hold_for="1s"))
    assert where(c, "llm") == ("", "n1") and c.job("low")["spec"]["suspend"] is True
    await asyncio.sleep(1.2)  # the hold ends (wall clock: the descheduler's)
    await run_descheduler(c.api, nominate_config(hold_for="1s"))
    assert c.job("low")["spec"]["suspend"] is False  # resumed first
    assert where(c, "llm")[1] == ""
