"""The exact mover (gangplace.mover): the neighbourhood model, the mover's rules and
limits, the shape order the oracle and the planner skip proved shapes with."""
