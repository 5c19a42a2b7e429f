"""The public corral.dev keys users type, in one place (docs/annotations.md describes them).

They may sit on a workload, on its pod template, or on a bare pod, as annotations or
labels (annotations win when both are set).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from gangplace.engine import checkpoints, membership

from webhook.admission.validate import InvalidValue

if TYPE_CHECKING:
    from webhook.admission.roles import ResolvedRole

__all__ = [
    "CHECKPOINT_INTERVAL",
    "EVICTABLE",
    "GANG",
    "GANG_TIMEOUT",
    "MANAGED_BY",
    "MIN_AVAILABLE",
    "NAMESPACE_OPT_IN",
    "NAMESPACE_OPT_IN_VALUE",
    "NETWORK_TOPOLOGY",
    "QUEUE",
    "SKIP",
    "SPLIT_BY",
    "SPLIT_GANG",
    "USER_KEYS",
    "is_skipped",
    "templates_skipped",
    "user_value",
    "user_values",
]

GANG: Final = membership.ANNOTATION_GANG
MIN_AVAILABLE: Final = membership.ANNOTATION_MIN_AVAILABLE
QUEUE: Final = membership.ANNOTATION_QUEUE
GANG_TIMEOUT: Final = membership.ANNOTATION_GANG_TIMEOUT
SKIP: Final = membership.ANNOTATION_SKIP
EVICTABLE: Final = membership.ANNOTATION_EVICTABLE
NAMESPACE_OPT_IN: Final = membership.LABEL_GANG_SCHEDULING
NAMESPACE_OPT_IN_VALUE: Final = "enabled"

# How often a workload checkpoints: what a move of it loses (gangplace.engine.checkpoints).
CHECKPOINT_INTERVAL: Final = checkpoints.ANNOTATION_CHECKPOINT_INTERVAL

# The keys that make an object part of a gang when present.
USER_KEYS: Final = (GANG, MIN_AVAILABLE, QUEUE, GANG_TIMEOUT)

# Volcano 1.12+: the network tier a gang may span ("hard:2"), webhook.admission.volcano_fields.
NETWORK_TOPOLOGY: Final = "corral.dev/network-topology"

# Written by corral on the pod templates of a kind with one gang per instance (a
# LeaderWorkerSet's groups): the workload's gang name and the pod label that names the
# instance. A pod carrying both joins the gang ``<name>-<label value>``.
SPLIT_GANG: Final = "corral.dev/split-gang"
SPLIT_BY: Final = "corral.dev/split-by"

# Set on objects corral creates (PodGroups), as the Kubernetes recommended label.
MANAGED_BY: Final = ("app.kubernetes.io/managed-by", "corral")


def user_value(meta: Mapping[str, Any] | None, key: str) -> str | None:
    """``key`` from an object's metadata: the annotation, else the label, else None.

    A non-string value (a hand-written number in YAML never reaches us as one: the API
    server refuses it) is read as its string form so the validator can name it.
    """
    if not meta:
        return None
    ann = meta.get("annotations")
    if ann.__class__ is dict:
        v = ann.get(key)
        if v is not None:
            return v if v.__class__ is str else str(v)
    labels = meta.get("labels")
    if labels.__class__ is dict:
        v = labels.get(key)
        if v is not None:
            return v if v.__class__ is str else str(v)
    return None


_ALL_KEYS: Final = (*USER_KEYS, SKIP, NETWORK_TOPOLOGY, CHECKPOINT_INTERVAL)


def user_values(meta: Mapping[str, Any] | None) -> dict[str, str]:
    """Every corral.dev key set on an object (annotation over label), in one pass."""
    out: dict[str, str] = {}
    if not meta:
        return out
    for field in ("labels", "annotations"):  # annotations last: they win
        m = meta.get(field)
        if m.__class__ is dict:
            for k in _ALL_KEYS:
                v = m.get(k)
                if v is not None:
                    out[k] = v if v.__class__ is str else str(v)
    return out


_SKIP_ALLOWED = '"true" (the webhook leaves the object alone) or "false"'


def is_skipped(values: Mapping[str, str], where: str = "") -> bool:
    """``corral.dev/skip: "true"`` (case-insensitive) among an object's
    :func:`user_values`. Any other value than "true" or "false" ("yes", "1") is
    refused (InvalidValue): read as "not skipped" it would make a gang of an object
    its author meant to leave alone, without a word."""
    v = values.get(SKIP)
    if v is None:
        return False
    word = v.strip().lower()
    if word not in ("true", "false"):
        raise InvalidValue(f"{where}{SKIP}", v, 'is not "true" or "false"', _SKIP_ALLOWED)
    return word == "true"


def templates_skipped(roles: Sequence[ResolvedRole], strict: bool) -> bool:
    """``corral.dev/skip: "true"`` on every pod template skips the workload too: its
    pods are left alone, so a gang made of it would wait for members that never join.
    On some templates only, it is refused (InvalidValue) for the same reason, as is a
    value other than "true"/"false" -- when ``strict`` (at CREATE); an UPDATE of a
    workload made before is not refused for what it was created with."""
    marks: list[bool] = []
    for r in roles:
        try:
            marks.append(is_skipped(user_values(r.meta), f"{r.name} template: "))
        except InvalidValue:
            if strict:
                raise
            marks.append(False)
    if all(marks):
        return True
    if any(marks) and strict:
        on = ", ".join(r.name for r, m in zip(roles, marks, strict=True) if m)
        raise InvalidValue(
            SKIP,
            "true",
            f"is on some pod templates only ({on}): a gang cannot leave some of its members out",
            "on every pod template, or on the workload, to leave the whole workload alone",
        )
    return False
