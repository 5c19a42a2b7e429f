"""Suspend workloads for a gang that capacity blocks (``capacity_room``, opt-in, asked by
make_room): the rule (``capacity_room.py``), its config section
(``capacity_room_config.py``) and its tests (``tests/``)."""
