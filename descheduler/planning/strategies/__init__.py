"""The planner's strategies, one module each, all of one signature: ``(ctx) -> moves``.

Each reads the shared :class:`~descheduler.planning.context.PlanContext` (with the moves
of the strategies before it) and makes its moves on the context's snapshot. They run
in the order of :data:`STRATEGIES`: release stale partial gangs, make room for waiting
gangs, and -- when none wait -- defragment.
"""

from collections.abc import Callable

from descheduler.planning.context import PlanContext
from descheduler.planning.plan_model import Move
from descheduler.planning.strategies.defragment import defragment
from descheduler.planning.strategies.make_room import make_room
from descheduler.planning.strategies.stale_gangs import release_stale_gangs

__all__ = ["STRATEGIES", "Strategy", "defragment", "make_room", "release_stale_gangs"]

Strategy = Callable[[PlanContext], list[Move]]

STRATEGIES: tuple[Strategy, ...] = (release_stale_gangs, make_room, defragment)
