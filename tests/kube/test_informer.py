"""Informers keep exactly the server's objects, as compact records, through broken
watches, 410 Gone and expired list pages; the cache builds the engine's snapshot."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gangplace.engine import EngineConfig, PodRecord, Snapshot
from gangplace.engine.node_pod_records import node_from_json, pod_from_json
from gangplace.engine.objects import PdbRecord, PodGroupRecord, QueueRecord
from gangplace.kube import ClusterCache, Informer, KubeClient, SnapshotFeed
from gangplace.kube.resources import NODES, NON_TERMINAL_PODS, PODS

from tests.kubeapi import ApiServer, ApiStore
from tests.kubeapi import objects as o

# Pods of a workload with a scale (a budget with maxUnavailable needs one to be computed).
_RS = ("ReplicaSet", "w")


async def until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.01)


def truth_pods(store: ApiStore, selector: str | None = NON_TERMINAL_PODS) -> dict[str, PodRecord]:
    pods = store.resource("pods")
    page = store.list(pods, field_selector=selector)
    cfg = EngineConfig()
    return {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": pod_from_json(p, cfg)
        for p in page["items"]
    }


class Mirror:
    """Rebuilds the store from listener events alone, checking the event protocol: no
    ADDED for a key it has, no MODIFIED or DELETED for one it has not."""

    def __init__(self) -> None:
        self.items: dict[str, Any] = {}
        self.violations: list[str] = []

    def __call__(self, kind: str, key: str, old: Any, new: Any) -> None:
        if kind == "ADDED":
            if key in self.items:
                self.violations.append(f"ADDED twice: {key}")
            self.items[key] = new
        elif kind == "MODIFIED":
            if self.items.get(key) != old:
                self.violations.append(f"MODIFIED with a wrong old record: {key}")
            self.items[key] = new
        else:
            if key not in self.items:
                self.violations.append(f"DELETED unknown: {key}")
            self.items.pop(key, None)


def pod_informer(kube: KubeClient, **kw: Any) -> Informer[PodRecord]:
    cfg = EngineConfig()
    return Informer(
        kube, PODS, lambda obj: pod_from_json(obj, cfg), field_selector=NON_TERMINAL_PODS, **kw
    )


async def test_lists_in_pages_then_follows_changes(api: ApiServer, kube: KubeClient) -> None:
    api.store.load([o.pod(f"p{i}", "ns1", node="n1") for i in range(25)])
    inf = pod_informer(kube, page_size=10)
    inf.start()
    try:
        await inf.wait_synced(5)
        assert len(inf) == 25
        assert len([r for r in api.requests("GET", "/pods") if not r.watch]) == 3  # 10 + 10 + 5
        pods = api.store.resource("pods")
        api.store.create(pods, "ns1", o.pod("new", "ns1", node="n1"))
        api.store.delete(pods, "ns1", "p0")
        api.store.replace(
            pods,
            "ns1",
            "p1",
            o.pod("p1", "ns1", node="n1", phase="Succeeded"),
            subresource="status",
        )
        await until(lambda: inf.store == truth_pods(api.store))
        assert "ns1/p1" not in inf.store and "ns1/new" in inf.store
        assert inf.resource_version == str(api.store.rv)
    finally:
        await inf.stop()


async def test_survives_a_storm_of_changes_drops_and_gone() -> None:
    """Random creates, updates and deletes while watches are cut and the history runs
    out: at the end the cache equals the server, and the change events told the truth."""
    rng = random.Random(7)
    async with ApiServer(ApiStore(history=40), bookmark_interval=0.05) as api:
        store, pods = api.store, api.store.resource("pods")
        store.load([o.node(f"n{i}") for i in range(4)])
        store.load([o.pod(f"p{i}", f"ns{i % 3}", node=f"n{i % 4}") for i in range(60)])
        inf = pod_informer(api.client("informer"), page_size=7)
        mirror = Mirror()
        inf.add_listener(mirror)
        inf.backoff.initial = inf.backoff.maximum = 0.02
        inf.start()
        await inf.wait_synced(5)
        mirror.items = dict(inf.store)
        names = [f"p{i}" for i in range(60)]

        def change() -> None:
            i = rng.randrange(90)
            name, ns = f"p{i}", f"ns{i % 3}"
            exists = store.find(pods, ns, name) is not None
            r = rng.random()
            if not exists:
                store.create(
                    pods,
                    ns,
                    o.pod(name, ns, node=f"n{rng.randrange(4)}", cpu=str(rng.randint(1, 4))),
                )
                names.append(name)
            elif r < 0.25:
                store.delete(pods, ns, name)
            elif r < 0.45:
                phase = rng.choice(["Running", "Succeeded", "Failed", "Pending"])
                store.replace(
                    pods, ns, name, o.pod(name, ns, node="n0", phase=phase), subresource="status"
                )
            else:
                labels = {"gen": str(rng.randrange(1000))}
                store.patch(
                    pods, ns, name, "application/merge-patch+json", {"metadata": {"labels": labels}}
                )

        for round_ in range(30):
            for _ in range(rng.randint(1, 12)):
                change()
            if round_ % 5 == 1:
                api.faults.drop_watches(after_events=rng.randrange(3))  # cut mid-stream
            if round_ % 5 == 3:
                store.close_watches()  # a clean end
            if round_ % 10 == 6:
                # Keep the informer away until its resourceVersion has left the history.
                rule = api.faults.fail(503, times=-1, path="/pods$")
                store.close_watches()
                for _ in range(60):
                    change()
                await asyncio.sleep(0.05)
                api.faults.remove(rule)
            await asyncio.sleep(rng.choice([0, 0, 0.005, 0.02]))
        try:
            await until(lambda: inf.store == truth_pods(store))
        except TimeoutError:
            truth = truth_pods(store)
            diff = sorted(
                k for k in truth.keys() | inf.store.keys() if truth.get(k) != inf.store.get(k)
            )
            raise AssertionError(
                f"cache differs from the server on {diff}; informer at resourceVersion "
                f"{inf.resource_version}, server at {store.rv}; {inf.stats}"
            ) from None
        await inf.stop()
        assert inf.stats.expired >= 1, inf.stats  # 410 Gone happened and was survived
        assert inf.stats.errors >= 1, inf.stats  # broken streams happened
        assert inf.stats.watches >= 3, inf.stats  # it reconnected
        assert mirror.violations == []
        assert mirror.items == dict(inf.store)


async def test_bookmarks_keep_the_resource_version_fresh() -> None:
    """Changes the informer does not select still age its resourceVersion; bookmarks move
    it on, so a reconnect after many such changes needs no relist."""
    async with ApiServer(ApiStore(history=10), bookmark_interval=0.05) as api:
        store, pods = api.store, api.store.resource("pods")
        store.load([o.pod("mine", "ns1", node="n1"), o.pod("other", "ns1", node="n2")])
        inf = Informer(
            api.client(),
            PODS,
            lambda obj: obj["metadata"]["name"],
            field_selector="spec.nodeName=n1",
        )
        inf.start()
        await inf.wait_synced(5)
        await until(lambda: len(store.watches) == 1)  # the watch is open
        for i in range(30):
            store.patch(
                pods,
                "ns1",
                "other",
                "application/merge-patch+json",
                {"metadata": {"labels": {"i": str(i)}}},
            )
        await until(lambda: inf.resource_version == str(store.rv))
        assert inf.stats.bookmarks >= 1
        store.close_watches()
        store.create(pods, "ns1", o.pod("mine2", "ns1", node="n1"))
        await until(lambda: "ns1/mine2" in inf.store)
        await inf.stop()
        assert inf.stats.expired == 0 and inf.stats.lists == 1


async def test_relists_when_a_continue_token_expires(api: ApiServer, kube: KubeClient) -> None:
    api.store.load([o.pod(f"p{i}", "ns1", node="n1") for i in range(9)])
    original = api.store.list

    def expiring_list(*args: Any, **kw: Any) -> dict:
        if (
            kw.get("continue_token")
            and api.store.rv < 1100
            and not getattr(expiring_list, "done", False)
        ):
            expiring_list.done = True  # type: ignore[attr-defined]
            api.store.expire_continues()
        return original(*args, **kw)

    api.store.list = expiring_list  # type: ignore[method-assign]
    inf = pod_informer(kube, page_size=4)
    inf.start()
    try:
        await inf.wait_synced(5)
        assert inf.stats.list_restarts == 1
        assert inf.store == truth_pods(api.store)
    finally:
        await inf.stop()


async def test_invalid_objects_are_reported_not_fatal(api: ApiServer, kube: KubeClient) -> None:
    bad = o.pod("bad", "ns1", node="n1", cpu="lots")
    api.store.load([o.pod("good", "ns1", node="n1"), bad])
    inf = pod_informer(kube)
    inf.start()
    try:
        await inf.wait_synced(5)
        assert list(inf.store) == ["ns1/good"]
        assert "ns1/bad" in inf.invalid and "'lots'" in inf.invalid["ns1/bad"]
        pods = api.store.resource("pods")
        # A valid pod that turns invalid leaves the store; fixed, it comes back.
        api.store.replace(pods, "ns1", "good", o.pod("good", "ns1", node="n1", cpu="-1"))
        await until(lambda: "ns1/good" not in inf.store)
        api.store.replace(pods, "ns1", "good", o.pod("good", "ns1", node="n1", cpu="2"))
        await until(lambda: "ns1/good" in inf.store)
        assert "ns1/good" not in inf.invalid
    finally:
        await inf.stop()


async def test_retries_with_backoff_while_the_server_fails(
    api: ApiServer, kube: KubeClient
) -> None:
    api.store.load([o.node("n1")])
    api.faults.fail(500, times=3, path="/nodes$")
    inf: Informer[Any] = Informer(kube, NODES, lambda obj: obj)
    inf.backoff.initial = 0.01
    inf.start()
    try:
        await inf.wait_synced(5)
        assert inf.stats.errors == 3 and "500" in inf.stats.last_error
    finally:
        await inf.stop()


def _cluster(store: ApiStore) -> None:
    store.load(
        [o.node(f"gpu{i}", gpus=8, gpu_model="A100") for i in range(3)]
        + [o.node(f"cpu{i}") for i in range(2)]
        + [
            o.pod(f"w{i}", "ns1", node=f"gpu{i % 3}", gpus=2, labels={"app": "w"}, owner=_RS)
            for i in range(6)
        ]
        + [o.pod(f"c{i}", "ns2", node=f"cpu{i % 2}", cpu="3") for i in range(4)]
        + [o.pod("waiting", "ns1", gpus=4), o.pod("done", "ns2", node="cpu0", phase="Succeeded")]
        + [o.pdb("w", "ns1", match_labels={"app": "w"}, max_unavailable=1)]
        + [
            o.volcano_podgroup("g", "ns1", min_member=6, queue="research"),
            o.volcano_queue("research", weight=3, capability={"nvidia.com/gpu": "16"}),
        ]
        + [
            o.cosched_podgroup("g2", "ns2", min_member=4, timeout=60),
            o.namespace("ns1", {"corral.dev/gang-scheduling": "enabled"}),
        ]
        + [o.priority_class("high", 1000)]
    )


async def test_cluster_cache_snapshot_matches_the_server(api: ApiServer, kube: KubeClient) -> None:
    _cluster(api.store)
    async with ClusterCache(
        kube, namespaces=True, pdbs=True, priority_classes=True, volcano=True, coscheduling=True
    ) as cache:
        await cache.wait_synced(5)
        snap = cache.snapshot()
        store = api.store
        truth = Snapshot.from_objects(
            list(store.items(store.resource("nodes"))),
            [
                p
                for p in store.items(store.resource("pods"))
                if p["status"]["phase"] not in ("Succeeded", "Failed")
            ],
        )
        assert snap.node_names == truth.node_names
        assert np.array_equal(snap.used, truth.used) and np.array_equal(
            snap.gpu_free, truth.gpu_free
        )
        assert sorted(p.key for p in snap.pods) == sorted(p.key for p in truth.pods)
        assert [p.key for p in snap.pending] == ["ns1/waiting"]
        # Equal pod shapes are one object.
        shapes = {id(p.shape) for p in cache.pods.values() if p.namespace == "ns1" and p.node_name}
        assert len(shapes) == 1
        # A snapshot writes bindings into its own copies, never into the cache's records.
        assert all(p.node == -1 and p.slot == -1 for p in cache.pods.values())
        second = cache.snapshot()
        assert second.state() == snap.state()

        assert cache.pdbs is not None and cache.volcano_podgroups is not None
        pdb = cache.pdbs.get("ns1/w")
        assert (
            isinstance(pdb, PdbRecord) and pdb.disruptions_allowed == 1 and pdb.expected_pods == 6
        )
        pg = cache.volcano_podgroups.get("ns1/g")
        assert isinstance(pg, PodGroupRecord) and (pg.min_member, pg.queue, pg.group) == (
            6,
            "research",
            "scheduling.volcano.sh",
        )
        assert cache.cosched_podgroups is not None
        pg2 = cache.cosched_podgroups.get("ns2/g2")
        assert pg2 is not None and (pg2.group, pg2.schedule_timeout_seconds) == (
            "scheduling.x-k8s.io",
            60,
        )
        assert cache.volcano_queues is not None
        q = cache.volcano_queues.get("research")
        assert isinstance(q, QueueRecord) and q.to_engine().capability == {"nvidia.com/gpu": 16}
        assert cache.namespaces is not None and cache.namespaces.get("ns1") is not None
        assert cache.namespaces.get("ns1").labels["corral.dev/gang-scheduling"] == "enabled"  # type: ignore[union-attr]
        assert (
            cache.priority_classes is not None and cache.priority_classes.get("high").value == 1000
        )  # type: ignore[union-attr]

        # A disruption budget's status follows an eviction.
        api.store.evict("ns1", "w0", {"kind": "Eviction", "metadata": {"name": "w0"}})
        await until(lambda: cache.pdbs.get("ns1/w").disruptions_allowed == 0)  # type: ignore[union-attr]


async def test_snapshot_feed_rebuilds_only_on_change(api: ApiServer, kube: KubeClient) -> None:
    _cluster(api.store)
    async with ClusterCache(kube) as cache:
        feed = SnapshotFeed(cache, interval=0.02)
        feed.start()
        try:
            await asyncio.wait_for(feed.ready.wait(), 5)
            first = feed.latest
            assert first is not None and len(first.pods) == 11
            await asyncio.sleep(0.1)
            assert feed.builds == 1 and feed.latest is first  # nothing changed
            api.store.create(api.store.resource("pods"), "ns2", o.pod("late", "ns2", node="cpu1"))
            await until(lambda: feed.latest is not first)
            assert feed.latest is not None and len(feed.latest.pods) == 12
            assert feed.age < 1.0
        finally:
            await feed.stop()


async def test_wait_synced_names_the_laggards(api: ApiServer, kube: KubeClient) -> None:
    api.faults.fail(503, times=-1, path="/nodes$", message="nodes are down")
    async with ClusterCache(kube) as cache:
        with pytest.raises(TimeoutError, match=r"nodes \(ApiError: 503"):
            await cache.wait_synced(0.5)
        assert cache.pods.synced.is_set() and not cache.synced


def test_node_records_are_the_engines() -> None:
    cfg = EngineConfig()
    assert node_from_json(o.node("n", gpus=4), cfg).gpu_count == 4
