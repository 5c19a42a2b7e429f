"""How a gang may move without loss, chosen per top-level owner (pure).

- *suspend*: every member's top-level owner is a workload with a suspend switch (a
  batch/v1 Job, JobSet, Kubeflow job, RayJob) that runs only this gang. Suspending
  removes the pods without counting a failure; the runner resumes it once the gang it
  made room for is bound, or after ``moves.resume_after``.
- *evict*: every member's owner makes an evicted pod again without loss: a ReplicaSet
  (so a Deployment), StatefulSet or ReplicationController; or a Job whose
  podFailurePolicy ignores the DisruptionTarget condition an eviction sets, or whose
  backoffLimit leaves room for every member evicted (the Job controller counts an
  evicted pod as a failure otherwise, and fails the Job past its backoffLimit).
- A suspend is chosen only where it takes effect
  (:func:`gangplace.engine.owners.suspend_refusal`: the served CRD declares the
  switch, KubeRay's own conditions hold, its controller did not ignore one before).
- A gang of a workload Kueue manages (its ``kueue.x-k8s.io/queue-name`` label, or a
  Kueue Workload for it) is not moved at all: Kueue starts an admitted job it finds
  suspended again, and the pods of its admitted jobs are its quota's.
- otherwise the unit is not moved, and the reason says why: bare pods, Kubeflow or Ray
  pods that cannot be suspended, a Job with neither switch nor headroom, an owner that
  is not in the cluster state, an owner corral does not know.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from gangplace.engine import PodRecord
from gangplace.engine.kinds import KINDS, Kinds, WorkloadKind
from gangplace.engine.objects import PodGroupRecord
from gangplace.engine.owners import WorkloadRecord, workload_key

__all__ = ["Method", "Owners", "Way"]

Method = Literal["suspend", "evict"]


@dataclass(frozen=True, slots=True)
class Way:
    """How a set of pods moves: ``method`` None when it may not, ``reason`` says why."""

    method: Method | None
    reason: str
    workloads: tuple[WorkloadRecord, ...] = ()  # suspend: the workloads suspended

    def names(self) -> list[str]:
        return [w.describe() for w in self.workloads]


class Owners:
    """The workloads of a state, and who owns whom; ``kinds`` is the registry the state
    was read with (the config's added kinds move by their own entries)."""

    def __init__(self, workloads: Mapping[str, WorkloadRecord], kinds: Kinds = KINDS) -> None:
        self.workloads = workloads
        self.kinds = kinds
        # top-level workload key -> the units whose pods it owns
        self.units: dict[str, set[str]] = {}

    def _read(self, group: str, kind: str) -> bool:
        """Whether the registry has the descheduler read this kind as a workload record."""
        record: WorkloadKind | None = self.kinds.get((group, kind))
        return record is not None and record.read

    def chain_top(
        self, namespace: str, group: str, kind: str, name: str
    ) -> tuple[WorkloadRecord | None, str]:
        """The top-level workload above (group, kind, name), or None and why it is
        unknown ('' when the owner is not a kind the descheduler reads at all: a Volcano
        ``batch.volcano.sh`` Job is not a batch/v1 Job)."""
        if not self._read(group, kind):
            return None, ""
        seen: set[str] = set()
        cur = self.workloads.get(workload_key(namespace, kind, name))
        if cur is None or cur.group != group:
            return None, f"{kind} {namespace}/{name} is not in the cluster state"
        while self._read(cur.owner_group, cur.owner_kind) and cur.key not in seen:
            seen.add(cur.key)
            up = self.workloads.get(workload_key(namespace, cur.owner_kind, cur.owner_name))
            if up is None or up.group != cur.owner_group:
                return None, (
                    f"{cur.owner_kind} {namespace}/{cur.owner_name} (owner of "
                    f"{cur.describe()}) is not in the cluster state"
                )
            cur = up
        return cur, ""

    def top_of_pod(self, pod: PodRecord) -> tuple[WorkloadRecord | None, str]:
        return self.chain_top(pod.namespace, pod.owner_group, pod.owner_kind, pod.owner_name)

    def top_of_podgroup(self, pg: PodGroupRecord) -> WorkloadRecord | None:
        return self.chain_top(pg.namespace, pg.owner_group, pg.owner_kind, pg.owner_name)[0]

    def index_units(self, units: Iterable[tuple[str, Sequence[PodRecord]]]) -> None:
        for key, pods in units:
            for p in pods:
                top, _ = self.top_of_pod(p)
                if top is not None:
                    self.units.setdefault(top.key, set()).add(key)

    def suspended_by(
        self, pods: Sequence[PodRecord], pg: PodGroupRecord | None
    ) -> WorkloadRecord | None:
        """The suspended top-level workload of a gang, if any: its pods are going or gone,
        and it waits for nobody until it is resumed."""
        tops = [self.top_of_pod(p)[0] for p in pods]
        if pg is not None:
            tops.append(self.top_of_podgroup(pg))
        return next((w for w in tops if w is not None and w.suspended), None)

    def way(self, unit: str, pods: Sequence[PodRecord], *, whole: bool, suspend: bool) -> Way:
        """How ``pods`` of ``unit`` may move: suspended (only a whole unit, when
        ``suspend``), else evicted, else not at all."""
        why_not_suspend = ""
        for p in pods:
            top, _ = self.top_of_pod(p)
            if top is not None and top.kueue_managed:
                return Way(
                    None,
                    f"not movable: {top.describe()} is managed by Kueue ({top.kueue_managed}):"
                    " Kueue starts an admitted job it finds suspended again, so only Kueue's "
                    "own preemption moves it",
                )
        if whole and suspend and pods:
            tops: dict[str, WorkloadRecord] = {}
            for p in pods:
                top, why = self.top_of_pod(p)
                if top is None:
                    why_not_suspend = why
                    break
                if not top.suspend_path:
                    why_not_suspend = f"{top.describe()} has no suspend switch"
                    break
                if top.suspend_refusal:
                    why_not_suspend = top.suspend_refusal
                    break
                if top.finished:
                    why_not_suspend = f"{top.describe()} has finished"
                    break
                others = sorted(self.units.get(top.key, set()) - {unit})
                if others:
                    why_not_suspend = (
                        f"suspending {top.describe()} would also stop {', '.join(others)}"
                    )
                    break
                tops[top.key] = top
            else:
                ws = tuple(tops[k] for k in sorted(tops))
                names = ", ".join(w.describe() for w in ws)
                return Way("suspend", f"suspend {names} (resumed once the room is used)", ws)
        return self._evict_way(pods, why_not_suspend)

    def _evict_way(self, pods: Sequence[PodRecord], why_not_suspend: str) -> Way:
        per_job: Counter[str] = Counter()
        jobs: dict[str, WorkloadRecord] = {}
        for p in pods:
            kind = p.owner_kind
            known = self.kinds.get((p.owner_group, kind))
            evicted = known.evicted if known is not None else None
            if evicted == "recreated":
                continue
            what = f"{kind} {p.namespace}/{p.owner_name}"
            if evicted == "job-failures":
                rec = self.workloads.get(workload_key(p.namespace, kind, p.owner_name))
                if rec is None or rec.group != p.owner_group:
                    return self._no(
                        f"{what} is not in the cluster state: whether an eviction would "
                        "fail it cannot be told",
                        why_not_suspend,
                    )
                if not rec.ignores_disruption:
                    per_job[rec.key] += 1
                    jobs[rec.key] = rec
                continue
            if not kind:
                return self._no(f"pod {p.key} has no controller to recreate it", why_not_suspend)
            if known is not None and known.read:
                return self._no(
                    f"an evicted pod of {what} is not made again without loss",
                    why_not_suspend,
                )
            return self._no(
                f"owner {what} is not known to make an evicted pod again without loss",
                why_not_suspend,
            )
        for key in sorted(per_job):
            rec, n = jobs[key], per_job[key]
            left = rec.failures_left or 0
            if n > left:
                return self._no(
                    f"{rec.describe()} has backoffLimit {rec.backoff_limit} with "
                    f"{rec.failed} failed: evicting {n} pod(s) would fail it, and its "
                    "podFailurePolicy does not ignore DisruptionTarget",
                    why_not_suspend,
                )
        if jobs:
            return Way("evict", "evict (each Job's backoffLimit leaves room)")
        return Way("evict", "evict (the owners make the pods again)")

    @staticmethod
    def _no(why: str, why_not_suspend: str) -> Way:
        if why_not_suspend and why_not_suspend not in why:
            why = f"{why}; not suspended: {why_not_suspend}"
        return Way(None, f"not movable: {why}")
