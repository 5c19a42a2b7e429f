"""The strategies a plan runs, in order: release stale partial gangs, make room for
waiting gangs, and -- when none wait -- defragment."""

from collections.abc import Callable

from descheduler.planning.context import PlanContext
from descheduler.planning.plan_model import Move
from descheduler.planning.strategies.defragment.defragment import defragment
from descheduler.planning.strategies.make_room.make_room import make_room
from descheduler.planning.strategies.stale_gangs.stale_gangs import release_stale_gangs

__all__ = ["STRATEGIES", "Strategy"]

Strategy = Callable[[PlanContext], list[Move]]

STRATEGIES: tuple[Strategy, ...] = (release_stale_gangs, make_room, defragment)
