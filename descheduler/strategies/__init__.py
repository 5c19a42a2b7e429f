"""The planner's strategies, one module each, run in this order: release stale partial
gangs, make room for waiting gangs, and -- when none wait -- defragment."""

from .defragment import defragment
from .make_room import make_room
from .stale_gangs import release_stale_gangs

__all__ = ["defragment", "make_room", "release_stale_gangs"]
