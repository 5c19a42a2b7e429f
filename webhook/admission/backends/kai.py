"""The ``kai`` backend: the keys NVIDIA's KAI-Scheduler reads for gangs and queues.

KAI makes its PodGroups (``scheduling.run.ai/v2alpha2``) itself: its pod grouper finds
a pod's top owner, names the group ``pg-<owner>-<uid>`` and writes it into the pod's
``pod-group-name`` annotation, replacing any other value. A PodGroup of corral's would
therefore be a second group its pods never join; corral writes what the grouper reads
instead, on the top owner (the workload, or a bare pod): the queue label and the
minimum-member override. Read from kai-scheduler/KAI-Scheduler (main, 2026):
``pkg/podgrouper/pod_controller.go`` (``assignPodToGroupAndSubGroup``),
``pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go``
(``CalcPodGroupQueue``: the owner's label, then the pod's, then ``default-queue``),
``pkg/podgrouper/podgrouper/plugins/minmember/min_member.go`` and
``plugins/constants/constants.go`` (the keys), ``pkg/common/constants`` (the
``kai-scheduler`` name, ``pod-group-name``).
"""

from __future__ import annotations

from collections.abc import Sequence

from gangplace.engine.membership import KAI_MIN_MEMBER, KAI_POD_GROUP, KAI_QUEUE_LABEL

from webhook.admission.backends.dialect import Dialect, GangInfo, Keys, TaskGroup

__all__ = ["KAI_MIN_MEMBER", "KAI_POD_GROUP", "KAI_QUEUE_LABEL", "Kai"]


class Kai(Dialect):
    name = "kai"
    no_timeout = "KAI-Scheduler has no per-gang timeout key"

    def member_keys(
        self, gang: GangInfo, *, role: str | None, task_groups: Sequence[TaskGroup] | None
    ) -> Keys:
        labels = {KAI_QUEUE_LABEL: gang.queue} if gang.queue else {}
        ann: dict[str, str] = {}
        if gang.size is None:
            # A pod (its size unknown to the request): a bare pod is its own top owner.
            ann[KAI_MIN_MEMBER] = str(gang.min_member)
        return Keys(labels=labels, annotations=ann)

    def workload_keys(self, gang: GangInfo) -> Keys:
        labels = {KAI_QUEUE_LABEL: gang.queue} if gang.queue else {}
        return Keys(labels=labels, annotations={KAI_MIN_MEMBER: str(gang.min_member)})
