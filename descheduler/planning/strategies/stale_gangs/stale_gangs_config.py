"""The ``stale_gangs`` section of the descheduler config: its keys, defaults and checks."""

from __future__ import annotations

from pydantic import Field

from descheduler.config_section import Duration, Section

__all__ = ["StaleGangsConfig"]


class StaleGangsConfig(Section):
    """Releasing partial gangs that waited past their gang timeout."""

    enabled: bool = Field(default=True, description="release stale partial gangs")
    default_timeout: Duration = Field(
        default=1800.0, description="when a gang names no timeout (corral.dev/gang-timeout)"
    )
