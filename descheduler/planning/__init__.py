"""The descheduler's pure part: from a cluster's state to a plan of whole-gang moves.

Nothing here talks to a cluster, a file or the clock (the `pure-decisions` and
`rules-below-io` contracts in pyproject.toml); :mod:`descheduler.running` carries a plan out.
"""
