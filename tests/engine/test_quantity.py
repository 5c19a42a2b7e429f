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


@pytest.mark.parametrize(
    ("resource", "value", "text"),
    [
        ("cpu", 24300, "24300m"),
        ("cpu", 8000, "8"),
        ("memory", 192 * 2**30, "192Gi"),
        ("memory", 3 * 2**29, "1536Mi"),
        ("memory", 1000, "1000"),
        ("nvidia.com/gpu", 4, "4"),
    ],
)
def test_exact_quantity_round_trips(resource: str, value: int, text: str) -> None:
    from gangplace.engine.quantity import exact_quantity

    assert exact_quantity(resource, value) == text
    parsed = to_milli(text) if resource == "cpu" else to_int(text)
    assert parsed == value


@pytest.mark.parametrize("text", ["9" * 5000, "0" * 200 + "1", "1." + "5" * 4400])
def test_thousands_of_digits_are_refused_not_crashed(text: str) -> None:
    """Python refuses to convert more than 4,300 digits; a pod spec may carry any."""
    with pytest.raises(QuantityError, match="characters; no quantity is that long"):
        parse_quantity(text)
