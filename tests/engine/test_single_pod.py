"""The engine's single-pod placer: one answer for the replay, the gang study and the
test schedulers alike."""

import numpy as np
import numpy.typing as npt
from gangplace.engine import BinpackScorer, PodRecord, PodShape, Snapshot, place_pod

from tests.builders.engine_json import node_json, pod_json

SHAPE = PodShape.of({"cpu": 1000, "memory": 2**30})


def three_nodes() -> Snapshot:
    nodes = [node_json(n, cpu="10", memory="100Gi") for n in ("a", "b", "c")]
    return Snapshot.from_objects(nodes, [pod_json("p", "b", "5", "50Gi")])


class Refuses(BinpackScorer):
    """A scorer that must not be asked to score."""

    def score(
        self, snap: Snapshot, shape: PodShape, nodes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        raise AssertionError("scored a single candidate")


class PicksLast(BinpackScorer):
    """A policy with its own choice (as Random and BestFit have)."""

    def select(self, snap: Snapshot, shape: PodShape, nodes: npt.NDArray[np.int64]) -> int:
        return int(nodes.size - 1)


def test_binds_the_pod_record_it_is_given() -> None:
    snap = three_nodes()
    rec = PodRecord("ns", "x", SHAPE)
    assert place_pod(snap, SHAPE, None, rec) == (1, ())  # binpack: the fuller node
    assert rec.node == 1
    assert any(p is rec for p in snap.pods)


def test_a_single_candidate_is_taken_without_scoring() -> None:
    snap = three_nodes()
    only_c = np.array([False, False, True])
    assert place_pod(snap, SHAPE, Refuses(), allowed=only_c) == (2, ())


def test_a_policys_own_choice_wins_over_its_scores() -> None:
    snap = three_nodes()
    assert place_pod(snap, SHAPE, BinpackScorer()) == (1, ())
    assert place_pod(snap, SHAPE, PicksLast()) == (2, ())


def test_nowhere_to_go_leaves_the_snapshot_as_it_was() -> None:
    snap = three_nodes()
    used = snap.used.copy()
    big = PodShape.of({"cpu": 64000})
    assert place_pod(snap, big) is None
    assert np.array_equal(snap.used, used)
