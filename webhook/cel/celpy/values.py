"""Values between celpy and plain Python, and cel-go's equality over them.

The Kubernetes libraries work on plain Python values (``webhook.cel.library``); celpy on its
own types (``celpy.celtypes``), which refuse to compare numbers across int, uint and double.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from webhook.cel.library import OpaqueValue
from webhook.cel.library.base import OptionalValue

NO_SUCH_OVERLOAD = "no such overload"


class Namespace:
    """``format``, ``sets``, ``net``, ... as values: celpy reads ``format.named(x)`` as a member
    call on the name ``format`` and ``net.IP`` as a field selection."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


NAMESPACES = ("format", "ip", "strings", "lists", "sets", "optional", "net", "kubernetes")


def to_cel(value: Any) -> Any:
    """A plain Python value as a celpy value (library values pass through)."""
    if value is None or isinstance(value, (OpaqueValue, OptionalValue, Namespace, type)):
        return value
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value) if value < 2**63 else celtypes.UintType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, (bytes, bytearray)):
        return celtypes.BytesType(bytes(value))
    if isinstance(value, datetime.datetime):
        return celtypes.TimestampType(value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc))
    if isinstance(value, datetime.timedelta):
        return celtypes.DurationType(value)
    if isinstance(value, Mapping):
        return celtypes.MapType({to_cel(k): to_cel(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return celtypes.ListType([to_cel(item) for item in value])
    return value


class TypeName:
    """A CEL type value handed to a library function (``"%s".format([type(x)])``)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name


_CEL_TYPE_NAMES = {
    celtypes.BoolType: "bool", celtypes.IntType: "int", celtypes.UintType: "uint", celtypes.DoubleType: "double",
    celtypes.StringType: "string", celtypes.BytesType: "bytes", celtypes.ListType: "list", celtypes.MapType: "map",
    celtypes.TimestampType: "google.protobuf.Timestamp", celtypes.DurationType: "google.protobuf.Duration",
    type(None): "null_type", celtypes.TypeType: "type", OptionalValue: "optional_type",
}


def type_name(value: Any) -> str:
    """A celpy value's CEL type name (cel-go's ``TypeName()``)."""
    kind = type(value)
    return _CEL_TYPE_NAMES.get(kind) or getattr(value, "cel_type", None) or kind.__name__


def to_python(value: Any) -> Any:
    """A celpy value as a plain Python value."""
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, (celtypes.IntType, celtypes.UintType)):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.BytesType):
        return bytes(value)
    if isinstance(value, celtypes.TimestampType):
        return datetime.datetime.fromtimestamp(value.timestamp(), tz=datetime.timezone.utc)
    if isinstance(value, celtypes.DurationType):
        return datetime.timedelta(days=value.days, seconds=value.seconds, microseconds=value.microseconds)
    if isinstance(value, celtypes.MapType):
        return {to_python(k): to_python(v) for k, v in value.items()}
    if isinstance(value, celtypes.ListType):
        return [to_python(item) for item in value]
    if isinstance(value, OptionalValue) and value.has_value:
        return OptionalValue.of(to_python(value.value))
    if isinstance(value, type):
        return TypeName(_CEL_TYPE_NAMES.get(value) or getattr(value, "cel_type", value.__name__))
    return value


def error(message: str) -> CELEvalError:
    return CELEvalError(message)


def go_value(value: Any) -> str:
    """A map key as cel-go's messages print it (``%v``)."""
    if isinstance(value, celtypes.BoolType):
        return "true" if value else "false"
    return str(to_python(value))


# --- equality as cel-go has it -----------------------------------------------------------


def is_bool(value: Any) -> bool:
    return isinstance(value, (bool, celtypes.BoolType))


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not is_bool(value)


def number(value: Any) -> int | float:
    """A celpy number as a plain one (celpy's refuse to compare across types)."""
    return float(value) if isinstance(value, float) else int(value)


def equal(a: Any, b: Any) -> bool:
    """cel-go's heterogeneous equality: numbers compare by value across int, uint and double;
    values of different kinds are unequal; lists and maps compare element by element."""
    if is_bool(a) or is_bool(b):
        return is_bool(a) and is_bool(b) and bool(a) == bool(b)
    if is_number(a) or is_number(b):
        return is_number(a) and is_number(b) and number(a) == number(b)
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(equal, a, b))
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict) and len(a) == len(b)):
            return False
        for key, value in a.items():
            found = map_key(b, key)
            if found is None or not equal(value, b[found]):
                return False
        return True
    if isinstance(a, OptionalValue) or isinstance(b, OptionalValue):
        return (isinstance(a, OptionalValue) and isinstance(b, OptionalValue) and a.has_value == b.has_value
                and (not a.has_value or equal(a.value, b.value)))
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and str(a) == str(b)
    if isinstance(a, bytes) or isinstance(b, bytes):
        return isinstance(a, bytes) and isinstance(b, bytes) and bytes(a) == bytes(b)
    if isinstance(a, type) or isinstance(b, type):  # type values; a conversion's name is one too
        return a == b
    return type(a) is type(b) and a == b


def map_key(mapping: Any, key: Any) -> Any:
    """The key of ``mapping`` equal to ``key`` (numbers compare across int, uint and double)."""
    try:
        if key in mapping:
            return key
    except TypeError:  # celpy's numbers refuse to compare across types
        pass
    return next((candidate for candidate in mapping if equal(candidate, key)), None)
