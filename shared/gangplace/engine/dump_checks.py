"""What a cluster dump holds that the engine read but cannot count: said once, here,
for every command that reads a dump (``gangplace``, ``corral-descheduler plan``,
``kubectl corral --snapshot``), so none drops it in silence."""

from __future__ import annotations

from gangplace.engine.snapshot import Snapshot

__all__ = ["dump_warnings"]

# Pods named in a warning before the rest are only counted.
_NAMED = 3


def dump_warnings(snap: Snapshot) -> list[str]:
    """One line per problem. A pod bound to a node the dump does not hold (a node
    deleted while the dump was taken, or nodes and pods dumped apart) uses capacity
    corral cannot see: it is left out of every figure, and said so."""
    lost = [p for p in snap.pods if p.node_name and p.node < 0]
    if not lost:
        return []
    named = ", ".join(f"{p.namespace}/{p.name} on {p.node_name}" for p in lost[:_NAMED])
    more = f" and {len(lost) - _NAMED} more" if len(lost) > _NAMED else ""
    return [
        f"{len(lost)} pod(s) bound to a node that is not in the dump, left out of the "
        f"figures: {named}{more} (dump nodes and pods together: kubectl get nodes,pods "
        "-A -o json)"
    ]
