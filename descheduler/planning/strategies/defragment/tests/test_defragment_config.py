"""The ``defragment`` config section: its defaults, its place in the descheduler
config, and errors that name the key, the value and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from descheduler import ConfigError, DeschedulerConfig, parse_config
from descheduler.planning.strategies.defragment.defragment_config import DefragmentConfig

# Bad values, each with the one line that says what is wrong.
BAD: list[tuple[dict[str, Any], str]] = [
    (
        {"defragment": {"workload_coverage": 1.5}},
        "config: defragment.workload_coverage: 1.5 is too large; allowed: a number <= 1.0",
    ),
    (
        {"defragment": {"workload_coverage": 0}},
        "config: defragment.workload_coverage: 0 is too small; allowed: a number > 0.0",
    ),
]


def test_its_defaults() -> None:
    d = DefragmentConfig()
    assert (d.enabled, d.max_gpu_hours_at_risk, d.min_gain_gpus, d.min_total_gain_gpus) == (
        False,
        1.0,
        0.5,
        1.0,
    )
    assert (d.max_candidates, d.max_pods_per_move, d.stranding_weight) == (200, 4, 1.0)
    assert d.workload_coverage == 0.95
    assert DeschedulerConfig().defragment == DefragmentConfig()


def test_the_config_file_sets_it() -> None:
    loaded = parse_config({"defragment": {"enabled": True, "max_gpu_hours_at_risk": None}})
    assert isinstance(loaded.defragment, DefragmentConfig)
    assert loaded.defragment.enabled and loaded.defragment.max_gpu_hours_at_risk is None


@pytest.mark.parametrize(
    ("raw", "message"),
    BAD,
    ids=[".".join([*raw, *next(iter(raw.values()))]) for raw, _ in BAD],
)
def test_a_bad_value_is_one_line_naming_the_key(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert str(e.value) == message
