"""The ``make_room`` section of the descheduler config: its keys, defaults and checks."""

from __future__ import annotations

from pydantic import Field

from descheduler.config_section import Section

__all__ = ["MakeRoomConfig"]


class MakeRoomConfig(Section):
    """Moves that let waiting gangs start."""

    enabled: bool = Field(default=True, description="make room for waiting gangs")
    max_victims_per_gang: int = Field(
        default=16, ge=1, description="victim gangs moved to make room for one waiting gang"
    )
    candidate_nodes: int = Field(
        default=48,
        ge=1,
        description="nodes examined exactly per waiting gang, after a vectorised shortlist",
    )
    max_waiting_gangs: int = Field(
        default=64, ge=1, description="waiting gangs considered per run, in DRF order"
    )
