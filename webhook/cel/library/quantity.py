"""Kubernetes resource quantities (``library/quantity.go``, ``resource.ParseQuantity``)."""

from __future__ import annotations

import decimal
from decimal import Decimal
from functools import lru_cache

from webhook.cel.library.base import LibraryError, OpaqueValue, Overload

_SPLIT_RE = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_ERROR = f"quantities must match the regular expression '{_SPLIT_RE}'"
SUFFIX_ERROR = "unable to parse quantity's suffix"

# exact decimal arithmetic: quantities are arbitrary-precision decimals (inf.Dec)
_CTX = decimal.Context(prec=4000, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, rounding=decimal.ROUND_UP)
_NANO = Decimal("1e-9")
_MAX_INT64 = 2**63 - 1

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


class Quantity(OpaqueValue):
    """An exact decimal amount; equality, ordering and arithmetic are numeric."""

    cel_type = "kubernetes.Quantity"
    __slots__ = ("amount",)

    def __init__(self, amount: Decimal) -> None:
        self.amount = amount

    @property
    def key(self) -> str:
        return _canonical(self.amount)

    @classmethod
    def from_key(cls, key: str) -> Quantity:
        return cls(Decimal(key))

    def __str__(self) -> str:
        return self.key


def _canonical(amount: Decimal) -> str:
    if amount.is_zero():
        return "0"
    return str(amount.normalize(_CTX))


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
        raise LibraryError(FORMAT_ERROR)
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, bool]:
    """(base, exponent, binary) of a suffix; ``LibraryError`` if unknown."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], False
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], True
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = suffix[1:]
        digits = exponent[1:] if exponent[0] in "+-" else exponent
        if digits and digits.isdigit() and digits.isascii():
            return 10, int(exponent), False
    raise LibraryError(SUFFIX_ERROR)


@lru_cache(maxsize=4096)
def parse_quantity(text: str) -> Quantity:
    """``resource.ParseQuantity``: the exact value, rounded up to nano as Kubernetes does."""
    if not text:
        raise LibraryError(FORMAT_ERROR)
    if text == "0":
        return Quantity(Decimal(0))
    positive, value, _num, _denom, suffix = _split(text)
    base, exponent, binary = _interpret(suffix)
    try:
        amount = _CTX.create_decimal(value)
    except decimal.InvalidOperation:
        raise LibraryError(FORMAT_ERROR) from None
    if amount.is_nan() or amount.is_infinite():
        raise LibraryError(FORMAT_ERROR)
    amount = amount.copy_abs()
    amount = _CTX.multiply(amount, _CTX.power(2, exponent) if base == 2 else Decimal(1).scaleb(exponent, _CTX))
    if not amount.is_zero():
        amount = amount.quantize(_NANO, rounding=decimal.ROUND_UP, context=_CTX) if amount.as_tuple().exponent < -9 else amount
    if binary and amount > _MAX_INT64:
        amount = Decimal(_MAX_INT64)
    return Quantity(amount if positive else amount.copy_negate())


def quantity(text: str) -> Quantity:
    return parse_quantity(text)


def is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except LibraryError:
        return False
    return True


def sign(q: Quantity) -> int:
    return (q.amount > 0) - (q.amount < 0)


def _as_int64(q: Quantity) -> int | None:
    amount = q.amount
    if amount != amount.to_integral_value(context=_CTX):
        return None
    value = int(amount)
    return value if -(2**63) <= value <= _MAX_INT64 else None


def is_integer(q: Quantity) -> bool:
    return _as_int64(q) is not None


def as_integer(q: Quantity) -> int:
    value = _as_int64(q)
    if value is None:
        raise LibraryError("cannot convert value to integer")
    return value


def as_approximate_float(q: Quantity) -> float:
    return float(q.amount)


def add(q: Quantity, other: Quantity | int) -> Quantity:
    other_amount = other.amount if isinstance(other, Quantity) else Decimal(other)
    return Quantity(_CTX.add(q.amount, other_amount))


def sub(q: Quantity, other: Quantity | int) -> Quantity:
    other_amount = other.amount if isinstance(other, Quantity) else Decimal(other)
    return Quantity(_CTX.subtract(q.amount, other_amount))


def compare_to(q: Quantity, other: Quantity) -> int:
    return (q.amount > other.amount) - (q.amount < other.amount)


def is_greater_than(q: Quantity, other: Quantity) -> bool:
    return q.amount > other.amount


def is_less_than(q: Quantity, other: Quantity) -> bool:
    return q.amount < other.amount


Q = Quantity.cel_type
TYPES = (Quantity,)
OVERLOADS = (
    Overload("quantity", "string_to_quantity", ("string",), Q, quantity),
    Overload("isQuantity", "is_quantity_string", ("string",), "bool", is_quantity),
    Overload("sign", "quantity_sign", (Q,), "int", sign),
    Overload("isGreaterThan", "quantity_is_greater_than", (Q, Q), "bool", is_greater_than, member=True),
    Overload("isLessThan", "quantity_is_less_than", (Q, Q), "bool", is_less_than, member=True),
    Overload("compareTo", "quantity_compare_to", (Q, Q), "int", compare_to, member=True),
    Overload("add", "quantity_add", (Q, Q), Q, add, member=True),
    Overload("add", "quantity_add_int", (Q, "int"), Q, add, member=True),
    Overload("sub", "quantity_sub", (Q, Q), Q, sub, member=True),
    Overload("sub", "quantity_sub_int", (Q, "int"), Q, sub, member=True),
    Overload("isInteger", "quantity_is_integer", (Q,), "bool", is_integer, member=True),
    Overload("asInteger", "quantity_get_int", (Q,), "int", as_integer, member=True),
    Overload("asApproximateFloat", "quantity_get_float", (Q,), "double", as_approximate_float, member=True),
)
