"""The exact neighbourhood move on nodes as real clusters have them: a pod that stays on
a cordoned node is no error of the plan, and a node whose pods hold more than it has is
never part of a neighbourhood (nothing moves off it or onto it)."""

from __future__ import annotations

from gangplace.engine import PodShape, Snapshot
from gangplace.engine.node_pod_records import NodeRecord, PodRecord
from gangplace.mover.hood_moves import fit_in_neighbourhood, neighbourhood

MIB = 1 << 20


def node(name: str, gpus: int, *, cordoned: bool = False) -> NodeRecord:
    return NodeRecord(
        name=name,
        allocatable={"cpu": 32000, "memory": 64 * 1024 * MIB, "pods": 110},
        unschedulable=cordoned,
        gpu_resource="nvidia.com/gpu",
        gpu_count=gpus,
        gpu_model="T4",
    )


def gpu_pod(name: str, node_name: str, milli: int = 1000, device: int = -1) -> PodRecord:
    shape = PodShape.of(
        {"cpu": 1000, "memory": 1024 * MIB}, gpus=1, gpu_milli=milli if milli < 1000 else None
    )
    on = (device,) if device >= 0 else ()
    return PodRecord("default", name, shape, node_name=node_name, phase="Running", gpu_index=on)


WHOLE = PodShape.of({"cpu": 1000, "memory": 1024 * MIB}, gpus=1)


def test_a_pod_left_on_a_cordoned_node_is_no_error() -> None:
    # a whole GPU fits on n1 once one share moves onto the other's GPU; n1 is the only
    # node it may use, so the cordoned node, with a pod of its own, joins the
    # neighbourhood as the room beside it
    snap = Snapshot(
        [node("a-cordoned", 1, cordoned=True), node("n1", 2)],
        [gpu_pod("kept", "a-cordoned"), gpu_pod("s1", "n1", 500, 0), gpu_pod("s2", "n1", 400, 1)],
    )
    assert neighbourhood(snap, WHOLE, 2) == [1, 0]
    new = PodRecord("default", "new", WHOLE)
    rep = fit_in_neighbourhood(snap, WHOLE, new, max_pods=2)
    assert rep is not None and len(rep.moved) == 1 and new.node == 1
    assert snap.pods[0].node == 0  # it stayed where it runs


def test_an_overfilled_node_is_never_in_a_neighbourhood() -> None:
    # n0: two whole-GPU pods on one GPU (an unowned static pod over a device plugin
    # that now reports fewer GPUs)
    snap = Snapshot(
        [node("n0", 1), node("n1", 1), node("n2", 1)],
        [
            *(gpu_pod("p0", "n0"), gpu_pod("static", "n0")),
            *(gpu_pod("s1", "n1", 500), gpu_pod("s2", "n2", 400)),
        ],
    )
    assert snap.problems == {0: "pods hold 2 GPUs of 1 allocatable"}
    for k in (1, 2, 3, 8):
        assert 0 not in neighbourhood(snap, WHOLE, k)
    new = PodRecord("default", "new", WHOLE)
    rep = fit_in_neighbourhood(snap, WHOLE, new, max_pods=2)
    assert rep is not None and new.node in (1, 2)  # room made beside it
    assert {p.name for p in snap.pods_on(0)} == {"p0", "static"}
