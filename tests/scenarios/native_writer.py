"""What corral writes for a workload on a cluster with the native gang API, in the
release's dialect, until the webhook's ``kubernetes`` backend writes it itself: the
Workload (and PodGroups, and on 1.37 a CompositePodGroup) for a PyTorchJob or a
LeaderWorkerSet, and each pod's reference to its group (what the pod's CREATE patch
sets; the field is immutable, so it must be there at CREATE).

The backend's tests can compare its writes with these: ``objects_for(workload)`` is the
list of ``(apiVersion, plural, object)`` to create, ``reference(pod)`` the pod with its
``spec.workloadRef`` / ``spec.schedulingGroup`` set.

The gangs:

- PyTorchJob: all or nothing across master and workers. On 1.35 and 1.36 one group
  ``job`` whose minCount is every replica; on 1.37 a group per replica type (``master``,
  ``worker``) under one CompositePodGroup that needs both.
- LeaderWorkerSet: one gang per LWS group (leader and workers, ``size`` pods): on 1.35 a
  Workload group ``group`` with the group index as ``podGroupReplicaKey``; from 1.36 a
  PodGroup ``<lws>-g<index>`` each.
"""

from __future__ import annotations

from typing import Any

from tests.kubeapi.native_objects import Group, gang_objects, group_name, refer
from tests.kubeapi.versions import Release, Versions

Json = dict[str, Any]

__all__ = ["NativeGangWriter"]

PT_TYPE = "training.kubeflow.org/replica-type"
PT_JOB = "training.kubeflow.org/job-name"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"


class NativeGangWriter:
    """The native gang objects and pod references for ``versions``' release."""

    def __init__(self, versions: Versions) -> None:
        self.versions = versions
        self.composite = versions.kube >= Release(1, 37)

    def objects_for(self, workload: Json) -> list[tuple[str, str, Json]]:
        kind, spec = workload["kind"], workload.get("spec") or {}
        name = workload["metadata"]["name"]
        if kind == "PyTorchJob":
            replicas = {
                t.lower(): int(r.get("replicas", 1))
                for t, r in (spec.get("pytorchReplicaSpecs") or {}).items()
            }
            if self.composite:
                groups = [Group(t, n) for t, n in sorted(replicas.items())]
                return gang_objects(
                    self.versions, name, groups, owner=workload, composite_min_groups=len(groups)
                )
            return gang_objects(
                self.versions, name, [Group("job", sum(replicas.values()))], owner=workload
            )
        if kind == "LeaderWorkerSet":
            size = int((spec.get("leaderWorkerTemplate") or {}).get("size", 1))
            if self.versions.kube < Release(1, 36):
                return gang_objects(self.versions, name, [Group("group", size)], owner=workload)
            groups = [Group(f"g{i}", size) for i in range(int(spec.get("replicas", 1)))]
            return gang_objects(self.versions, name, groups, owner=workload)
        raise ValueError(f"kind {kind!r}: expected PyTorchJob or LeaderWorkerSet")

    def reference(self, pod: Json) -> Json:
        labels = pod["metadata"].get("labels") or {}
        if PT_JOB in labels:
            group = labels[PT_TYPE] if self.composite else "job"
            return refer(self.versions, pod, labels[PT_JOB], group)
        if LWS_NAME in labels:
            index = labels[LWS_GROUP]
            if self.versions.kube < Release(1, 36):
                return refer(self.versions, pod, labels[LWS_NAME], "group", replica_key=index)
            return refer(self.versions, pod, labels[LWS_NAME], f"g{index}")
        return pod

    @staticmethod
    def pod_group(workload: str, group: str) -> str:
        return group_name(workload, group)
