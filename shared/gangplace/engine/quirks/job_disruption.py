"""Evictions that do not burn a batch/v1 Job's retries: the Job's hooks in the registry
(:data:`gangplace.engine.kinds.KINDS`), the webhook's rule and the descheduler's reading
of it. Pure: no I/O.

A batch/v1 Job counts an evicted pod as a failure: with ``backoffLimit: 0`` one
eviction (corral's descheduler, a node drain, the kubelet under pressure) fails the
whole Job. Since Kubernetes 1.26 an eviction marks the pod with the condition
``DisruptionTarget``, and a ``podFailurePolicy`` rule ``Ignore`` on that condition
makes the Job controller replace the pod without counting it.

:func:`disruption_rule` puts that rule first, keeping the user's rules after it, on a
new Job whose pods have ``restartPolicy: Never`` (the API server accepts a
podFailurePolicy only then; a Job with ``OnFailure`` is left alone). Whether the Job's
own rules already send an evicted pod to Ignore first is decided by
:func:`ignores_disruption`, the function the descheduler reads the same Job with
(:func:`gangplace.engine.owners.workload_from_json`); then nothing is added (so a
second admission adds nothing).
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

from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = [
    "DISRUPTION_RULE",
    "DISRUPTION_TARGET",
    "MAX_RULES",
    "disruption_rule",
    "ignores_disruption",
]

# The pod condition an eviction sets (Kubernetes 1.26+).
DISRUPTION_TARGET: Final = "DisruptionTarget"

DISRUPTION_RULE: Final = {
    "action": "Ignore",
    "onPodConditions": [{"type": DISRUPTION_TARGET, "status": "True"}],
}
# The API server refuses a podFailurePolicy with more rules than this.
MAX_RULES: Final = 20


def ignores_disruption(rules: Sequence[Any] | None) -> bool:
    """Whether a Job's podFailurePolicy ignores a pod disrupted by an eviction: a rule
    ``{action: Ignore, onPodConditions: [{type: DisruptionTarget}]}`` that no earlier
    rule can pre-empt. Rules apply first match first, and an exit-code rule may match
    the evicted container's exit (143 after SIGTERM), so any onExitCodes rule before
    it, or an earlier rule of another action on DisruptionTarget, makes it False."""
    for rule in rules or ():
        if not isinstance(rule, dict):
            return False
        conds = rule.get("onPodConditions")
        if rule.get("onExitCodes") is not None or not isinstance(conds, list):
            return False
        hits = any(
            isinstance(c, dict)
            and c.get("type") == DISRUPTION_TARGET
            and str(c.get("status") or "True") == "True"
            for c in conds
        )
        if hits:
            return rule.get("action") == "Ignore"
    return False


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
