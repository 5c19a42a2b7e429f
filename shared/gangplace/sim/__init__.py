"""The simulation harness: the engine run over time. The trace replay (pods arrive in
the FGD paper's order, a policy places each), its arrivals and random source, the trace
CSVs, the gang deadlock study, and the limits of defragmentation on a replay (the
oracle, the offline bound, the moves that get close). The engine below it reads no
clock and no file; this package may."""
