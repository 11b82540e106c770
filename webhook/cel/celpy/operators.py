"""The celpy functions whose celpy versions differ from cel-go, and those behind the optional
syntax ``rewrite`` spells out: field selection (``no such key: f``; through an optional,
the result is optional; ``net.IP`` names a type), indexing with cel-go's messages, heterogeneous
equality (``1 == 1.0``), cross-type numeric ordering, arithmetic that neither mixes number types
nor wraps, ``||``/``&&``/``!`` over errors, and Go's duration parser.
"""

from __future__ import annotations

import datetime
import math
import operator
from collections.abc import Callable
from functools import cache
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError, NameContainer

from webhook.cel.celpy.rewrite import OPT_INDEX, OPT_LIST, OPT_MAP, OPT_SELECT
from webhook.cel.celpy.values import (
    NO_SUCH_OVERLOAD, Namespace, equal, error, go_value, is_bool, is_number, map_key, number, to_cel, to_python,
    type_name,
)
from webhook.cel.library import OPAQUE_TYPES
from webhook.cel.library.base import NONE, OptionalValue
from webhook.cel.library.strings_format import format_string
from webhook.cel.common.typenames import operator_error
from webhook.cel.common.values import parse_duration
from webhook.gocompat.fmt import go_float
from webhook.gocompat.strconv import go_parse_float, go_parse_int
from webhook.gocompat.time import go_rfc3339_nano, parse_rfc3339

# qualified type names -> the class type() returns ("net.IP", "google.protobuf.Duration")
_TYPE_VALUES = {t.cel_type: t for t in OPAQUE_TYPES} | {
    "google.protobuf.Timestamp": celtypes.TimestampType, "google.protobuf.Duration": celtypes.DurationType}
_TYPE_PACKAGES = {name.rsplit(".", 1)[0] for name in _TYPE_VALUES}  # "google.protobuf", "net"


def select(operand: Any, field: str) -> Any:
    """``operand.field`` as cel-go evaluates it."""
    if isinstance(operand, CELEvalError):
        return operand
    if isinstance(operand, NameContainer) and field == "protobuf":  # celpy's own package: google
        return Namespace("google.protobuf")
    if isinstance(operand, Namespace):  # a qualified type name: net.IP, google.protobuf.Duration
        name = f"{operand.name}.{field}"
        if name in _TYPE_PACKAGES:
            return Namespace(name)
        return _TYPE_VALUES[name] if name in _TYPE_VALUES else error(f"undeclared reference to '{name}'")
    if isinstance(operand, OptionalValue):  # selection through an optional stays optional
        if not operand.has_value:
            return NONE
        value = select(to_cel(operand.value), field)
        return value if isinstance(value, CELEvalError) else OptionalValue.of(to_python(value))
    if isinstance(operand, celtypes.MapType):
        key = celtypes.StringType(field)
        return operand[key] if key in operand else error(f"no such key: {field}")
    if isinstance(operand, celtypes.ListType):
        return error(_STRING_INDEX)
    return error(f"no such key: {field}")  # cel-go qualifies any other value as a missing key


# cel-go's attribute qualification of a list by a field name (types.IndexOrError)
_STRING_INDEX = "unsupported index type 'string' in list"


def has(operand: Any, field: str) -> Any:
    """``has(operand.field)`` as cel-go tests presence: a map's key; a list fails on the field
    name as an index; any other value has no fields."""
    if isinstance(operand, CELEvalError):
        return operand
    if isinstance(operand, OptionalValue):
        return has(to_cel(operand.value), field) if operand.has_value else celtypes.BoolType(False)
    if isinstance(operand, celtypes.MapType):
        return celtypes.BoolType(celtypes.StringType(field) in operand)
    if isinstance(operand, celtypes.ListType):
        return error(_STRING_INDEX)
    return celtypes.BoolType(False)


def index(operand: Any, key: Any) -> Any:
    """``operand[key]`` with cel-go's messages."""
    for value in (operand, key):
        if isinstance(value, CELEvalError):
            return value
    if isinstance(operand, OptionalValue):
        if not operand.has_value:
            return NONE
        value = index(to_cel(operand.value), key)
        return value if isinstance(value, CELEvalError) else OptionalValue.of(to_python(value))
    if isinstance(operand, celtypes.ListType):
        position = _list_index(key)
        if position is None:
            return _index_error(key)
        if not 0 <= position < len(operand):
            return error(f"index out of bounds: {position}")
        return operand[position]
    if isinstance(operand, celtypes.MapType):
        found = map_key(operand, key)
        return operand[found] if found is not None else error(f"no such key: {go_value(key)}")
    return error(f"no such key: {go_value(key)}")  # cel-go qualifies any other value as a missing key


