"""Kubernetes resource quantities and model parameter counts, parsed exactly.

One implementation for the CEL ``quantity`` library, admission (policies) and the controller
(planner), so all answer the same for the same text:

* Kubernetes quantities (``"12032Mi"``, ``"24Gi"``, ``"1.5"``, ``"100m"``, ``"1e3"``): apimachinery's
  ``resource.ParseQuantity``, its grammar and its error texts, as an exact ``Decimal``;
* parameter counts (``"32B"``, ``"1.5B"``, ``"500M"``) -> int, parsed with ``Decimal`` so ``1.1B`` is
  exactly 1_100_000_000 and never 1_100_000_000.0000002.

Pure functions, no I/O.
"""

from __future__ import annotations

import decimal
import re
from decimal import Decimal
from functools import lru_cache

_SPLIT_RE = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_ERROR = f"quantities must match the regular expression '{_SPLIT_RE}'"
SUFFIX_ERROR = "unable to parse quantity's suffix"

# exact decimal arithmetic: quantities are arbitrary-precision decimals (inf.Dec)
DECIMAL_CONTEXT = decimal.Context(prec=4000, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, rounding=decimal.ROUND_UP)
_NANO = Decimal("1e-9")
MAX_INT64 = 2**63 - 1

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


class QuantityError(ValueError):
    """A quantity or parameter count that does not match its format (Go's text for quantities)."""


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: (positive, value, numerator, denominator, suffix)."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos].isdigit() and text[pos].isascii():
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in "0123456789":
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in "eEinumkKMGTP":
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in "0123456789":
        pos += 1
    if pos < end:
        raise QuantityError(FORMAT_ERROR)
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, bool]:
    """(base, exponent, binary) of a suffix; ``QuantityError`` if unknown."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], False
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], True
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = suffix[1:]
        digits = exponent[1:] if exponent[0] in "+-" else exponent
        if digits and digits.isdigit() and digits.isascii():
            return 10, int(exponent), False
    raise QuantityError(SUFFIX_ERROR)


def parse_quantity(value: str | int | float) -> Decimal:
    """``resource.ParseQuantity``: the exact value, rounded up to nano as Kubernetes does (a YAML
    number, which a manifest may hold where a quantity belongs, is taken as written)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(FORMAT_ERROR)
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(str(value))
    return _parse(value)


@lru_cache(maxsize=4096)
def _parse(text: str) -> Decimal:
    if not text:
        raise QuantityError(FORMAT_ERROR)
    if text == "0":
        return Decimal(0)
    positive, value, _num, _denom, suffix = _split(text)
    base, exponent, binary = _interpret(suffix)
    ctx = DECIMAL_CONTEXT
    try:
        amount = ctx.create_decimal(value)
    except decimal.InvalidOperation:
        raise QuantityError(FORMAT_ERROR) from None
    if amount.is_nan() or amount.is_infinite():
        raise QuantityError(FORMAT_ERROR)
    amount = ctx.multiply(amount.copy_abs(), ctx.power(2, exponent) if base == 2 else Decimal(1).scaleb(exponent, ctx))
    if not amount.is_zero() and amount.as_tuple().exponent < -9:
        amount = amount.quantize(_NANO, rounding=decimal.ROUND_UP, context=ctx)
    if binary and amount > MAX_INT64:
        amount = Decimal(MAX_INT64)
    return amount if positive else amount.copy_negate()


PARAMETER_COUNT_PATTERN = r"^[0-9]+(\.[0-9]+)?[MmBb]$"
_PARAMETER_COUNT = re.compile(PARAMETER_COUNT_PATTERN)
_PARAMETER_SCALE = {"m": Decimal(10) ** 6, "b": Decimal(10) ** 9}


def parse_parameter_count(text: str) -> int:
    """``"32B"`` -> 32_000_000_000; ``"1.5B"`` -> 1_500_000_000; ``"500M"`` -> 500_000_000.

    A fractional result (``"1.0000000001M"``) is rounded up: a limit or a need is never
    understated by parsing. Raises ``QuantityError`` for text outside ``^[0-9]+(\\.[0-9]+)?[MmBb]$``.
    """
    if not isinstance(text, str) or not _PARAMETER_COUNT.match(text):
        raise QuantityError(
            f"invalid parameter count {text!r}: expected a number with suffix M or B, "
            f"e.g. 500M, 1.5B, 32B"
        )
    value = Decimal(text[:-1]) * _PARAMETER_SCALE[text[-1].lower()]
    return int(value.to_integral_value(rounding="ROUND_CEILING"))
