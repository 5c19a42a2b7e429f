"""The ``exact_moves`` section of the descheduler config: its keys, defaults and checks."""

from __future__ import annotations

from gangplace.mover.hood_moves import DEFAULT_NODE_LIMIT
from pydantic import Field

from descheduler.config_section import Section

__all__ = ["ExactMovesConfig"]


class ExactMovesConfig(Section):
    """The exact neighbourhood moves (the mover the trace replay measures), tried where
    the planner's own search finds no move: for a waiting gang make_room cannot serve,
    and, when defragmenting, for the typical GPU shapes that still fit nowhere. The same
    rules as every move: whole gangs, priority, move method, limits and budgets."""

    enabled: bool = Field(
        default=True, description="try the exact moves where the planner's search finds none"
    )
    max_pods: int = Field(
        default=8, ge=0, description="pods moved to place one pod of a gang or typical shape"
    )
    node_limit: int = Field(
        default=DEFAULT_NODE_LIMIT,
        ge=1,
        description="branch-and-bound nodes per neighbourhood solve: a limit of work, not of "
        "seconds, so a plan is the same on a busy machine and a quiet one",
    )
    max_rooms: int = Field(
        default=8,
        ge=0,
        description="defragment: pods of typical shapes that fit nowhere room is made for per "
        "run, most frequent shape first",
    )
