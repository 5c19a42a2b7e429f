"""The simulation harness: trace loading and replay, arrivals, the gang study, the
Go-compatible random source, `gangplace simulate`, the limit oracle."""
