"""The feature gates whose defaults change what the in-memory API server does with a Job,
per Kubernetes release: ``enabled("JobPodReplacementPolicy", release)``.

Each gate's stages follow ``pkg/features/kube_features.go`` of kubernetes/kubernetes at
each release (the versioned specs since v1.31) and the feature-gate pages of
kubernetes/website (``content/en/docs/reference/command-line-tools-reference/
feature-gates/``): the release a stage starts, and whether it is on by default there.
"""

from __future__ import annotations

from typing import Final

from tests.kubeapi.versions import Release

__all__ = ["GATES", "enabled"]

# gate -> [(first release of a stage, on by default in it)], oldest first.
GATES: Final[dict[str, tuple[tuple[Release, bool], ...]]] = {
    # alpha 1.28 (off), beta 1.29 (on), GA 1.34
    "JobPodReplacementPolicy": ((Release(1, 28), False), (Release(1, 29), True)),
    # alpha 1.28 (off), beta 1.29 (on), GA 1.33
    "JobBackoffLimitPerIndex": ((Release(1, 28), False), (Release(1, 29), True)),
    # alpha 1.30 (off), beta 1.32 (on), GA 1.35; the field does not exist before 1.30
    "JobManagedBy": ((Release(1, 30), False), (Release(1, 32), True)),
    # beta 1.26 (on), GA 1.31
    "JobPodFailurePolicy": ((Release(1, 26), True),),
    # KEP-5278 (kep.yaml: kube-apiserver's gate): alpha 1.34 (off), beta 1.35 (on): a
    # binding clears the pod's status.nominatedNodeName
    "ClearingNominatedNodeNameAfterBinding": ((Release(1, 34), False), (Release(1, 35), True)),
    # beta 1.26 (on), GA 1.31: an eviction sets the DisruptionTarget condition
    "PodDisruptionConditions": ((Release(1, 26), True),),
    # GA 1.27: a suspended Job never started may change its template's scheduling fields
    "JobMutableNodeSchedulingDirectives": ((Release(1, 23), True),),
    # The native gang API (KEP-4671; pkg/features/kube_features.go at v1.35-v1.37): alpha
    # 1.35 (off) serving scheduling.k8s.io/v1alpha1 Workload, v1alpha2 in 1.36, beta 1.37
    # (still off) serving v1alpha3 and v1beta1; GangScheduling is the scheduler plugin's.
    "GenericWorkload": ((Release(1, 35), False), (Release(1, 37), False)),
    "GangScheduling": ((Release(1, 35), False),),
    # alpha 1.36 (off): the Job controller writes Workload and PodGroup itself (KEP-5547)
    "WorkloadWithJob": ((Release(1, 36), False),),
    # alpha 1.37 (off): CompositePodGroup (scheduling.k8s.io/v1alpha3), KEP-6089
    "CompositePodGroup": ((Release(1, 37), False),),
    # alpha 1.36 (off), KEP-5710: a v1alpha2 pod group's disruptionMode, priorityClassName
    # and priority (v0.36.0 scheduling/v1alpha2/types.go, "+k8s:ifDisabled...forbidden");
    # from 1.37 those fields carry no gate (v0.37.0-beta.0 v1alpha3/types.go).
    "WorkloadAwarePreemption": ((Release(1, 36), False),),
    # alpha 1.36 (off), still alpha in 1.37, KEP-5732: schedulingConstraints
    "TopologyAwareWorkloadScheduling": ((Release(1, 36), False),),
}


def enabled(gate: str, release: Release) -> bool:
    """Whether ``gate`` is on by default on ``release`` (False before it exists)."""
    on = False
    for since, default in GATES[gate]:
        if release >= since:
            on = default
    return on
