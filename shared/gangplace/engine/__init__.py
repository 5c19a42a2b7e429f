"""The pure engine: resource math, snapshots, feasibility, scoring, gang placement,
queues and fragmentation. No I/O and no Kubernetes client here."""

from .config import EngineConfig
from .feasibility import explain, fits, member_capacity, static_mask
from .gang import (
    Assignment,
    Gang,
    GangError,
    GangOptions,
    GangPlacement,
    TaskRole,
    place_gang,
)
from .model import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodShape,
    ShapeError,
    Taint,
    Toleration,
    shape_from_pod,
)
from .node_pod_records import NodeRecord, PodRecord, SnapshotError
from .quantity import QuantityError, parse_quantity, to_int, to_milli
from .queues import Queue, QueueState, WaitingGang, deserved_shares, dominant_share, order_waiting
from .resources import ResourceError, pod_requests
from .scoring import BinpackScorer, Scorer, SpreadScorer, select_node
from .single_pod import place_pod
from .snapshot import Snapshot

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
