"""Scorers order nodes as their names promise."""

import numpy as np
import pytest
from gangplace.engine import BinpackScorer, PodShape, Snapshot, SpreadScorer, place_pod

from tests.builders.engine_json import node_json, pod_json


def two_nodes() -> Snapshot:
    nodes = [
        node_json("empty", cpu="10", memory="100Gi"),
        node_json("half", cpu="10", memory="100Gi"),
    ]
    return Snapshot.from_objects(nodes, [pod_json("p", "half", "5", "50Gi")])


def test_binpack_prefers_fuller_node_with_default_weights() -> None:
    s = two_nodes()
    shape = PodShape.of({"cpu": 1000, "memory": 10 * 2**30})
    scores = BinpackScorer().score(s, shape, np.arange(2))
    # empty: 0.7*0.1 + 0.3*0.1 = 0.1 -> 10; half: 0.7*0.6 + 0.3*0.6 = 0.6 -> 60
    assert scores.tolist() == pytest.approx([10.0, 60.0])
    assert place_pod(s, shape) == (1, ())


def test_spread_prefers_emptier_node() -> None:
    s = two_nodes()
    shape = PodShape.of({"cpu": 1000, "memory": 10 * 2**30})
    assert place_pod(s, shape, SpreadScorer()) == (0, ())


def test_weights_only_count_requested_resources() -> None:
    s = two_nodes()
    cpu_only = PodShape.of({"cpu": 1000})
    scores = BinpackScorer({"cpu": 1.0, "memory": 5.0}).score(s, cpu_only, np.arange(2))
    assert scores.tolist() == pytest.approx([10.0, 60.0])


def test_gpu_term_packs_gpu_nodes() -> None:
    nodes = [node_json("a", gpus=8), node_json("b", gpus=8)]
    s = Snapshot.from_objects(nodes, [pod_json("x", "b", "1", "1Gi", gpus=3)])
    shape = PodShape.of({}, gpus=1)
    # only the GPU term counts (no cpu/memory requested): (3+1)/8 beats 1/8
    assert BinpackScorer().score(s, shape, np.arange(2)).tolist() == pytest.approx([12.5, 50.0])


def test_shared_gpu_takes_tightest_device() -> None:
    nodes = [node_json("a", gpus=2)]
    share = {"alibabacloud.com/gpu-milli": "600"}
    s = Snapshot.from_objects(nodes, [pod_json("x", "a", "1", "1Gi", annotations=share)])
    got = place_pod(s, PodShape.of({"cpu": 100}, gpus=1, gpu_milli=300))
    assert got == (0, (0,))  # the device with 400 free, not the whole one
    assert s.gpu_free[0].tolist() == [100, 1000]


def test_negative_weight_refused() -> None:
    with pytest.raises(ValueError, match="'cpu'"):
        BinpackScorer({"cpu": -1})
