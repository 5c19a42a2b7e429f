"""The one limits-and-disruption-budget check (pure): budgets count per key and refuse a
set of pods whole; what is reserved can be released; disruption budgets count what
earlier gangs used; pods the Eviction API evicts without consulting budgets are exempt,
even under two budgets."""

from __future__ import annotations

from gangplace.engine.eviction_budget import (
    Budget,
    DisruptionBudgets,
    EvictionTarget,
    Limits,
    pdb_exempt,
)
from gangplace.engine.objects import PdbRecord, pdb_from_json

from tests.builders import objects as o


def t(name: str, node: str = "n0", phase: str = "Running", **labels: str) -> EvictionTarget:
    return EvictionTarget("ns", name, node=node, phase=phase, labels=labels or {"app": "a"})


def budget(name: str, allowed: int, **labels: str) -> PdbRecord:
    return pdb_from_json(
        o.pdb(
            name,
            "ns",
            match_labels=labels,
            generation=1,
            status={"disruptionsAllowed": allowed, "observedGeneration": 1},
        )
    )


def test_limits_refuse_a_set_whole_and_release_what_did_not_go() -> None:
    limits = Limits([Budget.per_run(3, "run"), Budget.per_node(2, "node")])
    two = [t("a"), t("b")]
    assert limits.hit(two) is None
    limits.reserve(two)
    hit = limits.hit([t("c")])
    assert hit is not None and hit.short == "node (2, node n0)"
    assert hit.message == "node limit 2 for n0 would be exceeded: 2 used, 1 more needed"
    assert limits.hit([t("c", node="n1")]) is None
    limits.reserve([t("c", node="n1")])
    assert limits.full("run") and not limits.full("node")
    limits.release([t("c", node="n1")])
    assert not limits.full("run")


def test_disruption_budgets_count_what_earlier_gangs_used() -> None:
    pdbs = DisruptionBudgets([budget("a", 2, app="a")])
    assert pdbs.check([t("x"), t("y")]).allowed
    pdbs.take([t("x")])
    check = pdbs.check([t("y"), t("z")])
    assert not check.allowed
    assert check.reasons == (
        "disruption budget ns/a allows 1 more disruption(s); the move needs 2",
    )


def test_exempt_pods_skip_budgets_even_under_two() -> None:
    """canIgnorePDB comes before the two-budgets refusal in the Eviction API."""
    two = [budget("a", 0, app="a"), budget("b", 0, tier="x")]
    pdbs = DisruptionBudgets(two)
    running = t("r", app="a", tier="x")
    check = pdbs.check([running])
    assert not check.allowed and "covered by 2 disruption budgets (a, b)" in check.reasons[0]
    for phase in ("Pending", "Succeeded", "Failed"):
        assert pdb_exempt(phase)
        assert pdbs.check([t(f"p-{phase}", phase=phase, app="a", tier="x")]).allowed
    assert not pdb_exempt("Running") and not pdb_exempt("Unknown")
