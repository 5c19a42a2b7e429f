"""The order in which the scheduler serves the waiting gangs (Volcano's DRF order over
queue shares), as the planner serves them: ``kubectl corral gangs`` places the gangs
that fit now one after another in this order to tell which compete for the same room."""

from __future__ import annotations

from descheduler.config import DeschedulerConfig
from descheduler.planning.context import PlanContext
from descheduler.planning.state import ClusterState

__all__ = ["waiting_order"]


def waiting_order(state: ClusterState, config: DeschedulerConfig | None = None) -> list[str]:
    """The keys (``ns/gang``) of the waiting gangs, first served first: the order of
    the planner's :attr:`PlanContext.demands`. Gangs whose workload is suspended do not
    wait, and are not listed."""
    ctx = PlanContext.build(state, config or DeschedulerConfig())
    return [d.key for d in ctx.demands]
