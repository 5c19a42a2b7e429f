"""Queues with weights, capabilities and reclaimability (Volcano semantics), and DRF.

A queue's *deserved* share is found by water-filling: the cluster is divided by weight
among the queues that still want more, each capped by its capability and by what it
asks for (allocated + waiting), and what a capped queue leaves goes round again. A
queue's *share* is its largest allocated/deserved ratio over resources (Volcano's
proportion); its *dominant share* is DRF's (Ghodsi et al., NSDI 2011): the largest
fraction of any cluster resource it holds, divided by its weight. Waiting gangs are
served lowest queue dominant share first (then lowest share), and within a queue by
priority, then the gang's own dominant share, then age.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "Queue",
    "QueueState",
    "WaitingGang",
    "deserved_shares",
    "dominant_share",
    "order_waiting",
]

Resources = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    weight: int = 1
    capability: Mapping[str, int] = field(default_factory=dict)
    reclaimable: bool = True

    def __post_init__(self) -> None:
        if self.weight < 1:
            raise ValueError(f"queue {self.name}: weight must be >= 1, got {self.weight}")


@dataclass(slots=True)
class QueueState:
    """A queue's figures after :func:`deserved_shares`."""

    queue: Queue
    allocated: dict[str, int]
    request: dict[str, int]
    deserved: dict[str, float] = field(default_factory=dict)

    @property
    def share(self) -> float:
        """Largest allocated / deserved over resources (0 when nothing is allocated)."""
        best = 0.0
        for r, used in self.allocated.items():
            if used <= 0:
                continue
            d = self.deserved.get(r, 0.0)
            best = max(best, used / d if d > 0 else float("inf"))
        return best

    def dominant_share(self, total: Resources) -> float:
        """Weighted DRF: the largest fraction of any cluster resource the queue holds,
        divided by its weight."""
        return dominant_share(self.allocated, total) / self.queue.weight

    @property
    def overused(self) -> bool:
        """Using more than deserved of some resource: the first place to take from."""
        return any(u > self.deserved.get(r, 0.0) + 1e-9 for r, u in self.allocated.items() if u > 0)


@dataclass(frozen=True, slots=True)
class WaitingGang:
    name: str
    queue: str
    request: Mapping[str, int]
    priority: int = 0
    created: str = ""


def _add(a: dict[str, int], b: Resources) -> None:
    for k, v in b.items():
        a[k] = a.get(k, 0) + v


def deserved_shares(
    queues: Iterable[Queue],
    total: Resources,
    allocated: Mapping[str, Resources],
    waiting: Iterable[WaitingGang] = (),
) -> dict[str, QueueState]:
    """Each queue's deserved resources (Volcano's proportion plugin), by name."""
    states: dict[str, QueueState] = {}
    for q in queues:
        states[q.name] = QueueState(
            q, dict(allocated.get(q.name, {})), dict(allocated.get(q.name, {}))
        )
    for g in waiting:
        if g.queue in states:
            _add(states[g.queue].request, g.request)
    for s in states.values():
        s.deserved = dict.fromkeys(total, 0.0)

    resources = list(total)
    active = set(states)
    remaining = {r: float(total[r]) for r in resources}
    for _ in range(len(states) + 1):
        if not active or all(remaining[r] <= 1e-9 for r in resources):
            break
        weight_sum = sum(states[n].queue.weight for n in active)
        capped: set[str] = set()
        for n in sorted(active):
            s = states[n]
            frac = s.queue.weight / weight_sum
            for r in resources:
                want = float(s.request.get(r, 0))
                cap = s.queue.capability.get(r)
                limit = want if cap is None else min(want, float(cap))
                s.deserved[r] = min(s.deserved[r] + remaining[r] * frac, limit)
            if all(
                s.deserved[r]
                >= min(float(s.request.get(r, 0)), float(s.queue.capability.get(r, 1 << 62))) - 1e-9
                for r in resources
            ):
                capped.add(n)
        remaining = {
            r: float(total[r]) - sum(st.deserved[r] for st in states.values()) for r in resources
        }
        if not capped:
            break
        active -= capped
    return states


def dominant_share(request: Resources, total: Resources) -> float:
    """DRF's dominant share: the largest fraction of any cluster resource."""
    return max((v / total[r] for r, v in request.items() if total.get(r)), default=0.0)


def order_waiting(
    waiting: Sequence[WaitingGang], states: Mapping[str, QueueState], total: Resources
) -> list[WaitingGang]:
    """Waiting gangs in the order they should get room: queues with the lowest weighted
    dominant share first (then the lowest share of what they deserve); within a queue,
    higher priority, then smaller dominant share, then older."""

    def key(g: WaitingGang) -> tuple[float, float, int, float, str, str]:
        st = states.get(g.queue)
        inf = float("inf")
        return (
            st.dominant_share(total) if st is not None else inf,
            st.share if st is not None else inf,
            -g.priority,
            dominant_share(g.request, total),
            g.created,
            g.name,
        )

    return sorted(waiting, key=key)
