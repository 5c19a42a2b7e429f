"""Defragment when no gang waits (``defragment``): the strategy (``defragment.py``), its
config section (``defragment_config.py``) and its tests (``tests/``)."""
