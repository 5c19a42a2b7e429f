"""The informer-backed cluster view against the in-memory API server over real HTTP:
ready once synced, pod events move pods in place, node changes rebuild, events during a
rebuild are replayed, and the live arrays always equal a snapshot built from scratch."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gangplace.engine import EngineConfig, Snapshot
from gangplace.kube import KubeClient

import webhook.live as live_mod
from tests.kubeapi import ApiServer
from tests.kubeapi import objects as o
from webhook.live import InformerSource, held_pod


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


def nodes_and_pods(api: ApiServer) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    store = api.store
    nodes = list(store.items(store.resource("nodes")))
    pods = list(store.items(store.resource("pods")))
    return nodes, pods


def matches_server(source: InformerSource, api: ApiServer) -> bool:
    """The live snapshot holds what a snapshot built from the server's objects holds
    (per node and resource; GPU devices compared as per-node multisets)."""
    st = source.state()
    if st is None:
        return False
    nodes, pods = nodes_and_pods(api)
    fresh = Snapshot.from_objects(nodes, pods, source.config)
    live = st.snapshot
    if live.node_names != fresh.node_names:
        return False
    for r, j in live.res_index.items():
        want = fresh.used[:, fresh.res_index[r]] if r in fresh.res_index else 0
        if not np.array_equal(live.used[:, j], want):
            return False
    return np.array_equal(np.sort(live.gpu_free, axis=1), np.sort(fresh.gpu_free, axis=1))


@pytest.fixture
async def source(api: ApiServer, kube: KubeClient) -> Any:
    src = InformerSource(kube, rebuild_delay=0.05, watch_timeout=5)
    yield src
    await src.stop()


def cluster(rng: random.Random) -> list[dict[str, Any]]:
    objs = [o.node(f"g{i}", gpus=8) for i in range(3)] + [o.node(f"c{i}") for i in range(3)]
    for i in range(40):
        gpu = rng.random() < 0.5
        node = f"g{rng.randrange(3)}" if gpu else f"c{rng.randrange(3)}"
        objs.append(o.pod(f"p{i}", "ml", node=node, gpus=rng.choice((1, 2)) if gpu else 0))
    objs.append(o.pod("waiting", "ml", gpus=1))
    objs.append(o.pod("done", "ml", node="g0", gpus=4, phase="Succeeded"))
    return objs


async def test_ready_once_synced_then_pods_move_in_place(
    api: ApiServer, kube: KubeClient, source: InformerSource, kubelet: Callable[[], int]
) -> None:
    api.store.load(cluster(random.Random(1)))
    slow = api.faults.delay(0.3, method="GET", path="/pods$")
    source.start()
    await asyncio.sleep(0.1)
    assert not source.ready() and source.state() is None
    api.faults.remove(slow)
    await source.wait_ready(5)
    assert source.ready() and matches_server(source, api)
    assert source.stats.builds == 1
    st = source.state()
    # only bound, unfinished pods are held
    assert "ml/waiting" not in source.pods.store and "ml/done" not in source.pods.store
    assert len(source.pods) == 40

    pods = api.store.resource("pods")
    # new pods, bound and pending
    for i in range(5):
        api.store.create(pods, "ml", o.pod(f"n{i}", "ml", node="g1", gpus=1))
    api.store.create(pods, "ml", o.pod("n-pending", "ml", gpus=2))
    # a pending pod gets bound; a running one finishes; one is deleted
    api.store.patch(
        pods, "ml", "waiting", "application/merge-patch+json", {"spec": {"nodeName": "g2"}}
    )
    api.store.patch(
        pods,
        "ml",
        "p1",
        "application/merge-patch+json",
        {"status": {"phase": "Succeeded"}},
        subresource="status",
    )
    api.store.delete(pods, "ml", "p2")
    kubelet()  # p2's kubelet ends it; "waiting" starts on g2
    await eventually(lambda: matches_server(source, api))
    assert source.state() is st  # pod events never rebuild
    assert source.stats.builds == 1 and source.stats.events >= 8
    # heartbeats that change nothing the engine reads do not rebuild either
    nodes = api.store.resource("nodes")
    api.store.patch(
        nodes,
        "",
        "g0",
        "application/merge-patch+json",
        {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "beat"}]}},
        subresource="status",
    )
    await asyncio.sleep(0.2)
    assert source.stats.builds == 1 and source.state() is st


async def test_node_changes_rebuild_the_view(
    api: ApiServer, kube: KubeClient, source: InformerSource
) -> None:
    api.store.load(cluster(random.Random(2)))
    source.start()
    await source.wait_ready(5)
    first = source.state()
    assert first is not None and first.snapshot.n_nodes == 6
    nodes = api.store.resource("nodes")
    # a burst of new nodes is built once
    for i in range(3):
        api.store.create(nodes, "", o.node(f"new{i}", gpus=4))
    await eventually(lambda: (s := source.state()) is not None and s.snapshot.n_nodes == 9)
    second = source.state()
    assert second is not None and second is not first
    assert second.capacity.n_nodes == 9 and int(second.capacity.used.sum()) == 0
    assert source.stats.builds == 2
    assert matches_server(source, api)
    # cordoned, then removed with its pods still listed: they no longer count
    api.store.patch(
        nodes, "", "g0", "application/merge-patch+json", {"spec": {"unschedulable": True}}
    )
    await eventually(lambda: source.stats.builds == 3)
    st = source.state()
    assert st is not None and st.snapshot.unschedulable[st.snapshot.node_index["g0"]]
    api.store.delete(nodes, "", "g0")
    await eventually(lambda: "g0" not in (source.state() or first).snapshot.node_index)
    assert matches_server(source, api)


async def test_pod_events_during_a_rebuild_are_replayed(
    api: ApiServer, kube: KubeClient, source: InformerSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.store.load(cluster(random.Random(3)))
    source.start()
    await source.wait_ready(5)
    building = asyncio.Event()
    loop = asyncio.get_running_loop()
    real_build = live_mod._build

    def slow_build(*args: Any) -> Any:
        loop.call_soon_threadsafe(building.set)
        time.sleep(0.4)
        return real_build(*args)

    monkeypatch.setattr(live_mod, "_build", slow_build)
    nodes, pods = api.store.resource("nodes"), api.store.resource("pods")
    api.store.create(nodes, "", o.node("late", gpus=8))
    await asyncio.wait_for(building.wait(), 5)
    # while the new view is built from an older picture, pods come and go
    api.store.create(pods, "ml", o.pod("during", "ml", node="late", gpus=8))
    api.store.delete(pods, "ml", "p3")
    api.store.patch(
        pods, "ml", "waiting", "application/merge-patch+json", {"spec": {"nodeName": "g1"}}
    )
    await eventually(lambda: source.stats.builds == 2)
    assert source.stats.replayed >= 3
    assert matches_server(source, api)
    st = source.state()
    assert st is not None
    late = st.snapshot.node_index["late"]
    assert st.snapshot.gpu_free[late, :8].tolist() == [0] * 8


async def test_admission_sees_the_live_view(
    api: ApiServer, kube: KubeClient, source: InformerSource, kubelet: Callable[[], int]
) -> None:
    from gangplace.engine import PodShape

    from webhook.admission.cluster_fit import check_gang

    api.store.load([o.node("g0", gpus=8), o.namespace("ml")])
    source.start()
    await source.wait_ready(5)
    st = source.state()
    assert st is not None
    shape = PodShape.of({"cpu": 1000, "memory": 2**30}, gpus=4)
    assert check_gang(st, "g", [("w", shape, 2)], 2, now=True).now == ""
    pods = api.store.resource("pods")
    api.store.create(pods, "ml", o.pod("hog", "ml", node="g0", gpus=6))
    await eventually(lambda: check_gang(st, "g", [("w", shape, 2)], 2, now=True).now != "")
    assert check_gang(st, "g", [("w", shape, 2)], 2).never == ""  # it could, on an empty node
    api.store.delete(pods, "ml", "hog")
    kubelet()  # its kubelet ends it
    await eventually(lambda: check_gang(st, "g", [("w", shape, 2)], 2, now=True).now == "")


def test_held_pod_records() -> None:
    cfg = EngineConfig()
    shapes: dict[Any, Any] = {}
    names: dict[str, str] = {}
    a = held_pod(o.pod("a", node="n1", gpus=1), cfg, shapes, names)
    b = held_pod(o.pod("b", node="n1", gpus=1), cfg, shapes, names)
    assert a == b and a.shape is b.shape and a.node is b.node
    done = held_pod(o.pod("c", node="n1", phase="Failed"), cfg, shapes, names)
    assert done.node == ""
    share = o.pod("s", node="n1")
    share["metadata"]["annotations"] = {
        "alibabacloud.com/gpu-milli": "500",
        "alibabacloud.com/gpu-index": "3",
    }
    assert held_pod(share, cfg, shapes, names).gpu_index == (3,)
    share["metadata"]["annotations"]["alibabacloud.com/gpu-index"] = "x"
    assert held_pod(share, cfg, shapes, names).gpu_index == ()
    bad = o.pod("bad", node="n1")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(ValueError, match="pod default/bad"):
        held_pod(bad, cfg, shapes, names)
