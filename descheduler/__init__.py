"""corral's descheduler: a pure planner that moves whole gangs to make room for the
gangs that wait (or to defragment), and the runner that carries a plan out."""

from gangplace.config_errors import ConfigError

from descheduler.config import DeschedulerConfig, load_config, parse_config
from descheduler.planning.plan_model import LargestFit, Move, Plan, PodMove, Unserved
from descheduler.planning.planner import apply_moves, plan
from descheduler.planning.state import ClusterState, StateError, state_from_list, state_from_objects

__all__ = [
    "ClusterState",
    "ConfigError",
    "DeschedulerConfig",
    "LargestFit",
    "Move",
    "Plan",
    "PodMove",
    "StateError",
    "Unserved",
    "apply_moves",
    "load_config",
    "parse_config",
    "plan",
    "state_from_list",
    "state_from_objects",
]
