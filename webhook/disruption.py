"""Evictions that do not burn a Job's retries.

A batch/v1 Job counts an evicted pod as a failure: with ``backoffLimit: 0`` one
eviction (corral's descheduler, a node drain, the kubelet under pressure) fails the
whole Job. Since Kubernetes 1.26 an eviction marks the pod with the condition
``DisruptionTarget``, and a ``podFailurePolicy`` rule ``Ignore`` on that condition
makes the Job controller replace the pod without counting it.

:func:`disruption_rule` adds that rule first, keeping the user's rules after it, to a
Job whose pods have ``restartPolicy: Never`` (the API server accepts a podFailurePolicy
only then). It adds nothing when a rule already ignores ``DisruptionTarget`` (so a
second admission adds nothing), and nothing on UPDATE (the field cannot change once
the Job exists). Config: ``jobsIgnoreDisruptions`` (on by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["DISRUPTION_RULE", "MAX_RULES", "disruption_rule", "ignores_disruptions"]

DISRUPTION_RULE: Final = {
    "action": "Ignore",
    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
}
# The API server refuses a podFailurePolicy with more rules than this.
MAX_RULES: Final = 20


def _ignores(rule: Any) -> bool:
    if not isinstance(rule, dict) or rule.get("action") != "Ignore":
        return False
    conds = rule.get("onPodConditions")
    if not isinstance(conds, list):
        return False
    return any(
        isinstance(c, dict)
        and c.get("type") == "DisruptionTarget"
        and c.get("status", "True") == "True"
        for c in conds
    )


def ignores_disruptions(job_spec: Mapping[str, Any]) -> bool:
    """Whether a Job's podFailurePolicy already ignores pods failed by a disruption."""
    policy = job_spec.get("podFailurePolicy")
    rules = policy.get("rules") if isinstance(policy, dict) else None
    return isinstance(rules, list) and any(_ignores(r) for r in rules)


def disruption_rule(job: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """(the Job's podFailurePolicy with the rule put first, warnings); None when the
    rule has no place there (or is there already)."""
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return None, []
    template = spec.get("template")
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(pod_spec, dict) or pod_spec.get("restartPolicy") != "Never":
        return None, []
    policy = spec.get("podFailurePolicy")
    if policy is None:
        return {"rules": [dict(DISRUPTION_RULE)]}, []
    rules = policy.get("rules") if isinstance(policy, dict) else None
    if not isinstance(rules, list):
        return None, []  # malformed: the API server's validation names it
    if any(_ignores(r) for r in rules):
        return None, []
    if len(rules) >= MAX_RULES:
        return None, [
            f"corral: spec.podFailurePolicy has {len(rules)} rules, the most allowed: no rule "
            "ignoring evictions (DisruptionTarget) was added, so each eviction counts "
            "against backoffLimit"
        ]
    return {**policy, "rules": [dict(DISRUPTION_RULE), *rules]}, []
