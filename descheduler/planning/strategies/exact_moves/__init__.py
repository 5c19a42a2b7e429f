"""The exact neighbourhood moves where the planner's own search finds none (``exact_moves``,
asked by make_room and defragment): the moves (``exact_moves.py``), their config section
(``exact_moves_config.py``) and their tests (``tests/``)."""
