"""The simulation harness: the engine run over time. The trace replay (pods arrive in
the FGD paper's order, a policy places each), its arrivals and random source, the trace
CSVs, the gang deadlock study, and the limits of defragmentation on a replay (the
oracle, the offline bound, the replay's hooks that move pods with the mover of
``gangplace.mover``). The engine and the mover below it read no clock and no file;
this package may."""
