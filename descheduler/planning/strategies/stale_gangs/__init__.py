"""Release stale partial gangs (``stale_gangs``): the strategy (``stale_gangs.py``), its
config section (``stale_gangs_config.py``) and its tests (``tests/``)."""
