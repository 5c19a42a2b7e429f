"""What admission decides about one review, before it is an answer: the object left
unchanged (with why), denied (with a status code and a message), or patched (the edits,
warnings, the gang objects wanted, owner hints and a Job's disruption rule). Only
:func:`webhook.admission.entry.admit` turns a decision into the AdmissionReview's response
(:mod:`webhook.admission.responses`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from webhook.admission.patch import Editor
from webhook.podgroup_intent import OwnerHint, PodGroupIntent

__all__ = ["Decision", "Denied", "JobRule", "Patched", "Unchanged", "cap"]

# Warnings longer than this may be cut by the API server.
_WARNING_MAX = 250

# The Job spec fields that put the disruption rule first (podFailurePolicy, and
# podReplacementPolicy where needed; None: unchanged), warnings
# (gangplace.engine.quirks.job_disruption).
JobRule = tuple[dict[str, Any] | None, list[str]]


@dataclass(frozen=True, slots=True)
class Unchanged:
    """Allowed as it is. ``outcome``: unchanged, skipped (a skip key or namespace) or
    unhandled (a kind not in the table), for the metrics."""

    reason: str
    outcome: Literal["unchanged", "skipped", "unhandled"] = "unchanged"


@dataclass(frozen=True, slots=True)
class Denied:
    """Refused: 400 for a bad user value, 403 for a gang that can never start."""

    code: Literal[400, 403]
    message: str


@dataclass(frozen=True, slots=True)
class Patched:
    """Allowed with the edits made in ``edits`` (None: none) and the Job rule's fields
    (set whole), the warnings, and what the reconciler makes or learns off the request
    path."""

    edits: Editor | None
    warnings: Sequence[str] = ()
    intents: Sequence[PodGroupIntent] = ()
    hints: Sequence[OwnerHint] = ()
    job_rule: JobRule | None = None


Decision = Unchanged | Denied | Patched


def cap(text: str) -> str:
    """A warning cut to what the API server keeps."""
    return text if len(text) <= _WARNING_MAX else text[: _WARNING_MAX - 3] + "..."
