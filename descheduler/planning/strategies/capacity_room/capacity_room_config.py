"""The ``capacity_room`` section of the descheduler config: its keys, defaults and checks."""

from __future__ import annotations

from pydantic import Field

from descheduler.config_section import Duration, Section

__all__ = ["CapacityRoomConfig"]


class CapacityRoomConfig(Section):
    """Room for a waiting gang that capacity blocks -- no move lets it start because
    what would make room fits nowhere else -- by suspending workloads without placing
    them again (opt-in). Only workloads with a suspend switch, of lower priority (and,
    with equal_priority, smaller ones of its own), least work at risk first, within the
    limits and caps. The room is held for the gang until it binds or hold_for ends:
    meanwhile corral resumes no workload of lower priority than the gang that it
    suspended, and plans the room for the gang, not for waiting gangs of its priority or
    lower. What was suspended for the gang is resumed first, once it is bound, gone,
    or the hold ends (hold_for, not moves.resume_after). With nominate, the kube-scheduler
    holds it too, against every pod of the gang's priority or lower."""

    enabled: bool = Field(
        default=False,
        description="suspend lower-priority workloads for a gang that capacity blocks",
    )
    after: Duration = Field(
        default=3600.0,
        description="only for a gang that has waited longer than this (since it was made)",
    )
    equal_priority: bool = Field(
        default=False,
        description="also suspend workloads of the gang's own priority that hold fewer GPUs "
        "than it needs (never one that started on room made for it within the cool-down)",
    )
    hold_for: Duration = Field(
        default=900.0,
        gt=0,
        description="how long the room is held for the gang: if it is not bound by then, "
        "what was suspended for it is resumed (replaces moves.resume_after for them)",
    )
    nominate: bool = Field(
        default=False,
        description="also hold the room through the scheduler: write each waiting pod's "
        "status.nominatedNodeName (the node the plan put it on) while the hold lasts, and "
        "clear it when the hold ends unbound; only for gangs the kube-scheduler places "
        "(native gangs, coscheduling, Kueue), never Volcano, YuniKorn or KAI",
    )
