"""The ``exact_moves`` config section: its defaults, its place in the descheduler
config, and errors that name the key, the value and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest
from gangplace.mover.hood_moves import DEFAULT_NODE_LIMIT

from descheduler import ConfigError, DeschedulerConfig, parse_config
from descheduler.planning.strategies.exact_moves.exact_moves_config import ExactMovesConfig

# Bad values, each with the one line that says what is wrong.
BAD: list[tuple[dict[str, Any], str]] = [
    (
        {"exact_moves": {"node_limit": 0}},
        "config: exact_moves.node_limit: 0 is too small; allowed: a number >= 1",
    ),
    (
        {"exact_moves": {"max_pods": -1}},
        "config: exact_moves.max_pods: -1 is too small; allowed: a number >= 0",
    ),
]


def test_its_defaults() -> None:
    assert ExactMovesConfig() == ExactMovesConfig(
        enabled=True, max_pods=8, node_limit=DEFAULT_NODE_LIMIT, max_rooms=8
    )
    assert DeschedulerConfig().exact_moves == ExactMovesConfig()


def test_the_config_file_sets_it() -> None:
    loaded = parse_config({"exact_moves": {"enabled": False}})
    assert isinstance(loaded.exact_moves, ExactMovesConfig)
    assert not loaded.exact_moves.enabled


@pytest.mark.parametrize(
    ("raw", "message"),
    BAD,
    ids=[".".join([*raw, *next(iter(raw.values()))]) for raw, _ in BAD],
)
def test_a_bad_value_is_one_line_naming_the_key(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert str(e.value) == message
