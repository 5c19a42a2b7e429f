"""The ``make_room`` config section: its defaults, its place in the descheduler
config, and errors that name the key, the value and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from descheduler import ConfigError, DeschedulerConfig, parse_config
from descheduler.planning.strategies.make_room.make_room_config import MakeRoomConfig

# Bad values, each with the one line that says what is wrong.
BAD: list[tuple[dict[str, Any], str]] = [
    (
        {"make_room": {"max_victims_per_gang": 0}},
        "config: make_room.max_victims_per_gang: 0 is too small; allowed: a number >= 1",
    ),
    (
        {"make_room": {"candidate": 3}},
        (
            "config: make_room.candidate: unknown key; allowed: enabled, "
            "max_victims_per_gang, candidate_nodes, max_waiting_gangs"
        ),
    ),
]


def test_its_defaults() -> None:
    assert MakeRoomConfig() == MakeRoomConfig(
        enabled=True, max_victims_per_gang=16, candidate_nodes=48, max_waiting_gangs=64
    )
    assert DeschedulerConfig().make_room == MakeRoomConfig()


def test_the_config_file_sets_it() -> None:
    loaded = parse_config({"make_room": {"candidate_nodes": 8}})
    assert isinstance(loaded.make_room, MakeRoomConfig)
    assert loaded.make_room.candidate_nodes == 8


@pytest.mark.parametrize(
    ("raw", "message"),
    BAD,
    ids=[".".join([*raw, *next(iter(raw.values()))]) for raw, _ in BAD],
)
def test_a_bad_value_is_one_line_naming_the_key(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert str(e.value) == message
