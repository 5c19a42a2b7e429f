"""A batch/v1 Job the Job controller makes a gang of itself (the Job entry's
``self_ganged``): KEP-5547, WorkloadWithJob (where the runtime PodGroup is served)
gangs an Indexed Job whose parallelism equals its completions, so
the webhook's native backend leaves it alone. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["indexed_job_self_ganged"]


def indexed_job_self_ganged(obj: Mapping[str, Any]) -> str | None:
    """Why the Job controller makes the gang of the Job ``obj`` (where the runtime
    PodGroup is served), or None when it does not."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("completionMode") != "Indexed":
        return None
    par, comp = spec.get("parallelism", 1), spec.get("completions")
    if isinstance(comp, int) and par == comp:
        return "an Indexed Job with parallelism == completions: the Job controller makes its gang"
    return None
