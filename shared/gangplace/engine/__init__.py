"""The pure engine: resource math, snapshots, feasibility, scoring, gang placement,
queues and fragmentation. No I/O and no Kubernetes client here."""

from gangplace.engine.feasibility import explain, fits, member_capacity, static_mask
from gangplace.engine.gang import (
    Assignment,
    Gang,
    GangError,
    GangOptions,
    GangPlacement,
    TaskRole,
    place_gang,
)
from gangplace.engine.model import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodShape,
    ShapeError,
    Taint,
    Toleration,
    shape_from_pod,
)
from gangplace.engine.node_pod_records import NodeRecord, PodRecord, SnapshotError
from gangplace.engine.quantity import QuantityError, parse_quantity, to_int, to_milli
from gangplace.engine.queues import (
    Queue,
    QueueState,
    WaitingGang,
    deserved_shares,
    dominant_share,
    order_waiting,
)
from gangplace.engine.requests import ResourceError, pod_requests
from gangplace.engine.scoring import BinpackScorer, Scorer, SpreadScorer, select_node
from gangplace.engine.settings import EngineConfig
from gangplace.engine.single_pod import place_pod
from gangplace.engine.snapshot import Snapshot

__all__ = [
    "Assignment",
    "BinpackScorer",
    "EngineConfig",
    "Gang",
    "GangError",
    "GangOptions",
    "GangPlacement",
    "NodeRecord",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PodRecord",
    "PodShape",
    "QuantityError",
    "Queue",
    "QueueState",
    "ResourceError",
    "Scorer",
    "ShapeError",
    "Snapshot",
    "SnapshotError",
    "SpreadScorer",
    "Taint",
    "TaskRole",
    "Toleration",
    "WaitingGang",
    "deserved_shares",
    "dominant_share",
    "explain",
    "fits",
    "member_capacity",
    "order_waiting",
    "parse_quantity",
    "place_gang",
    "place_pod",
    "pod_requests",
    "select_node",
    "shape_from_pod",
    "static_mask",
    "to_int",
    "to_milli",
]
