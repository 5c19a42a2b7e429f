"""A JobSet's replicated jobs as subgroups of its gang (the JobSet entry's
``subgroups``): each replicated job with more than one replica is a group of Jobs told
apart by their ``jobset.sigs.k8s.io/job-index`` label, each Job's parallelism pods.

JobSet's pod labels from kubernetes-sigs/jobset ``api/jobset/v1alpha2/jobset_types.go``;
the webhook writes them as a Volcano 1.14+ PodGroup's ``subGroupPolicy``
(``webhook.admission.volcano_fields``). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["jobset_subgroups"]

_JOBSET_RJOB: Final = "jobset.sigs.k8s.io/replicatedjob-name"
_JOBSET_INDEX: Final = "jobset.sigs.k8s.io/job-index"


def jobset_subgroups(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The subgroups of a JobSet (its replicated jobs with more than one replica):
    name, subGroupSize, replicas, labelSelector and matchLabelKeys."""
    spec = obj.get("spec")
    rjobs = spec.get("replicatedJobs") if isinstance(spec, dict) else None
    out: list[dict[str, Any]] = []
    for rj in rjobs if isinstance(rjobs, list) else ():
        if not isinstance(rj, dict):
            continue
        name, replicas = rj.get("name"), rj.get("replicas", 1)
        template = rj.get("template")
        job_spec = template.get("spec") if isinstance(template, dict) else None
        size = job_spec.get("parallelism", 1) if isinstance(job_spec, dict) else 1
        if not isinstance(name, str) or not isinstance(replicas, int) or replicas < 2:
            continue
        if not isinstance(size, int) or size < 1:
            continue
        out.append(
            {
                "name": name,
                "subGroupSize": size,
                "replicas": replicas,
                "labelSelector": {"matchLabels": {_JOBSET_RJOB: name}},
                "matchLabelKeys": [_JOBSET_INDEX],
            }
        )
    return out
