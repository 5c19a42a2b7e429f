"""The descheduler: state, planner, runner, safety, the replay with moves, the CLI and the
process."""
