"""``kubectl corral explain POD``: which gang a pod belongs to, what the webhook wrote on
it (schedulerName, the gang keys of the backend's dialect, a node-pool affinity), and
whether its gang can start; or, for a pod without gang keys, why the webhook left it
alone."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gangplace.engine import PodRecord
from gangplace.engine import membership as g

from kubectl_corral.gang_table import GangRow
from kubectl_corral.room import PlanForGang, Scattered

__all__ = ["DIALECT_KEYS", "Explanation", "explain_pod", "render_explanation"]

# The keys the webhook writes on pods, per dialect (the table of docs/backends.md).
DIALECT_KEYS: Mapping[str, tuple[str, ...]] = {
    "volcano": (g.VOLCANO_GROUP_NAME, g.VOLCANO_QUEUE_NAME, g.VOLCANO_SLA_WAITING_TIME),
    "coscheduling": (g.COSCHED_POD_GROUP_LABEL,),
    "yunikorn": (
        g.YUNIKORN_APP_ID_LABEL,
        g.YUNIKORN_APP_ID,
        g.YUNIKORN_QUEUE_LABEL,
        g.YUNIKORN_QUEUE,
        g.YUNIKORN_TASK_GROUP_NAME,
        g.YUNIKORN_TASK_GROUPS,
        g.YUNIKORN_POLICY,
    ),
    "kueue": (g.KUEUE_POD_GROUP_LABEL, g.KUEUE_TOTAL_COUNT, g.KUEUE_QUEUE_LABEL),
    "corral": (),
}
USER_KEYS = (
    g.ANNOTATION_GANG,
    g.ANNOTATION_MIN_AVAILABLE,
    g.ANNOTATION_QUEUE,
    g.ANNOTATION_GANG_TIMEOUT,
    g.ANNOTATION_SKIP,
    g.ANNOTATION_EVICTABLE,
)


@dataclass(slots=True)
class Key:
    key: str
    where: str  # label or annotation
    value: str


@dataclass(slots=True)
class Explanation:
    namespace: str
    pod: str
    phase: str
    node: str
    scheduler_name: str
    owner: str
    namespace_opted_in: bool | None
    namespace_note: str
    skipped: bool
    gang: str | None = None
    dialect: str | None = None
    queue: str | None = None
    gang_keys: list[Key] = field(default_factory=list)
    user_keys: list[Key] = field(default_factory=list)
    node_pool: list[str] = field(default_factory=list)
    gang_state: GangRow | None = None
    verdict: str = ""
    moves: str = ""  # how the descheduler would move its gang, or why not
    # A gang that cannot start: idle GPUs scattered where its members cannot use them,
    # and what the descheduler's plan would move for it.
    scattered: Scattered | None = None
    room: PlanForGang | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["gang_state"] = self.gang_state.to_dict() if self.gang_state else None
        out["scattered"] = self.scattered.to_dict() if self.scattered else None
        out["room"] = self.room.to_dict() if self.room else None
        return out


def _keys(meta: Mapping[str, Any], names: tuple[str, ...]) -> list[Key]:
    out = []
    for where, field_ in (("label", "labels"), ("annotation", "annotations")):
        values = meta.get(field_) or {}
        out += [Key(k, where, str(values[k])) for k in names if k in values]
    return out


def node_pool(spec: Mapping[str, Any]) -> list[str]:
    """Requirements ``key In [value]`` present in every required node-selector term:
    the shape in which the webhook pins a gang to its ``nodePool``."""
    try:
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
    except (KeyError, TypeError):
        return []
    if not isinstance(terms, list) or not terms:
        return []

    def pins(term: Any) -> set[tuple[str, str]]:
        exprs = term.get("matchExpressions") if isinstance(term, dict) else None
        return {
            (str(e.get("key")), str(e["values"][0]))
            for e in exprs or ()
            if isinstance(e, dict) and e.get("operator") == "In" and len(e.get("values") or ()) == 1
        }

    common = set.intersection(*(pins(t) for t in terms))
    return [f"{k}={v}" for k, v in sorted(common)]


def _owner(meta: Mapping[str, Any]) -> str:
    refs = [r for r in meta.get("ownerReferences") or () if isinstance(r, dict)]
    ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return f"{ref.get('kind')}/{ref.get('name')}" if ref else ""


def explain_pod(
    pod: Mapping[str, Any],
    record: PodRecord,
    ns_labels: Mapping[str, str] | None,
    ns_note: str,
    rows: list[GangRow],
) -> Explanation:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    skip = (meta.get("annotations") or {}).get(g.ANNOTATION_SKIP) or (meta.get("labels") or {}).get(
        g.ANNOTATION_SKIP
    )
    opted = None if ns_labels is None else ns_labels.get(g.LABEL_GANG_SCHEDULING) == "enabled"
    ex = Explanation(
        namespace=record.namespace,
        pod=record.name,
        phase=record.phase,
        node=record.node_name,
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        owner=_owner(meta),
        namespace_opted_in=opted,
        namespace_note=ns_note,
        skipped=str(skip).strip().lower() == "true",
        user_keys=_keys(meta, USER_KEYS),
        node_pool=node_pool(spec),
    )
    m = g.membership(record)
    if m is not None:
        ex.gang, ex.dialect, ex.queue = m.gang, m.dialect, m.queue
        ex.gang_keys = _keys(meta, DIALECT_KEYS.get(m.dialect, ()))
        ex.gang_state = next(
            (r for r in rows if r.namespace == record.namespace and r.name == m.gang), None
        )
    ex.verdict = _verdict(ex)
    return ex


def _verdict(ex: Explanation) -> str:
    if ex.gang is not None:
        st = ex.gang_state
        if ex.dialect == "corral":
            return (
                f"the pod names gang {ex.gang} with corral.dev/gang only: no scheduler's keys, "
                "so the webhook has not seen it (or it was created before the webhook ran)"
            )
        if st is None:
            return f"member of gang {ex.gang}"
        if st.status == "running":
            return f"gang {ex.gang} runs: {st.placed} of minAvailable {st.min_available} placed"
        return f"gang {ex.gang} has not started ({st.status}): {st.reason}"
    if ex.skipped:
        return 'corral.dev/skip is "true": the webhook leaves this pod alone'
    if ex.namespace_opted_in is False:
        return (
            f"namespace {ex.namespace} is not opted in (label {g.LABEL_GANG_SCHEDULING}=enabled "
            "missing): the webhook never sees its pods"
        )
    return (
        "no gang keys: the webhook did not change this pod. It may predate the namespace's "
        "opt-in, the webhook may have been unreachable under failurePolicy Ignore, or the "
        "webhook config says nonGangPods: ignore"
    )


def render_explanation(ex: Explanation) -> str:
    lines = [f"Pod {ex.namespace}/{ex.pod} ({ex.phase}{', on ' + ex.node if ex.node else ''})"]
    if ex.owner:
        lines.append(f"  Owner:        {ex.owner}")
    if ex.namespace_opted_in is None:
        ns = f"unknown ({ex.namespace_note})"
    else:
        label = f"{g.LABEL_GANG_SCHEDULING}=enabled"
        ns = f"opted in ({label})" if ex.namespace_opted_in else f"not opted in (no {label})"
    lines.append(f"  Namespace:    {ns}")
    lines.append(f"  Scheduler:    {ex.scheduler_name}")
    if ex.gang is not None:
        queue = f", queue {ex.queue}" if ex.queue else ""
        lines.append(f"  Gang:         {ex.gang} ({ex.dialect} keys{queue})")
        lines.extend(f"    {k.where:<11} {k.key}={k.value}" for k in ex.gang_keys)
        st = ex.gang_state
        if st is not None:
            lines.append(
                f"  Members:      {st.placed} placed of minAvailable {st.min_available}, "
                f"{st.waiting} waiting, {st.pods} in all"
                + (f"; PodGroup phase {st.phase}" if st.phase else "")
            )
    else:
        lines.append("  Gang:         none")
    pool = ", ".join(ex.node_pool) if ex.node_pool else "none"
    lines.append(f"  Node pool:    {pool}")
    if ex.user_keys:
        lines.append("  corral keys:  " + ", ".join(f"{k.key}={k.value}" for k in ex.user_keys))
    lines.append(f"  Verdict:      {ex.verdict}")
    if ex.scattered is not None:
        head, where = ex.scattered.describe()
        lines += _field("Idle GPUs:", head)
        lines += _field("", where)
    if ex.room is not None:
        head, moves = ex.room.describe()
        lines += _field("Making room:", head)
        for m in moves:
            lines += _field("", m)
    if ex.moves:
        lines.append(f"  Descheduler:  {ex.moves}")
    return "\n".join(lines)


WIDTH = 100
_LABEL = 16  # "  Making room:  "


def _field(label: str, text: str) -> list[str]:
    """``  Label:       text``, the text wrapped at :data:`WIDTH` columns under itself
    (a word longer than a line, a node or gang name, is never broken)."""
    lines = textwrap.wrap(
        text,
        WIDTH,
        initial_indent=f"  {label}".ljust(_LABEL),
        subsequent_indent=" " * _LABEL,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return lines or [f"  {label}"]
