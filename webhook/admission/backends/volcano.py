"""The ``volcano`` backend: Volcano's PodGroup (``scheduling.volcano.sh/v1beta1``), its
group-name, queue and waiting-time annotations on every member, and the PodGroup fields
of Volcano 1.12+ where the served schema has them (:mod:`webhook.admission.volcano_fields`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gangplace.engine import membership

from webhook.admission.backends.dialect import Dialect, GangInfo, Keys, PodGroupKind, TaskGroup
from webhook.admission.validate import format_duration
from webhook.admission.volcano_fields import spec_fields

__all__ = ["Volcano"]


class Volcano(Dialect):
    name = "volcano"
    podgroup = PodGroupKind("scheduling.volcano.sh", "v1beta1")
    writes_topology = True

    def member_keys(
        self, gang: GangInfo, *, role: str | None, task_groups: Sequence[TaskGroup] | None
    ) -> Keys:
        ann = {membership.VOLCANO_GROUP_NAME: gang.name}
        if gang.queue:
            ann[membership.VOLCANO_QUEUE_NAME] = gang.queue
        if gang.timeout_seconds:
            ann[membership.VOLCANO_SLA_WAITING_TIME] = format_duration(gang.timeout_seconds)
        return Keys(annotations=ann)

    def gang_fields(
        self,
        topology: Mapping[str, Any] | None,
        subgroups: list[dict[str, Any]],
        whole: bool,
    ) -> tuple[dict[str, Any] | None, list[str]]:
        """networkTopology and, for a workload of repeated groups, subGroupPolicy."""
        return spec_fields(self.served, topology, subgroups, whole)

    def podgroup_body(
        self,
        gang: GangInfo,
        namespace: str,
        priority_class: str | None,
        min_resources: Mapping[str, str],
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {"minMember": gang.min_member}
        if gang.queue:
            spec["queue"] = gang.queue
        if priority_class:
            spec["priorityClassName"] = priority_class
        if min_resources:
            spec["minResources"] = dict(min_resources)
        if gang.spec_extra:
            spec.update(gang.spec_extra)
        timeout = gang.timeout_seconds
        ann = {membership.VOLCANO_SLA_WAITING_TIME: format_duration(timeout)} if timeout else None
        return self._podgroup_object(gang, namespace, spec, ann)
