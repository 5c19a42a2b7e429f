"""Quantities parse exactly and round up as the API server does."""

from fractions import Fraction

import pytest
from gangplace.engine.quantity import QuantityError, parse_quantity, to_int, to_milli


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("100m", 100),
        ("1", 1000),
        ("1.5", 1500),
        ("0.1m", 1),  # MilliValue() rounds up
        ("1e3", 1_000_000),
        ("1E-3", 1),
        ("12345k", 12_345_000_000),
        (".5", 500),
        ("2.", 2000),
        ("+3", 3000),
        ("250u", 1),
        ("0", 0),
    ],
)
def test_milli_values(text: str, milli: int) -> None:
    assert to_milli(text) == milli


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2Gi", 2 * 2**30),
        ("500M", 500_000_000),
        ("1Ki", 1024),
        ("1.5", 2),  # Value() rounds up
        ("1500m", 2),
        ("1.5Gi", 3 * 2**29),
        ("1e9", 10**9),
        ("3E", 3 * 10**18),
        ("128974848", 128974848),
        ("129e6", 129_000_000),
        ("123Mi", 123 * 2**20),
    ],
)
def test_whole_values(text: str, value: int) -> None:
    assert to_int(text) == value


def test_exact_fraction() -> None:
    assert parse_quantity("1.1") == Fraction(11, 10)


@pytest.mark.parametrize(
    "bad", ["", " 1", "abc", "1.2.3", "1Gb", "1e", "--1", "1 Gi", "Gi", "1ki", "0x10", "1e999"]
)
def test_malformed_names_the_string(bad: str) -> None:
    with pytest.raises(QuantityError) as err:
        to_milli(bad)
    assert repr(bad) in str(err.value)
