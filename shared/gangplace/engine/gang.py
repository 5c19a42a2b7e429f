"""All-or-nothing gang placement.

A gang is one or more task roles (1 launcher + 8 workers), each with a pod shape and a
member count, and a minAvailable. :func:`place_gang` places at least minAvailable
members or nothing at all -- the snapshot is left exactly as it was -- then, if asked,
the members beyond minAvailable where they still fit. Placement is greedy over the
scorer, largest members first, with a preference for the fewest nodes and, given a
topology key, for a single topology domain (a rack, a zone).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gangplace.engine.feasibility import explain, fits, member_capacity
from gangplace.engine.model import PodShape
from gangplace.engine.scoring import BinpackScorer, Scorer, select_node
from gangplace.engine.snapshot import Snapshot

__all__ = [
    "Assignment",
    "Gang",
    "GangError",
    "GangOptions",
    "GangPlacement",
    "TaskRole",
    "place_gang",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# Score bonuses that make "fewest nodes, then one topology domain" lexicographic over
# any scorer whose scores lie in [0, 100].
_SAME_NODE_BONUS = 400.0
_SAME_DOMAIN_BONUS = 200.0
_MAX_DOMAIN_TRIALS = 8


class GangError(ValueError):
    """A gang description that cannot be placed as written (bad counts)."""


@dataclass(frozen=True, slots=True)
class TaskRole:
    """``count`` pods of one shape; ``min_member`` of them are required (default: none
    beyond what the gang's minAvailable needs)."""

    name: str
    shape: PodShape
    count: int
    min_member: int | None = None

    def __post_init__(self) -> None:
        if self.count < 0:
            raise GangError(f"role {self.name}: count must be >= 0, got {self.count}")
        if self.min_member is not None and not 0 <= self.min_member <= self.count:
            raise GangError(
                f"role {self.name}: min_member {self.min_member} must be in 0..{self.count}"
            )


@dataclass(frozen=True, slots=True)
class Gang:
    name: str
    roles: tuple[TaskRole, ...]
    min_available: int | None = None
    namespace: str = ""
    queue: str = "default"
    priority: int = 0

    def __post_init__(self) -> None:
        if not self.roles:
            raise GangError(f"gang {self.name}: has no roles")
        if len({r.name for r in self.roles}) != len(self.roles):
            raise GangError(f"gang {self.name}: two roles with the same name")
        per_role = sum(r.min_member or 0 for r in self.roles)
        if self.min_available is not None and not per_role <= self.min_available <= self.size:
            raise GangError(
                f"gang {self.name}: minAvailable {self.min_available} must be between "
                f"{max(per_role, 1)} and the gang size {self.size}"
            )

    @classmethod
    def uniform(
        cls,
        name: str,
        shape: PodShape,
        size: int,
        min_available: int | None = None,
        *,
        namespace: str = "",
        queue: str = "default",
        priority: int = 0,
    ) -> Gang:
        """A gang of ``size`` identical pods (role ``worker``)."""
        role = TaskRole("worker", shape, size)
        return cls(name, (role,), min_available, namespace, queue, priority)

    @property
    def size(self) -> int:
        return sum(r.count for r in self.roles)

    @property
    def required(self) -> int:
        return self.size if self.min_available is None else self.min_available

    def required_per_role(self) -> list[int]:
        """How many of each role are needed: per-role minimums, then the rest of
        minAvailable filled in role order (the launcher before the workers)."""
        need = [r.min_member or 0 for r in self.roles]
        left = self.required - sum(need)
        for i, r in enumerate(self.roles):
            take = min(left, r.count - need[i])
            need[i] += take
            left -= take
        return need


@dataclass(frozen=True, slots=True)
class Assignment:
    role: str
    index: int
    node: int
    node_name: str
    gpus: tuple[int, ...]

    @property
    def pod(self) -> str:
        return f"{self.role}-{self.index}"


@dataclass(frozen=True, slots=True)
class GangOptions:
    """``fewest_nodes``: prefer nodes the gang already uses. ``topology_key``: prefer
    one value of this node label (a rack or zone) for the whole gang. ``best_effort``:
    also place members beyond minAvailable where they fit. ``dry_run``: report the
    placement but leave the snapshot unchanged. ``explain``: when the gang does not
    fit, say why node by node (as the kube-scheduler does); a planner that tries many
    what-ifs turns it off, as it costs a pass over every node in Python."""

    fewest_nodes: bool = True
    topology_key: str | None = None
    best_effort: bool = True
    dry_run: bool = False
    explain: bool = True


@dataclass(slots=True)
class GangPlacement:
    gang: str
    ok: bool
    required: int
    assignments: list[Assignment] = field(default_factory=list)
    reason: str = ""
    # ``reason`` without the gang's name, for callers that cache answers across gangs.
    why: str = ""

    @property
    def placed(self) -> int:
        return len(self.assignments)

    def nodes(self) -> list[str]:
        return sorted({a.node_name for a in self.assignments})


class _RoleLoop:
    """Places members of one shape, rescoring only the node each placement changed."""

    def __init__(
        self,
        snap: Snapshot,
        shape: PodShape,
        scorer: Scorer,
        allowed: BoolArray | None,
        bonus: npt.NDArray[np.float64] | None,
    ) -> None:
        self.snap, self.shape, self.scorer = snap, shape, scorer
        mask = fits(snap, shape)
        if allowed is not None:
            mask &= allowed
        self.nodes = np.flatnonzero(mask)
        self.alive = np.ones(self.nodes.size, dtype=bool)
        self.scores = scorer.score(snap, shape, self.nodes) if self.nodes.size else np.zeros(0)
        self.bonus = bonus

    def next(self) -> tuple[int, tuple[int, ...]] | None:
        live = np.flatnonzero(self.alive)
        if live.size == 0:
            return None
        total = self.scores[live]
        if self.bonus is not None:
            total = total + self.bonus[self.nodes[live]]
        pos = int(live[select_node(self.snap, self.nodes[live], total)])
        node = int(self.nodes[pos])
        gpus = self.scorer.choose_gpus(self.snap, self.shape, node)
        self.snap.place(self.shape, node, gpus)
        one = self.nodes[pos : pos + 1]
        if fits(self.snap, self.shape, one)[0]:
            self.scores[pos] = self.scorer.score(self.snap, self.shape, one)[0]
        else:
            self.alive[pos] = False
        return node, gpus


def _size_key(shape: PodShape) -> tuple[int, int, int]:
    return (-shape.gpu_demand_milli, -shape.request("cpu"), -shape.request("memory"))


def _place_members(
    snap: Snapshot,
    gang: Gang,
    want: list[int],
    scorer: Scorer,
    opts: GangOptions,
    allowed: BoolArray | None,
    placed: list[Assignment],
    strict: bool,
) -> str:
    """Place ``want[i]`` more members of role i, largest shapes first. Returns "" on
    success, else why the next member could not be placed (``strict``) -- or stops
    quietly at the first member that fits nowhere (best effort)."""
    bonus: npt.NDArray[np.float64] | None = None
    domains: IntArray | None = None
    if opts.fewest_nodes or opts.topology_key:
        bonus = np.zeros(snap.n_nodes)
        if opts.topology_key:
            domains, _ = snap.label_codes(opts.topology_key)
        for a in placed:
            _reward(bonus, a.node, domains, opts)
    done = {r.name: sum(1 for a in placed if a.role == r.name) for r in gang.roles}
    order = sorted(range(len(gang.roles)), key=lambda i: (_size_key(gang.roles[i].shape), i))
    for i in order:
        role = gang.roles[i]
        if want[i] <= 0:
            continue
        loop = _RoleLoop(snap, role.shape, scorer, allowed, bonus)
        for _ in range(want[i]):
            got = loop.next()
            if got is None:
                if not strict:
                    break
                name = f"{role.name}-{done[role.name]}"
                if not opts.explain:
                    return f"no node can host pod {name}"
                return explain(snap, role.shape, name)
            node, gpus = got
            placed.append(Assignment(role.name, done[role.name], node, snap.node_names[node], gpus))
            done[role.name] += 1
            if bonus is not None:
                _reward(bonus, node, domains, opts)
    return ""


def _reward(
    bonus: npt.NDArray[np.float64], node: int, domains: IntArray | None, opts: GangOptions
) -> None:
    if domains is not None and domains[node] >= 0:
        same = domains == domains[node]
        bonus[same] = np.maximum(bonus[same], _SAME_DOMAIN_BONUS)
    if opts.fewest_nodes:
        bonus[node] = _SAME_NODE_BONUS


def _domain_order(snap: Snapshot, gang: Gang, want: list[int], key: str) -> list[int]:
    """Topology domains that could hold the required members, tightest first."""
    codes, vocab = snap.label_codes(key)
    if not vocab:
        return []
    n_dom = len(vocab)
    spare = np.zeros(n_dom, dtype=np.int64)
    ok = np.ones(n_dom, dtype=bool)
    has = codes >= 0
    for role, need in zip(gang.roles, want, strict=True):
        if need <= 0:
            continue
        cap = np.bincount(
            codes[has], weights=member_capacity(snap, role.shape)[has], minlength=n_dom
        )
        ok &= cap >= need
        spare += (cap - need).astype(np.int64)
    names = {c: v for v, c in vocab.items()}
    cands = [d for d in range(n_dom) if ok[d]]
    return sorted(cands, key=lambda d: (int(spare[d]), names[d]))[:_MAX_DOMAIN_TRIALS]


def place_gang(
    snap: Snapshot,
    gang: Gang,
    scorer: Scorer | None = None,
    options: GangOptions | None = None,
    allowed: BoolArray | None = None,
) -> GangPlacement:
    """Place at least ``gang.required`` members, or none (snapshot unchanged).

    ``allowed`` restricts the candidate nodes (for example to one node pool).
    Deterministic: the same snapshot and gang give the same placement.
    """
    scorer = scorer or BinpackScorer()
    opts = options or GangOptions()
    want = gang.required_per_role()
    required = sum(want)
    token = snap.fork()
    placed: list[Assignment] = []
    reason = ""
    try:
        done = False
        if opts.topology_key:
            codes, _ = snap.label_codes(opts.topology_key)
            for d in _domain_order(snap, gang, want, opts.topology_key):
                inner = snap.fork()
                trial: list[Assignment] = []
                in_domain = codes == d if allowed is None else (codes == d) & allowed
                if not _place_members(snap, gang, want, scorer, opts, in_domain, trial, True):
                    snap.commit(inner)
                    placed, done = trial, True
                    break
                snap.revert(inner)
        if not done:
            reason = _place_members(snap, gang, want, scorer, opts, allowed, placed, True)
        if reason:
            snap.revert(token)
            why = f"{len(placed)}/{required} required members fit; {reason}"
            return GangPlacement(gang.name, False, required, [], f"gang {gang.name}: {why}", why)
        if opts.best_effort:
            extra = [r.count - w for r, w in zip(gang.roles, want, strict=True)]
            _place_members(snap, gang, extra, scorer, opts, allowed, placed, False)
    except BaseException:
        snap.revert(token)
        raise
    if opts.dry_run:
        snap.revert(token)
    else:
        snap.commit(token)
    return GangPlacement(gang.name, True, required, placed)
