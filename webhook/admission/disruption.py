"""Evictions that do not burn a Job's retries.

A batch/v1 Job counts an evicted pod as a failure: with ``backoffLimit: 0`` one
eviction (corral's descheduler, a node drain, the kubelet under pressure) fails the
whole Job. Since Kubernetes 1.26 an eviction marks the pod with the condition
``DisruptionTarget``, and a ``podFailurePolicy`` rule ``Ignore`` on that condition
makes the Job controller replace the pod without counting it.

:func:`disruption_rule` puts that rule first, keeping the user's rules after it, on a
new Job whose pods have ``restartPolicy: Never`` (the API server accepts a
podFailurePolicy only then; a Job with ``OnFailure`` is left alone). Whether the Job's
own rules already send an evicted pod to Ignore first is decided by
:func:`gangplace.engine.owners.ignores_disruption`, the function the descheduler
reads the same Job with; then nothing is added (so a second admission adds nothing).
A podFailurePolicy holds at most 20 rules: a Job that has 20 gets a warning instead.

``spec.podReplacementPolicy`` (Kubernetes 1.29+): the API server allows only ``Failed``
next to a podFailurePolicy, and defaults ``TerminatingOrFailed`` on a Job without one
before the webhooks see it, so the webhook cannot tell the default from a user's
choice. With the rule it writes ``Failed``: any podFailurePolicy already makes the Job
controller wait for a pod to be terminal before replacing it, so ``Failed`` says what
the controller does anyway. Absent (1.28, where the field is dropped), it stays absent:
the server defaults ``Failed`` after the patch. Any other value is left for the API
server's validation to name, and the Job is left alone. Nothing on UPDATE (the
podFailurePolicy cannot change once the Job exists). Config: ``jobsIgnoreDisruptions``
(on by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gangplace.engine.owners import DISRUPTION_TARGET, ignores_disruption

__all__ = ["DISRUPTION_RULE", "MAX_RULES", "disruption_rule"]

DISRUPTION_RULE: Final = {
    "action": "Ignore",
    "onPodConditions": [{"type": DISRUPTION_TARGET, "status": "True"}],
}
# The API server refuses a podFailurePolicy with more rules than this.
MAX_RULES: Final = 20


def disruption_rule(job: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """(the Job's spec fields to set: podFailurePolicy with the rule first and, where
    the server would refuse it otherwise, podReplacementPolicy; warnings). None when
    the rule has no place there, or the Job's rules already ignore an eviction first."""
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return None, []
    template = spec.get("template")
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(pod_spec, dict) or pod_spec.get("restartPolicy") != "Never":
        return None, []
    policy: Any = spec.get("podFailurePolicy")
    own_policy = policy is not None
    if policy is None:
        policy = {}
    raw = policy.get("rules", []) if isinstance(policy, dict) else None
    if not isinstance(raw, list):
        return None, []  # malformed: the API server's validation names it
    rules: list[Any] = raw
    if ignores_disruption(rules):
        return None, []
    replacement = spec.get("podReplacementPolicy")
    if replacement not in (None, "Failed", "TerminatingOrFailed") or (
        replacement == "TerminatingOrFailed" and own_policy
    ):
        return None, []  # refused by the API server as it is: its message names the field
    if len(rules) >= MAX_RULES:
        return None, [
            f"corral: spec.podFailurePolicy has {len(rules)} rules, the most allowed: no rule "
            "ignoring evictions (DisruptionTarget) was added, so each eviction counts "
            "against backoffLimit"
        ]
    fields: dict[str, Any] = {
        "podFailurePolicy": {**policy, "rules": [dict(DISRUPTION_RULE), *rules]}
    }
    if replacement == "TerminatingOrFailed":
        fields["podReplacementPolicy"] = "Failed"
    return fields, []