def _index_error(key: Any) -> CELEvalError:
    """cel-go's ``types.IndexOrError`` for a list index that is no whole number."""
    if isinstance(key, celtypes.DoubleType):
        return error(f"unsupported index value {float(key)!r} in list")
    return error(f"unsupported index type '{type_name(key)}' in list")


def _list_index(key: Any) -> int | None:
    if isinstance(key, (celtypes.IntType, celtypes.UintType)):
        return int(key)
    if isinstance(key, celtypes.DoubleType) and float(key).is_integer():
        return int(key)
    return None


def opt_select(operand: Any, field: Any) -> Any:
    """``operand.?field``: optional.of the field's value, or none when it is absent."""
    if isinstance(operand, OptionalValue):
        return opt_select(to_cel(operand.value), field) if operand.has_value else NONE
    if isinstance(operand, celtypes.MapType):
        return OptionalValue.of(to_python(operand[field])) if field in operand else NONE
    if isinstance(operand, celtypes.ListType):
        return error(_STRING_INDEX)
    return NONE  # presence, as has(): any other value has no fields


def opt_index(operand: Any, key: Any) -> Any:
    """``operand[?key]``: optional.of the element, or none when there is none."""
    if isinstance(operand, OptionalValue):
        return opt_index(to_cel(operand.value), key) if operand.has_value else NONE
    if isinstance(operand, celtypes.ListType):
        position = _list_index(key)
        if position is None:
            return _index_error(key)
        return OptionalValue.of(to_python(operand[position])) if 0 <= position < len(operand) else NONE
    if isinstance(operand, celtypes.MapType):
        found = map_key(operand, key)
        return OptionalValue.of(to_python(operand[found])) if found is not None else NONE
    return NONE  # cel-go's presence test: any other value has no elements


def opt_list(elements: Any, optional_positions: Any) -> Any:
    """``[a, ?b]``: the optional elements' values where present, left out where not."""
    out = []
    for position, element in enumerate(elements):
        if position not in optional_positions:
            out.append(element)
        elif not isinstance(element, OptionalValue):
            return error(NO_SUCH_OVERLOAD)
        elif element.has_value:
            out.append(to_cel(element.value))
    return celtypes.ListType(out)


