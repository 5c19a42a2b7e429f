"""The ``yunikorn`` backend: an application id and queue label on every member and, for
a gang, its task groups (one per role) with the placeholder timeout; no gang object."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
from gangplace.engine import membership

from webhook.admission.backends.dialect import Dialect, GangInfo, Keys, TaskGroup

__all__ = ["YuniKorn", "task_groups_json"]


def task_groups_json(groups: Sequence[TaskGroup]) -> str:
    """The ``yunikorn.apache.org/task-groups`` value; byte-stable so that a second
    admission of the same object compares equal and patches nothing."""
    return orjson.dumps([g.to_json() for g in groups], option=orjson.OPT_SORT_KEYS).decode()


class YuniKorn(Dialect):
    name = "yunikorn"
    uses_task_groups = True

    def member_keys(
        self, gang: GangInfo, *, role: str | None, task_groups: Sequence[TaskGroup] | None
    ) -> Keys:
        labels = {membership.YUNIKORN_APP_ID_LABEL: gang.name}
        if gang.queue:
            labels[membership.YUNIKORN_QUEUE_LABEL] = gang.queue
        ann: dict[str, str] = {}
        if task_groups and role:
            ann[membership.YUNIKORN_TASK_GROUP_NAME] = role
            ann[membership.YUNIKORN_TASK_GROUPS] = task_groups_json(task_groups)
            if gang.timeout_seconds:
                ann[membership.YUNIKORN_POLICY] = (
                    f"placeholderTimeoutInSeconds={gang.timeout_seconds}"
                )
        return Keys(labels=labels, annotations=ann)
