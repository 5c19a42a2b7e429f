"""The planner's input, built from a Kubernetes List or from informers."""

from descheduler.planning.state.build import (
    ClusterState,
    StateError,
    state_from_list,
    state_from_objects,
)
from descheduler.planning.state.ledger import (
    ANNOTATION_LAST_MOVED,
    ANNOTATION_ROOM_MADE,
    MOVE_LEDGER,
    EvictedPod,
    MoveLedger,
    RunRecord,
    ledger_from_json,
)
from descheduler.planning.state.shares import GPU, drf_queue, drf_resources

__all__ = [
    "ANNOTATION_LAST_MOVED",
    "ANNOTATION_ROOM_MADE",
    "GPU",
    "MOVE_LEDGER",
    "ClusterState",
    "EvictedPod",
    "MoveLedger",
    "RunRecord",
    "StateError",
    "drf_queue",
    "drf_resources",
    "ledger_from_json",
    "state_from_list",
    "state_from_objects",
]
