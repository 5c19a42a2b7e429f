"""The mover: room for pods that fit nowhere, made by moving the fewest running pods.

Engine-side and pure like ``gangplace.engine`` (numpy and scipy's HiGHS, no client, no
file, no clock): the descheduler's planner and the simulation harness's replay both
plan with it. The entry is :mod:`gangplace.mover.place_with_moves`; the package
``__init__`` imports nothing."""
