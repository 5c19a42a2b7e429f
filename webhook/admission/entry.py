"""The one entry point of admission: :func:`admit`, an AdmissionReview in, an answer out
(see the package's docstring for the rules and the modules by job)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.admission import keys as K
from webhook.admission.cluster_fit import ClusterCapacity
from webhook.admission.gang_decision import Invalid
from webhook.admission.mutation import foreign_scheduler
from webhook.admission.native_gangs import Served
from webhook.admission.patch import Editor, PatchError
from webhook.admission.pods import admit_pod
from webhook.admission.responses import JobRule, allow, deny, finish
from webhook.admission.review import (
    API_VERSION,
    AdmitResult,
    ReviewError,
    decode_patch,
    parse_request,
)
from webhook.admission.roles import WorkloadError
from webhook.admission.validate import InvalidValue, check_checkpoint_interval
from webhook.admission.workloads import admit_workload
from webhook.config import WebhookConfig

__all__ = ["API_VERSION", "AdmitResult", "ReviewError", "admit", "decode_patch"]


def admit(
    review: Any,
    cluster: ClusterCapacity | None,
    config: WebhookConfig,
    served: Served | None = None,
) -> AdmitResult:
    """Answer one AdmissionReview (admission.k8s.io/v1).

    ``cluster`` is the current view (None: no feasibility checks); ``served``, what the
    API server serves (found once at start; the native gang API's version). Raises ReviewError
    when ``review`` is not an AdmissionReview (the server answers HTTP 400); every
    other problem is an answer: ``allowed: false`` with a message for bad user values.
    """
    req = parse_request(review)
    is_pod = req.group == "" and req.kind == "Pod"
    entry = None if is_pod else config.table.get(req.group, req.version, req.kind)
    # Metric label: only kinds we know, so junk requests cannot grow the label set.
    kind_label = "Pod" if is_pod else entry.kind if entry is not None else "other"
    rescale = req.operation == "UPDATE" and entry is not None
    if (req.operation != "CREATE" and not rescale) or req.sub_resource:
        return allow(req, kind_label, "unchanged", "not a CREATE")
    obj = req.obj
    if obj is None:
        raise ReviewError(f"request.object: missing on a {req.operation}")
    meta = obj.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ReviewError("request.object.metadata: expected an object")
    if req.namespace in config.skipped_namespaces:
        return allow(req, kind_label, "skipped", f"namespace {req.namespace} is excluded")
    # Every corral.dev key on the object, read once: the skip key here, the rest by a pod.
    given = K.user_values(meta)
    try:
        skipped = K.is_skipped(given)
    except InvalidValue as e:
        if req.operation == "CREATE":
            return deny(req, kind_label, 400, "BadRequest", str(e))
        skipped = False  # an UPDATE is not refused for what the object was created with
    if skipped:
        return allow(req, kind_label, "skipped", f"{K.SKIP} is set")
    if req.operation == "CREATE" and (raw := given.get(K.CHECKPOINT_INTERVAL)) is not None:
        try:
            check_checkpoint_interval(K.CHECKPOINT_INTERVAL, raw)
        except InvalidValue as e:
            return deny(req, kind_label, 400, "BadRequest", str(e))
    if not is_pod and entry is None:
        return allow(
            req,
            "other",
            "unhandled",
            f"kind {req.group}/{req.version} {req.kind} is not in the table",
        )
    try:
        if is_pod:
            return admit_pod(req, obj, meta, given, cluster, config, served)
        assert entry is not None
        job_rule: JobRule = (None, [])
        if (
            config.jobs_ignore_disruptions
            and req.operation == "CREATE"
            and not _chose_other_scheduler(obj, config)
        ):
            job_rule = entry.hooks.disruption_rule(obj)  # the batch/v1 Job's: its kind's hook
        result = admit_workload(req, obj, meta, entry, cluster, config, job_rule, served)
        if result.outcome == "unchanged" and (job_rule[0] is not None or job_rule[1]):
            # A Job that is no gang (size 0, a Kueue child): it still gets the rule.
            return finish(req, result.kind, Editor(obj), job_rule[1], (), result.hints, job_rule)
        return result
    except (Invalid, InvalidValue, WorkloadError, PatchError) as e:
        return deny(req, kind_label, 400, "BadRequest", str(e))


def _chose_other_scheduler(job: Mapping[str, Any], config: WebhookConfig) -> bool:
    """A Job whose pods asked for another scheduler is left alone entirely."""
    spec = job.get("spec")
    tmpl = spec.get("template") if isinstance(spec, dict) else None
    pod_spec = tmpl.get("spec") if isinstance(tmpl, dict) else None
    return foreign_scheduler(pod_spec, config.effective_scheduler_name) is not None
