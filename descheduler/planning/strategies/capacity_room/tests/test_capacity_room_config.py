"""The ``capacity_room`` config section: its defaults, its place in the descheduler
config, and errors that name the key, the value and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from descheduler import ConfigError, DeschedulerConfig, parse_config
from descheduler.planning.strategies.capacity_room.capacity_room_config import CapacityRoomConfig

# Bad values, each with the one line that says what is wrong.
BAD: list[tuple[dict[str, Any], str]] = [
    (
        {"capacity_room": {"hold_for": "0s"}},
        "config: capacity_room.hold_for: 0.0 is too small; allowed: a number > 0.0",
    ),
    (
        {"capacity_room": {"after": "soon"}},
        (
            'config: capacity_room.after: "soon": "soon" is not a duration; allowed: a '
            'duration made of numbers with the units h, m, s, ms, us or ns, such as "30m", '
            '"1h30m" or "90s", or a number of seconds'
        ),
    ),
]


def test_its_defaults() -> None:
    assert CapacityRoomConfig() == CapacityRoomConfig(
        enabled=False, after=3600.0, equal_priority=False, hold_for=900.0, nominate=False
    )
    assert DeschedulerConfig().capacity_room == CapacityRoomConfig()


def test_the_config_file_sets_it() -> None:
    loaded = parse_config({"capacity_room": {"enabled": True, "after": "2h", "hold_for": "15m"}})
    assert isinstance(loaded.capacity_room, CapacityRoomConfig)
    assert (loaded.capacity_room.after, loaded.capacity_room.hold_for) == (7200.0, 900.0)


@pytest.mark.parametrize(
    ("raw", "message"),
    BAD,
    ids=[".".join([*raw, *next(iter(raw.values()))]) for raw, _ in BAD],
)
def test_a_bad_value_is_one_line_naming_the_key(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert str(e.value) == message
