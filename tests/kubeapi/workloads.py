"""Defaults the API server gives the workload kinds it serves besides Jobs and pods:
batch/v1 CronJob and apps/v1 Deployment, StatefulSet and ReplicaSet.

Followed from kubernetes ``pkg/apis/apps/v1/defaults.go`` and
``pkg/apis/batch/v1/defaults.go`` (v1.28.7; unchanged in what is modelled through
v1.32): the fields a GET shows that the user did not write. Their pod templates get the
pod spec defaults every template gets (:mod:`.defaults`). StatefulSetAutoDeletePVC is
beta and on from 1.27, so ``persistentVolumeClaimRetentionPolicy`` is defaulted at every
version served.
"""

from __future__ import annotations

from typing import Any

from tests.kubeapi.defaults import _default_pod_template_spec

Json = dict[str, Any]

__all__ = ["default_workload"]


def _template(spec: Json) -> None:
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        template.setdefault("metadata", {}).setdefault("creationTimestamp", None)
        _default_pod_template_spec(template.setdefault("spec", {}))


def _deployment(spec: Json) -> None:
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _template(spec)


def _stateful_set(spec: Json) -> None:
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {})
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
        strategy.setdefault("rollingUpdate", {})
    if strategy["type"] == "RollingUpdate" and isinstance(strategy.get("rollingUpdate"), dict):
        strategy["rollingUpdate"].setdefault("partition", 0)
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    retention.setdefault("whenDeleted", "Retain")
    retention.setdefault("whenScaled", "Retain")
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    _template(spec)


def _replica_set(spec: Json) -> None:
    spec.setdefault("replicas", 1)
    _template(spec)


def _cron_job(spec: Json) -> None:
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_template = spec.setdefault("jobTemplate", {})
    if isinstance(job_template, dict):
        job_template.setdefault("metadata", {}).setdefault("creationTimestamp", None)
        _template(job_template.setdefault("spec", {}))


_DEFAULTS = {
    ("apps", "deployments"): _deployment,
    ("apps", "statefulsets"): _stateful_set,
    ("apps", "replicasets"): _replica_set,
    ("batch", "cronjobs"): _cron_job,
}


def default_workload(group: str, plural: str, obj: Json) -> bool:
    """Default a new object of one of these kinds in place (an empty status, as a new
    object has); False for any other kind."""
    fill = _DEFAULTS.get((group, plural))
    if fill is None:
        return False
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict):
        fill(spec)
    obj["status"] = {}
    return True
