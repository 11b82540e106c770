"""Kubernetes resource quantities (``library/quantity.go``, ``resource.ParseQuantity``)."""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache

from webhook.cel.library.base import LibraryError, OpaqueValue, Overload
from webhook.quantity import DECIMAL_CONTEXT, MAX_INT64, QuantityError
from webhook.quantity import parse_quantity as parse_amount


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
    return str(amount.normalize(DECIMAL_CONTEXT))


@lru_cache(maxsize=4096)
def parse_quantity(text: str) -> Quantity:
    """``resource.ParseQuantity`` (``webhook.quantity``) as a CEL value."""
    try:
        return Quantity(parse_amount(text))
    except QuantityError as err:
        raise LibraryError(str(err)) from None


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
    if amount != amount.to_integral_value(context=DECIMAL_CONTEXT):
        return None
    value = int(amount)
    return value if -(2**63) <= value <= MAX_INT64 else None


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
    return Quantity(DECIMAL_CONTEXT.add(q.amount, other_amount))


def sub(q: Quantity, other: Quantity | int) -> Quantity:
    other_amount = other.amount if isinstance(other, Quantity) else Decimal(other)
    return Quantity(DECIMAL_CONTEXT.subtract(q.amount, other_amount))


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
