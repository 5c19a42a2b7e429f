"""Make room for waiting gangs (``make_room``): the strategy (``make_room.py``), where room
could be made (``room_options.py``), the search for victims (``room_search.py``), its
config section (``make_room_config.py``) and its tests (``tests/``)."""
