"""The descheduler's public names: what other programs (``kubectl corral``) may use.

Everything else in the package is internal and may change without notice; the import
contracts in ``pyproject.toml`` (``make lint``) hold ``kubectl_corral`` to this module.
"""

from __future__ import annotations

from descheduler.config import (
    ConfigError,
    DeschedulerConfig,
    EvictionRules,
    SchedulingConfig,
    load_config,
)
from descheduler.dump_state import DUMP_ERRORS, DumpState, dump_objects, read_dump
from descheduler.planning.gang_demand import Demand, demand_of
from descheduler.planning.gang_views import GangView, build_views
from descheduler.planning.plan_model import Move, Plan
from descheduler.planning.planner import fragmentation_now, move_verdict, plan
from descheduler.planning.queue_order import waiting_order
from descheduler.planning.state import ClusterState, StateError, state_from_objects
from descheduler.render import render_plan
from descheduler.running.process import RunOptions, run_descheduler

__all__ = [
    "DUMP_ERRORS",
    "ClusterState",
    "ConfigError",
    "Demand",
    "DeschedulerConfig",
    "DumpState",
    "EvictionRules",
    "GangView",
    "Move",
    "Plan",
    "RunOptions",
    "SchedulingConfig",
    "StateError",
    "build_views",
    "demand_of",
    "dump_objects",
    "fragmentation_now",
    "load_config",
    "move_verdict",
    "plan",
    "read_dump",
    "render_plan",
    "run_descheduler",
    "state_from_objects",
    "waiting_order",
]
