"""The planner's input, built from a Kubernetes List or from informers."""

from gangplace.engine.selectors import LabelSelector, SelectorError

from .build import ClusterState, state_from_list, state_from_objects
from .objects import ANNOTATION_LAST_MOVED, GPU, PdbInfo, PodGroupInfo, StateError

__all__ = [
    "ANNOTATION_LAST_MOVED",
    "GPU",
    "ClusterState",
    "LabelSelector",
    "PdbInfo",
    "PodGroupInfo",
    "SelectorError",
    "StateError",
    "state_from_list",
    "state_from_objects",
]
