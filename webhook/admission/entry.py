"""The one entry point of admission: :func:`admit`, an AdmissionReview in, an answer out
(see the package's docstring for the rules and the modules by job)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from webhook.admission import keys as K
from webhook.admission.decision import Decision, Denied, JobRule, Patched, Unchanged
from webhook.admission.gang_decision import Invalid, controller
from webhook.admission.mutation import foreign_scheduler
from webhook.admission.patch import PatchError
from webhook.admission.pods import admit_pod
from webhook.admission.responses import answer
from webhook.admission.review import (
    API_VERSION,
    AdmitResult,
    Request,
    ReviewError,
    decode_patch,
    parse_request,
)
from webhook.admission.roles import WorkloadError, WorkloadKind
from webhook.admission.validate import InvalidValue, check_checkpoint_interval
from webhook.admission.workloads import admit_workload

if TYPE_CHECKING:
    from webhook.admission.cluster_fit import ClusterCapacity
    from webhook.admission.native_gangs import Served
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
    return answer(req, kind_label, _decide(req, is_pod, entry, cluster, config, served))


def _decide(
    req: Request,
    is_pod: bool,
    entry: WorkloadKind | None,
    cluster: ClusterCapacity | None,
    config: WebhookConfig,
    served: Served | None,
) -> Decision:
    """What to do with the review: the checks every object passes, then a pod's or a
    workload's own decision."""
    rescale = req.operation == "UPDATE" and entry is not None
    if (req.operation != "CREATE" and not rescale) or req.sub_resource:
        return Unchanged("not a CREATE")
    obj = req.obj
    if obj is None:
        raise ReviewError(f"request.object: missing on a {req.operation}")
    meta = obj.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ReviewError("request.object.metadata: expected an object")
    if req.namespace in config.skipped_namespaces:
        return Unchanged(f"namespace {req.namespace} is excluded", "skipped")
    # Every corral.dev key on the object, read once: the skip key here, the rest by a pod.
    given = K.user_values(meta)
    try:
        skipped = K.is_skipped(given)
    except InvalidValue as e:
        if req.operation == "CREATE":
            return Denied(400, str(e))
        skipped = False  # an UPDATE is not refused for what the object was created with
    if skipped:
        return Unchanged(f"{K.SKIP} is set", "skipped")
    if req.operation == "CREATE" and (raw := given.get(K.CHECKPOINT_INTERVAL)) is not None:
        try:
            check_checkpoint_interval(K.CHECKPOINT_INTERVAL, raw)
        except InvalidValue as e:
            return Denied(400, str(e))
    if not is_pod and entry is None:
        return Unchanged(
            f"kind {req.group}/{req.version} {req.kind} is not in the table", "unhandled"
        )
    # Its controller (the workload of a pod, the JobSet of a Job), read once.
    owner = controller(meta)
    try:
        if is_pod:
            return admit_pod(req, obj, meta, given, owner, cluster, config, served)
        assert entry is not None
        job_rule: JobRule = (None, [])
        if (
            config.jobs_ignore_disruptions
            and req.operation == "CREATE"
            and not _chose_other_scheduler(obj, config)
        ):
            job_rule = entry.hooks.disruption_rule(obj)  # its kind's hook (the batch/v1 Job's)
        decision = admit_workload(req, obj, meta, owner, entry, cluster, config, job_rule, served)
        if (
            isinstance(decision, Unchanged)
            and decision.outcome == "unchanged"
            and (job_rule[0] is not None or job_rule[1])
        ):
            # A Job that is no gang (size 0, a Kueue child), not skipped: it still gets the rule.
            return Patched(None, job_rule[1], job_rule=job_rule)
        return decision
    except (Invalid, InvalidValue, WorkloadError, PatchError) as e:
        return Denied(400, str(e))


def _chose_other_scheduler(job: Mapping[str, Any], config: WebhookConfig) -> bool:
    """A Job whose pods asked for another scheduler is left alone entirely."""
    spec = job.get("spec")
    tmpl = spec.get("template") if isinstance(spec, dict) else None
    pod_spec = tmpl.get("spec") if isinstance(tmpl, dict) else None
    return foreign_scheduler(pod_spec, config.effective_scheduler_name) is not None
