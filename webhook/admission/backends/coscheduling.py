"""The ``coscheduling`` backend: the scheduler-plugins PodGroup
(``scheduling.x-k8s.io/v1alpha1``) and its pod-group label on every member; no queues."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gangplace.engine import membership

from webhook.admission.backends.dialect import Dialect, GangInfo, Keys, PodGroupKind, TaskGroup

__all__ = ["Coscheduling"]


class Coscheduling(Dialect):
    name = "coscheduling"
    podgroup = PodGroupKind("scheduling.x-k8s.io", "v1alpha1")
    has_queues = False

    def member_keys(
        self, gang: GangInfo, *, role: str | None, task_groups: Sequence[TaskGroup] | None
    ) -> Keys:
        return Keys(labels={membership.COSCHED_POD_GROUP_LABEL: gang.name})

    def podgroup_body(
        self,
        gang: GangInfo,
        namespace: str,
        priority_class: str | None,
        min_resources: Mapping[str, str],
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {"minMember": gang.min_member}
        if min_resources:
            spec["minResources"] = dict(min_resources)
        if gang.timeout_seconds:
            spec["scheduleTimeoutSeconds"] = gang.timeout_seconds
        return self._podgroup_object(gang, namespace, spec)
