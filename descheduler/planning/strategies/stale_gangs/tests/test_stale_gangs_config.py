"""The ``stale_gangs`` config section: its defaults, its place in the descheduler
config, and errors that name the key, the value and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from descheduler import ConfigError, DeschedulerConfig, parse_config
from descheduler.planning.strategies.stale_gangs.stale_gangs_config import StaleGangsConfig

# Bad values, each with the one line that says what is wrong.
BAD: list[tuple[dict[str, Any], str]] = [
    (
        {"stale_gangs": {"default_timeout": "-5m"}},
        (
            'config: stale_gangs.default_timeout: "-5m": "-5m" is negative; allowed: a '
            'duration made of numbers with the units h, m, s, ms, us or ns, such as "30m", '
            '"1h30m" or "90s", or a number of seconds'
        ),
    ),
]


def test_its_defaults() -> None:
    assert StaleGangsConfig() == StaleGangsConfig(enabled=True, default_timeout=1800.0)
    assert DeschedulerConfig().stale_gangs == StaleGangsConfig()


def test_the_config_file_sets_it() -> None:
    loaded = parse_config({"stale_gangs": {"default_timeout": "45m"}})
    assert isinstance(loaded.stale_gangs, StaleGangsConfig)
    assert loaded.stale_gangs.default_timeout == 2700.0


@pytest.mark.parametrize(
    ("raw", "message"),
    BAD,
    ids=[".".join([*raw, *next(iter(raw.values()))]) for raw, _ in BAD],
)
def test_a_bad_value_is_one_line_naming_the_key(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert str(e.value) == message
