"""The planner's strategies, a folder each, all of one signature: ``(ctx) -> moves``.

Each folder holds a strategy (or a part the strategies share) with its config section
(a pydantic model with its defaults and validation, composed into
:class:`~descheduler.config.DeschedulerConfig`) and its tests (``tests/``, which pip
does not install). Each reads the shared :class:`~descheduler.planning.context.PlanContext`
(with the moves of the strategies before it) and makes its moves on the context's
snapshot, in the order of :data:`~descheduler.planning.strategies.run_order.STRATEGIES`.

This package and its folders import nothing here, so that the config can compose the
sections without importing the strategies.
"""
