"""Snapshot.place_bound / unplace: following a live cluster without pod records gives
the same arrays as building a snapshot from the pods, and undoes exactly."""

import random

import numpy as np
import pytest
from gangplace.engine import EngineConfig, Snapshot
from gangplace.engine.node_pod_records import node_from_json, pod_from_json

from tests.builders.engine_json import node_json, pod_json


def cluster(seed: int) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    nodes = [node_json(f"g{i}", gpus=rng.choice((4, 8))) for i in range(4)]
    nodes += [node_json(f"c{i}", cpu="64") for i in range(3)]
    pods = []
    for i in range(60):
        kind = rng.random()
        if kind < 0.4:
            node, gpus = f"g{rng.randrange(4)}", rng.choice((1, 2))
            pods.append(pod_json(f"w{i}", node, "1", "1Gi", gpus=gpus))
        elif kind < 0.6:
            share = str(rng.choice((250, 300, 500)))
            pods.append(
                pod_json(
                    f"s{i}",
                    f"g{rng.randrange(4)}",
                    "1",
                    "1Gi",
                    annotations={"alibabacloud.com/gpu-milli": share},
                )
            )
        elif kind < 0.65:
            # a device named by the pod: honoured when the node has it
            pods.append(
                pod_json(
                    f"x{i}",
                    f"g{rng.randrange(4)}",
                    "1",
                    "1Gi",
                    annotations={
                        "alibabacloud.com/gpu-milli": "500",
                        "alibabacloud.com/gpu-index": str(rng.randrange(6)),
                    },
                )
            )
        else:
            pods.append(pod_json(f"p{i}", f"c{rng.randrange(3)}", "2", "4Gi"))
    return nodes, pods


@pytest.mark.parametrize("seed", range(5))
def test_place_bound_matches_the_constructor(seed: int) -> None:
    nodes, pods = cluster(seed)
    built = Snapshot.from_objects(nodes, pods)
    cfg = EngineConfig()
    live = Snapshot([node_from_json(n, cfg) for n in nodes], (), cfg)
    held = []
    for obj in pods:
        p = pod_from_json(obj, cfg)
        node = live.node_index[p.node_name]
        held.append((p.shape, node, live.place_bound(p.shape, node, p.gpu_index)))
    assert np.array_equal(live.used, built.used)
    assert np.array_equal(live.gpu_free, built.gpu_free)
    assert live.pods == []  # no records kept
    # devices are those the constructor gave the same pods
    assert [g for _, _, g in held] == [p.gpus for p in built.pods]
    empty = Snapshot(live.nodes, (), cfg)
    for shape, node, gpus in reversed(held):
        live.unplace(shape, node, gpus)
    assert np.array_equal(live.used, empty.used)
    assert np.array_equal(live.gpu_free, empty.gpu_free)


def test_place_bound_is_journaled_and_never_refuses() -> None:
    cfg = EngineConfig()
    snap = Snapshot([node_from_json(node_json("g", gpus=2, cpu="4"), cfg)], (), cfg)
    big = pod_from_json(pod_json("big", "g", "16", "1Gi", gpus=4), cfg).shape
    before = snap.state()
    with snap.what_if():
        gpus = snap.place_bound(big, 0)
        # more than the node has: counted all the same (the cluster says it runs)
        assert snap.free()[0, snap.res_index["cpu"]] < 0
        assert len(gpus) == 2
    assert snap.state() == before
    token = snap.fork()
    gpus = snap.place_bound(big, 0)
    snap.unplace(big, 0, gpus)
    snap.revert(token)
    assert snap.state() == before