def opt_map(flat_entries: Any, optional_positions: Any) -> Any:
    """``{?k: v}``: the optional entries where their value is present."""
    out = celtypes.MapType()
    for position in range(len(flat_entries) // 2):
        key, value = flat_entries[2 * position], flat_entries[2 * position + 1]
        if position in optional_positions:
            if not isinstance(value, OptionalValue):
                return error(NO_SUCH_OVERLOAD)
            if not value.has_value:
                continue
            value = to_cel(value.value)
        if key in out:
            return error(f"Failed with repeated key: {go_value(key)}")
        out[key] = value
    return out


# --- operators --------------------------------------------------------------------------


def _equality(negate: bool) -> Callable[[Any, Any], Any]:
    def compare(a: Any, b: Any) -> Any:
        for value in (a, b):
            if isinstance(value, CELEvalError):
                return value
        return celtypes.BoolType(equal(a, b) is not negate)

    return compare


_ORDERED = (celtypes.StringType, celtypes.BytesType, celtypes.BoolType, celtypes.TimestampType, celtypes.DurationType)


def _ordering(python: Callable[[Any, Any], bool], function: str) -> Callable[[Any, Any], Any]:
    """Ordering of numbers by value across int, uint and double (cel-go's cross-type ordering)
    and of two values of one ordered type; nothing else is ordered."""

    def compare(a: Any, b: Any) -> Any:
        for value in (a, b):
            if isinstance(value, CELEvalError):
                return value
        if is_number(a) and is_number(b):
            return celtypes.BoolType(python(number(a), number(b)))
        if type(a) is type(b) and isinstance(a, _ORDERED):
            return celtypes.BoolType(python(a, b))
        return error(operator_error(function, type_name(a)))

    return compare


def _arithmetic(base: Callable[..., Any], symbol: str) -> Callable[..., Any]:
    """celpy's arithmetic with cel-go's rules and messages: no mixing of int, uint and double,
    ``division by zero``/``modulus by zero``, ``integer overflow``."""

    def apply(*args: Any) -> Any:
        for value in args:
            if isinstance(value, CELEvalError):
                return value
        failed = error(operator_error(f"_{symbol}_" if len(args) == 2 else "-_", type_name(args[0])))
        if any(is_bool(value) for value in args):  # celpy's bools are ints
            return failed
        if symbol in "*/%" and not all(is_number(value) for value in args):  # celpy scales durations
            return failed
        if len(args) == 2 and is_number(args[0]) and is_number(args[1]):
            if type(args[0]) is not type(args[1]):
                return failed
            if symbol in "/%" and not isinstance(args[0], float) and args[1] == 0:
                return error("division by zero" if symbol == "/" else "modulus by zero")
        try:
            result = base(*args)
        except (ValueError, OverflowError):
            unsigned = isinstance(args[0], celtypes.UintType)
            return error("unsigned integer overflow" if unsigned else "integer overflow")
        except TypeError:
            return failed
        return celtypes.ListType(result) if type(result) is list else result  # list + list

    return apply


def _logic(decisive: bool) -> Callable[[Any, Any], Any]:
    """``||`` (``decisive`` True) and ``&&``: either side's decisive value wins over an error;
    otherwise the first error."""

    def apply(a: Any, b: Any) -> Any:
        if any(isinstance(v, celtypes.BoolType) and bool(v) is decisive for v in (a, b)):
            return celtypes.BoolType(decisive)
        for value in (a, b):
            if isinstance(value, CELEvalError):
                return value
        if isinstance(a, celtypes.BoolType) and isinstance(b, celtypes.BoolType):
            return celtypes.BoolType(not decisive)
        return error(NO_SUCH_OVERLOAD)

    return apply


def _not(value: Any) -> Any:
    if isinstance(value, CELEvalError):
        return value
    return celtypes.BoolType(not value) if isinstance(value, celtypes.BoolType) else error(NO_SUCH_OVERLOAD)


def _in(item: Any, container: Any) -> Any:
    for value in (item, container):
        if isinstance(value, CELEvalError):
            return value
    if isinstance(container, celtypes.ListType):
        return celtypes.BoolType(any(equal(item, element) for element in container))
    if isinstance(container, celtypes.MapType):
        return celtypes.BoolType(map_key(container, item) is not None)
    return error(NO_SUCH_OVERLOAD)


def _to_string(value: Any) -> Any:
    """``string(x)`` as cel-go converts: no lists, maps or null; bytes must be UTF-8."""
    if isinstance(value, celtypes.DoubleType):
        return celtypes.StringType(go_float(float(value)))  # strconv.FormatFloat(f, 'g', -1, 64)
    if isinstance(value, celtypes.BytesType):
        try:
            return celtypes.StringType(bytes(value).decode("utf-8"))
        except UnicodeDecodeError:
            return error("invalid UTF-8 in bytes, cannot convert to string")
    if isinstance(value, celtypes.TimestampType):  # in its own offset, a date-time field's (Go's location)
        return celtypes.StringType(go_rfc3339_nano(value))
    if isinstance(value, (celtypes.StringType, celtypes.BoolType, celtypes.IntType, celtypes.UintType,
                          celtypes.DurationType)):
        return celtypes.StringType(format_string(to_python(value)))
    return error(NO_SUCH_OVERLOAD)


def _conversion_error(name: str) -> CELEvalError:
    return error(f"type conversion error from 'string' to '{name}'")


def _to_number(kind: type, low: int, high: int, name: str) -> Callable[[Any], Any]:
    """``int(x)``/``uint(x)`` as cel-go converts: from numbers (doubles truncated, in range),
    decimal strings as Go's strconv reads them, timestamps (int: Unix seconds) and, as the
    default engine allows, bools."""
    overflow = "integer overflow" if kind is celtypes.IntType else "unsigned integer overflow"

    def convert(value: Any) -> Any:
        if isinstance(value, celtypes.StringType):
            number_value = go_parse_int(str(value), signed=kind is celtypes.IntType)
            return _conversion_error(name) if number_value is None else kind(number_value)
        if isinstance(value, celtypes.TimestampType) and kind is celtypes.IntType:
            return kind(math.floor(value.timestamp()))
        if isinstance(value, celtypes.DoubleType):
            if math.isnan(value) or not low - 1 < float(value) < high + 1:
                return error(overflow)
            return kind(int(float(value)))
        if is_number(value) or isinstance(value, celtypes.BoolType):
            if not low <= int(value) <= high:
                return error(overflow)
            return kind(int(value))
        return error(NO_SUCH_OVERLOAD)

    return convert


def _to_double(value: Any) -> Any:
    if isinstance(value, celtypes.StringType):
        number = go_parse_float(str(value))
        return _conversion_error("double") if number is None else celtypes.DoubleType(number)
    return celtypes.DoubleType(float(value)) if is_number(value) else error(NO_SUCH_OVERLOAD)


_BOOL_STRINGS = {"1": True, "t": True, "T": True, "true": True, "TRUE": True, "True": True,  # strconv.ParseBool
                 "0": False, "f": False, "F": False, "false": False, "FALSE": False, "False": False}


def _to_bool(value: Any) -> Any:
    if isinstance(value, celtypes.BoolType):
        return value
    if isinstance(value, celtypes.StringType) and str(value) in _BOOL_STRINGS:
        return celtypes.BoolType(_BOOL_STRINGS[str(value)])
    return _conversion_error("bool") if isinstance(value, str) else error(NO_SUCH_OVERLOAD)


def _size(value: Any) -> Any:
    if isinstance(value, (str, bytes, celtypes.ListType, celtypes.MapType)):
        return celtypes.IntType(len(value))
    return error(operator_error("size", type_name(value)))


def _string_method(base: Callable[..., Any]) -> Callable[..., Any]:
    """celpy's ``contains``/``startsWith``/``endsWith``, for strings only (celpy's also take lists)."""

    def apply(receiver: Any, *args: Any) -> Any:
        if not isinstance(receiver, celtypes.StringType) or not all(isinstance(a, celtypes.StringType) for a in args):
            return error(NO_SUCH_OVERLOAD)
        return base(receiver, *args)

    return apply


@cache
def builtins() -> dict[str, Callable[..., Any]]:
    """celpy's built-in functions as cel-go has them (conversions and string methods); the
    Kubernetes overloads of the same names come first (``webhook.cel.engine.cel_python.Function``)."""
    base = celpy.evaluation.base_functions
    return {
        "string": _to_string,
        "int": _to_number(celtypes.IntType, -(2**63), 2**63 - 1, "int"),
        "uint": _to_number(celtypes.UintType, 0, 2**64 - 1, "uint"),
        "double": _to_double,
        "bool": _to_bool,
        "size": _size,
        **{name: _string_method(base[name]) for name in ("contains", "startsWith", "endsWith")},
        "duration": _conversion(base["duration"], parse_duration, "google.protobuf.Duration"),
        "timestamp": _conversion(base["timestamp"], parse_rfc3339, "google.protobuf.Timestamp"),
    }


# cel-go's timestamp range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z, in Unix seconds
_UNIX_SECONDS = range(-62_135_596_800, 253_402_300_800)


def _conversion(base: Callable[[Any], Any], parse: Callable[[str], Any], type_name: str) -> Callable[[Any], Any]:
    """celpy's ``duration``/``timestamp`` with Go's parser for strings and cel-go's message;
    ``timestamp(int)`` is Unix seconds."""

    def convert(value: Any) -> Any:
        if isinstance(value, celtypes.IntType) and type_name == "google.protobuf.Timestamp":
            if int(value) not in _UNIX_SECONDS:
                return error("timestamp overflow")
            return to_cel(datetime.datetime.fromtimestamp(int(value), tz=datetime.timezone.utc))
        if not isinstance(value, str):
            kind = celtypes.DurationType if type_name == "google.protobuf.Duration" else celtypes.TimestampType
            return base(value) if isinstance(value, kind) else error(NO_SUCH_OVERLOAD)
        try:
            parsed = parse(str(value))
        except OverflowError:
            return error("timestamp overflow")
        except ValueError:
            parsed = None
        return _conversion_error(type_name) if parsed is None else to_cel(parsed)

    return convert


def operators() -> dict[str, Callable[..., Any]]:
    """The celpy functions this module replaces or adds."""
    base = celpy.evaluation.base_functions
    return {
        "_==_": _equality(False),
        "_!=_": _equality(True),
        "_<_": _ordering(operator.lt, "_<_"),
        "_<=_": _ordering(operator.le, "_<=_"),
        "_>_": _ordering(operator.gt, "_>_"),
        "_>=_": _ordering(operator.ge, "_>=_"),
        "_in_": _in,
        "_||_": _logic(True),
        "_&&_": _logic(False),
        "!_": _not,
        **{f"_{symbol}_": _arithmetic(base[f"_{symbol}_"], symbol) for symbol in "+-*/%"},
        "-_": _arithmetic(base["-_"], "-"),
        "_[_]": index,
        OPT_SELECT: opt_select,
        OPT_INDEX: opt_index,
        OPT_LIST: opt_list,
        OPT_MAP: opt_map,
    }
