from decimal import Decimal

import pytest

from webhook.quantity import QuantityError, parse_parameter_count, parse_quantity


@pytest.mark.parametrize(
    "text, expected",
    [
        ("32B", 32_000_000_000),
        ("1.5B", 1_500_000_000),
        ("500M", 500_000_000),
        ("500m", 500_000_000),
        ("8b", 8_000_000_000),
        ("1.1B", 1_100_000_000),
        ("0.0000000001B", 1),  # a tenth of a parameter: never understated
        ("70B", 70_000_000_000),
    ],
)
def test_parameter_count_is_exact(text, expected):
    assert parse_parameter_count(text) == expected


@pytest.mark.parametrize("text", ["", "32", "32K", "1T", "1.B", ".5B", "-1B", "1e3B", " 32B", 32])
def test_parameter_count_rejects_what_the_pattern_rejects(text):
    with pytest.raises(QuantityError, match="invalid parameter count"):
        parse_parameter_count(text)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("12032Mi", Decimal(12032) * 1024**2),
        ("24Gi", Decimal(24) * 1024**3),
        ("80G", Decimal(80) * 10**9),
        ("100m", Decimal("0.1")),
        ("1.5", Decimal("1.5")),
        ("1e3", Decimal(1000)),
        ("1E-3", Decimal("0.001")),
        (".5Ki", Decimal(512)),
        (100, Decimal(100)),
    ],
)
def test_quantity(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "Gi", "12 Gi", "1.2.3", "12GiB", True, None])
def test_quantity_rejects_garbage(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)
