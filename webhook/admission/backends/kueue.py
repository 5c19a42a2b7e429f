"""The ``kueue`` backend: Kueue admits a workload whole through its own integrations, so
corral writes the queue on the workload and leaves its children and their pods alone; a
bare pod gang is a Kueue plain pod group. No gang object, no per-gang timeout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gangplace.engine import membership

from webhook.admission.backends.dialect import Dialect, GangInfo, Keys, TaskGroup
from webhook.admission.decision import cap
from webhook.admission.keys import MIN_AVAILABLE

if TYPE_CHECKING:
    from webhook.admission.validate import MinAvailable

__all__ = ["Kueue"]


class Kueue(Dialect):
    name = "kueue"
    templates_carry_keys = False
    no_timeout = "Kueue has no per-gang timeout key"

    def left_to_parent(self, *, pod: bool) -> str | None:
        # A child (a JobSet's Job): Kueue manages the parent, which carries the queue.
        if pod:
            return "pod of a workload that Kueue manages"
        return "owned by a workload that Kueue manages"

    def member_keys(
        self, gang: GangInfo, *, role: str | None, task_groups: Sequence[TaskGroup] | None
    ) -> Keys:
        # A plain pod group: every pod names the group and its total count. A gang of
        # one is just a pod in a queue.
        labels: dict[str, str] = {}
        ann: dict[str, str] = {}
        if gang.queue:
            labels[membership.KUEUE_QUEUE_LABEL] = gang.queue
        total = gang.size if gang.size is not None else gang.min_member
        if total > 1:
            labels[membership.KUEUE_POD_GROUP_LABEL] = gang.name
            ann[membership.KUEUE_TOTAL_COUNT] = str(total)
        return Keys(labels=labels, annotations=ann)

    def workload_keys(self, gang: GangInfo) -> Keys:
        return Keys(labels={membership.KUEUE_QUEUE_LABEL: gang.queue} if gang.queue else {})

    def unapplied_minimum(
        self, kind: str, min_member: int, size: int, given: MinAvailable | None
    ) -> list[str]:
        """What a Kueue workload cannot say: Kueue admits a workload whole."""
        if min_member >= size:
            return []
        if given is not None:
            shown = given.count if given.count is not None else f"{given.percent}%"
            key = f'{MIN_AVAILABLE} "{shown}"'
        else:
            key = f"the {kind} minMember of {min_member}"
        text = (
            f"corral: {key} is not applied: Kueue admits a workload whole (all {size} "
            "pods) and has no key for a smaller minimum"
        )
        return [cap(text)]
