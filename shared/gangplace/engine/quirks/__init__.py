"""The quirks of built-in workload kinds, as the pure functions their registry entries
hold (:class:`gangplace.engine.kinds.KindHooks`): callers ask a kind's entry, never
test its name. One module per quirk; each says which release of the other project
it follows."""
