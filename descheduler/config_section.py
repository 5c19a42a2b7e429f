"""What every section of the descheduler config is built on: a frozen pydantic model that
refuses unknown keys, and durations written as Go durations or seconds. The sections
live beside what they configure (the strategies' in their folders) and
:mod:`descheduler.config` composes them."""

from __future__ import annotations

from typing import Annotated, Any

from gangplace.engine.timeparse import TimeFormatError, parse_duration
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

__all__ = ["Duration", "Section"]


def _duration(v: Any) -> float:
    try:
        return parse_duration(v)
    except TimeFormatError as e:
        raise ValueError(str(e)) from None


# Seconds, written in YAML as "30m", "1h30m" or a number of seconds.
Duration = Annotated[float, BeforeValidator(_duration), Field(ge=0)]


class Section(BaseModel):
    """A config section: frozen, unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)
