"""What a descheduling run may still evict: the limits and the disruption budgets.

One check, pure, for both the planner (which keeps its plan within them) and the
evictor (which holds them again while it evicts). A set of pods (one gang) is admitted
or refused as a whole, so a limit or a budget never splits a gang.

:class:`Limits` caps evictions per run, per node, per namespace, per queue, in GPUs --
any grouping a :class:`Budget` describes. :class:`DisruptionBudgets` checks
PodDisruptionBudgets on the status the List carries: every budget covering pods of the
gang must allow as many disruptions as it covers pods (less what earlier gangs of the
run used), and a pod under two budgets cannot be evicted at all. Pods the API server
evicts without consulting budgets are exempt here too (:func:`pdb_exempt`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gangplace.engine.node_pod_records import PodRecord
from gangplace.engine.objects import PdbRecord

__all__ = [
    "PDB_EXEMPT_PHASES",
    "Budget",
    "DisruptionBudgets",
    "DisruptionCheck",
    "EvictionTarget",
    "LimitHit",
    "Limits",
    "check_disruption",
    "pdb_exempt",
]

# The Eviction API deletes pods in these phases without looking at their budgets: a
# terminal pod has caused its disruption already, a pending one has none to cause
# (kubernetes pkg/registry/core/pod/storage/eviction.go, ``canIgnorePDB``, 1.28 to 1.33;
# it also skips pods being deleted, which the descheduler never plans to evict).
PDB_EXEMPT_PHASES = frozenset({"Pending", "Succeeded", "Failed"})


def pdb_exempt(phase: str) -> bool:
    """Whether a pod in ``phase`` is evicted without consulting its disruption budgets."""
    return phase in PDB_EXEMPT_PHASES


@dataclass(frozen=True, slots=True, eq=False)
class EvictionTarget:
    """A pod to evict, with what limits and budget checks need to know about it.
    With ``uid`` set, the API server refuses to evict a different pod of the same name."""

    namespace: str
    name: str
    uid: str = ""
    node: str = ""
    gang: str = ""
    queue: str = ""
    gpu_milli: int = 0
    phase: str = "Running"
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_record(cls, pod: PodRecord, *, gang: str = "", queue: str = "") -> EvictionTarget:
        return cls(
            namespace=pod.namespace,
            name=pod.name,
            uid=pod.uid,
            node=pod.node_name,
            gang=gang,
            queue=queue,
            gpu_milli=pod.shape.gpu_demand_milli,
            phase=pod.phase,
            labels=pod.labels,
        )


# --- limits ------------------------------------------------------------------------------


def _one(_: EvictionTarget) -> int:
    return 1


def _gpu_milli(t: EvictionTarget) -> int:
    return t.gpu_milli


@dataclass(frozen=True, slots=True)
class Budget:
    """At most ``limit`` units per distinct ``key(target)``; a target whose key is
    ``None`` is not counted. A unit is one pod unless ``cost`` says otherwise.
    ``scope`` names what the key is (``node``, ``queue``); ``shown`` is the limit as
    the user wrote it."""

    name: str
    limit: int
    key: Callable[[EvictionTarget], str | None]
    cost: Callable[[EvictionTarget], int] = _one
    scope: str = ""
    shown: str = ""

    def __post_init__(self) -> None:
        if self.limit < 0:
            raise ValueError(f"budget {self.name}: limit must be >= 0, got {self.limit}")

    @classmethod
    def per_run(cls, limit: int, name: str = "per-run") -> Budget:
        return cls(name, limit, lambda t: "")

    @classmethod
    def per_node(cls, limit: int, name: str = "per-node") -> Budget:
        return cls(name, limit, lambda t: t.node or None, scope="node")

    @classmethod
    def per_namespace(cls, limit: int, name: str = "per-namespace") -> Budget:
        return cls(name, limit, lambda t: t.namespace, scope="namespace")

    @classmethod
    def per_queue(cls, limit: int, name: str = "per-queue") -> Budget:
        return cls(name, limit, lambda t: t.queue or None, scope="queue")

    @classmethod
    def gpus_per_run(cls, milli: int, name: str = "gpu-milli-per-run", shown: str = "") -> Budget:
        """Thousandths of a GPU evicted in the run (8000: eight whole GPUs)."""
        return cls(name, milli, lambda t: "" if t.gpu_milli else None, _gpu_milli, shown=shown)


@dataclass(frozen=True, slots=True)
class LimitHit:
    """A budget that evicting a gang would exceed: which, for what key, by how much."""

    budget: Budget
    key: str
    used: int
    cost: int

    @property
    def short(self) -> str:
        """``max_evictions_per_node (1, node n0)``: the budget, its limit and scope."""
        b = self.budget
        scope = f", {b.scope} {self.key}" if b.scope and self.key else ""
        return f"{b.name} ({b.shown or b.limit}{scope})"

    @property
    def message(self) -> str:
        b = self.budget
        scope = f" for {self.key}" if self.key else ""
        return (
            f"{b.name} limit {b.shown or b.limit}{scope} would be exceeded: "
            f"{self.used} used, {self.cost} more needed"
        )


class Limits:
    """Budgets and what has been used of them."""

    def __init__(self, budgets: Iterable[Budget] = ()) -> None:
        self.budgets: list[Budget] = list(budgets)
        names = [b.name for b in self.budgets]
        if len(set(names)) != len(names):
            raise ValueError(f"limits: budget names must be unique, got {names}")
        self.used: Counter[tuple[str, str]] = Counter()

    def add(self, budget: Budget) -> None:
        if any(b.name == budget.name for b in self.budgets):
            raise ValueError(f"limits: a budget named {budget.name!r} exists already")
        self.budgets.append(budget)

    def _costs(self, targets: Sequence[EvictionTarget]) -> Counter[tuple[str, str]]:
        need: Counter[tuple[str, str]] = Counter()
        for b in self.budgets:
            for t in targets:
                k = b.key(t)
                if k is not None:
                    need[(b.name, k)] += b.cost(t)
        return need

    def hit(self, targets: Sequence[EvictionTarget]) -> LimitHit | None:
        """The first budget (in their order) that evicting all ``targets`` would exceed."""
        by_name = {b.name: b for b in self.budgets}
        for (name, key), cost in self._costs(targets).items():
            used = self.used[(name, key)]
            if used + cost > by_name[name].limit:
                return LimitHit(by_name[name], key, used, cost)
        return None

    def blocking(self, targets: Sequence[EvictionTarget]) -> tuple[str, str] | None:
        """(budget name, explanation) of the first budget that evicting all ``targets``
        would exceed, or None."""
        hit = self.hit(targets)
        return None if hit is None else (hit.budget.name, hit.message)

    def reserve(self, targets: Sequence[EvictionTarget]) -> None:
        self.used.update(self._costs(targets))

    def release(self, targets: Sequence[EvictionTarget]) -> None:
        self.used.subtract(self._costs(targets))

    def full(self, name: str) -> bool:
        """Budget ``name`` (one without keys, such as a per-run one) is used up."""
        b = next((b for b in self.budgets if b.name == name), None)
        return b is not None and self.used[(name, "")] >= b.limit


# --- disruption budgets ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DisruptionCheck:
    """Whether the disruption budgets allow evicting a whole gang, and why not."""

    allowed: bool
    reasons: tuple[str, ...] = ()


class DisruptionBudgets:
    """The disruption budgets of a run and how many disruptions its gangs used of them."""

    def __init__(self, pdbs: Iterable[PdbRecord] = ()) -> None:
        self._by_ns: dict[str, list[PdbRecord]] = {}
        for p in pdbs:
            self._by_ns.setdefault(p.namespace, []).append(p)
        self.used: Counter[str] = Counter()
        self._cover: dict[int, tuple[PdbRecord, ...]] = {}

    def covering(self, t: EvictionTarget) -> tuple[PdbRecord, ...]:
        """The budgets whose selector matches ``t`` (none for an exempt pod)."""
        hit = self._cover.get(id(t))
        if hit is None:
            hit = ()
            if not pdb_exempt(t.phase):
                ns = self._by_ns.get(t.namespace, ())
                hit = tuple(b for b in ns if b.selector.matches(t.labels))
            self._cover[id(t)] = hit
        return hit

    def check(self, targets: Sequence[EvictionTarget]) -> DisruptionCheck:
        """Whether evicting every one of ``targets`` keeps to every budget that covers them."""
        reasons: list[str] = []
        need: Counter[str] = Counter()
        budgets: dict[str, PdbRecord] = {}
        for t in targets:
            cover = self.covering(t)
            if len(cover) > 1:
                names = ", ".join(sorted(b.name for b in cover))
                reasons.append(
                    f"pod {t.key} is covered by {len(cover)} disruption budgets ({names})"
                )
            for b in cover:
                need[b.key] += 1
                budgets[b.key] = b
        for key in sorted(need):
            b = budgets[key]
            if not b.current:
                reasons.append(
                    f"disruption budget {key} has no current status (generation "
                    f"{b.generation}, observed {b.observed_generation})"
                )
                continue
            left = b.disruptions_allowed - self.used[key]
            if need[key] > left:
                reasons.append(
                    f"disruption budget {key} allows {max(left, 0)} more disruption(s); "
                    f"the move needs {need[key]}"
                )
        return DisruptionCheck(not reasons, tuple(reasons))

    def take(self, targets: Sequence[EvictionTarget]) -> None:
        """Count ``targets`` as disrupted."""
        for t in targets:
            for b in self.covering(t):
                self.used[b.key] += 1


def check_disruption(
    members: Sequence[EvictionTarget], pdbs: Iterable[PdbRecord]
) -> DisruptionCheck:
    """Do the budgets ``pdbs`` (as listed now) allow evicting every one of ``members``?"""
    return DisruptionBudgets(pdbs).check(members)
