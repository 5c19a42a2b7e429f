"""explain() counts its reasons over all nodes at once; on random clusters it says
exactly what asking each node in turn (``_node_reasons``) says."""

import random
from collections import Counter

import pytest
from gangplace.engine import PodShape, Snapshot, Toleration, explain, fits
from gangplace.engine.feasibility import _affinity_mask, _node_reasons, _selector_mask
from gangplace.engine.model import NodeSelectorRequirement, NodeSelectorTerm

from tests.builders.engine_json import node_json, pod_json

TAINTS = [
    {"key": "gpu", "value": "reserved", "effect": "NoSchedule"},
    {"key": "spot", "effect": "NoExecute"},
    {"key": "soft", "value": "x", "effect": "PreferNoSchedule"},
    {"key": "team", "value": "a", "effect": "NoSchedule"},
]


def explain_node_by_node(snap: Snapshot, shape: PodShape, pod: str, limit: int = 4) -> str:
    ok = fits(snap, shape)
    counts: Counter[str] = Counter()
    selected, affine = _selector_mask(snap, shape), _affinity_mask(snap, shape)
    for i in (i for i in range(snap.n_nodes) if not ok[i]):
        counts.update(_node_reasons(snap, shape, i, selected, affine))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{n} {why}" for why, n in ranked[:limit]]
    if len(ranked) > limit:
        parts.append(f"{sum(n for _, n in ranked[limit:])} other")
    head = f"{int(ok.sum())}/{snap.n_nodes} nodes can host pod {pod}"
    return f"{head}: {', '.join(parts)}" if parts else head


def random_cluster(rng: random.Random) -> Snapshot:
    nodes = []
    for i in range(rng.randrange(1, 40)):
        gpus = rng.choice((0, 0, 2, 4, 8))
        labels = {"zone": rng.choice("ab"), "pool": rng.choice(("x", "y", "z"))}
        if gpus:
            labels["nvidia.com/gpu.product"] = rng.choice(("T4", "A100"))
        taints = rng.sample(TAINTS, rng.choice((0, 0, 1, 2, 3)))
        extra = {"example.com/fpga": "2"} if rng.random() < 0.2 else None
        nodes.append(
            node_json(
                f"n{i:02d}",
                cpu=str(rng.choice((4, 16, 64))),
                memory=f"{rng.choice((16, 64, 256))}Gi",
                gpus=gpus,
                labels=labels,
                taints=taints,
                unschedulable=rng.random() < 0.1,
                ready=rng.random() > 0.1,
                pods=str(rng.choice((2, 110))),
                extra=extra,
            )
        )
    pods = []
    for i in range(rng.randrange(0, 80)):
        n = rng.choice(nodes)["metadata"]["name"]
        pods.append(pod_json(f"p{i}", n, str(rng.choice((1, 2, 8))), "4Gi", rng.choice((0, 1, 2))))
    return Snapshot.from_objects(nodes, pods)


def random_shape(rng: random.Random) -> PodShape:
    req = {"cpu": rng.choice((500, 4000, 32000)), "memory": rng.choice((1, 32, 512)) * 2**30}
    if rng.random() < 0.2:
        req["example.com/fpga"] = 1
    if rng.random() < 0.1:
        req["example.com/unknown"] = 1
    kw: dict = {}
    if rng.random() < 0.3:
        kw["node_selector"] = (("pool", rng.choice(("x", "y", "nope"))),)
    if rng.random() < 0.3:
        req_ = NodeSelectorRequirement("zone", rng.choice(("In", "NotIn")), ("a",))
        kw["affinity"] = (NodeSelectorTerm((req_,), ()),)
    tols = []
    if rng.random() < 0.4:
        tols.append(Toleration("gpu", "Equal", "reserved", "NoSchedule"))
    if rng.random() < 0.2:
        tols.append(Toleration("", "Exists", "", ""))
    if rng.random() < 0.2:
        tols.append(Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"))
    kw["tolerations"] = tuple(tols)
    gpus = rng.choice((0, 0, 1, 2, 8))
    if gpus and rng.random() < 0.3:
        kw["gpu_models"] = ("A100",)
    if gpus == 1 and rng.random() < 0.3:
        return PodShape.of(req, gpus=1, gpu_milli=rng.choice((250, 500)), **kw)
    return PodShape.of(req, gpus=gpus, **kw)


@pytest.mark.parametrize("seed", range(60))
def test_explain_matches_asking_node_by_node(seed: int) -> None:
    rng = random.Random(seed)
    snap = random_cluster(rng)
    for _ in range(8):
        shape = random_shape(rng)
        limit = rng.choice((2, 4, 20))
        assert explain(snap, shape, "w-0", limit) == explain_node_by_node(snap, shape, "w-0", limit)
