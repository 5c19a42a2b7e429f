"""The simulation harness's limits: what any rearrangement could reach on a trace replay
(the oracle), what any choice of pods could reach (the offline bound), and moves that
get close (the cheapest moves that let a failed arrival fit)."""
