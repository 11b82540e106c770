"""What a native program calls at run time: CEL's values, operators and functions over plain
JSON values (``FUNCTIONS``), the helpers the generated source names (``HELPERS``), and
``NotNative``, raised wherever cel-go's answer is not certain here."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

from webhook.cel.environment.env import FAIL_FUNCTION
from webhook.cel.errors import EngineBoundExceeded
from webhook.cel.library import LibraryError
from webhook.cel.library.base import NONE, OptionalValue, optional_entry
from webhook.cel.library.regex import matches as _re2_matches

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class NotNative(Exception):
    """This evaluator cannot answer for certain: cel-expr must (a CEL error, a value or case
    outside the subset)."""


_JSON = frozenset((dict, list, str, int, float, bool, type(None)))


# --- values -----------------------------------------------------------------------------------


def _equal(x: Any, y: Any) -> bool:
    """cel-go's heterogeneous equality over JSON values (numbers compare by value across int
    and double; other kinds never equal each other)."""
    tx, ty = type(x), type(y)
    if tx is ty:
        if tx is str or tx is int or tx is bool or tx is float:
            return x == y
        if x is None:
            return True
        if tx is list:
            return len(x) == len(y) and all(_equal(a, b) for a, b in zip(x, y))
        if tx is dict:
            if len(x) != len(y):
                return False
            for key, value in x.items():
                if type(key) is not str:
                    raise NotNative
                if key not in y:
                    return False
                if not _equal(value, y[key]):
                    return False
            return True
        raise NotNative
    if tx not in _JSON or ty not in _JSON:
        raise NotNative
    if (tx is int and ty is float) or (tx is float and ty is int):
        return x == y  # exact, as cel-go compares int and double
    return False


def _ordered(x: Any, y: Any) -> None:
    """Raise unless ``x`` and ``y`` compare in CEL (same kind, or int and double)."""
    tx, ty = type(x), type(y)
    if tx is ty and (tx is str or tx is int or tx is bool):
        return
    if (tx is int or tx is float) and (ty is int or ty is float) and x == x and y == y:
        return
    raise NotNative


def _int(value: int) -> int:
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise NotNative  # cel-go: "integer overflow"


def _add(x: Any, y: Any) -> Any:
    tx = type(x)
    if tx is type(y):
        if tx is int:
            return _int(x + y)
        if tx is float or tx is str or tx is list:
            return x + y
    raise NotNative


def _subtract(x: Any, y: Any) -> Any:
    tx = type(x)
    if tx is type(y):
        if tx is int:
            return _int(x - y)
        if tx is float:
            return x - y
    raise NotNative


def _multiply(x: Any, y: Any) -> Any:
    tx = type(x)
    if tx is type(y):
        if tx is int:
            return _int(x * y)
        if tx is float:
            return x * y
    raise NotNative


def _divide(x: Any, y: Any) -> Any:
    tx = type(x)
    if tx is type(y) and y != 0:
        if tx is int:
            quotient = abs(x) // abs(y)  # Go truncates toward zero
            return _int(quotient if (x < 0) == (y < 0) else -quotient)
        if tx is float:
            return x / y
    raise NotNative


def _modulo(x: Any, y: Any) -> Any:
    if type(x) is int and type(y) is int and y != 0:
        remainder = abs(x) % abs(y)  # Go: the sign of the dividend
        return remainder if x >= 0 else -remainder
    raise NotNative


def _negate(x: Any) -> Any:
    tx = type(x)
    if tx is int:
        return _int(-x)
    if tx is float:
        return -x
    raise NotNative


def _in(item: Any, container: Any) -> bool:
    tc = type(container)
    if tc is list:
        if type(item) is str:  # a string equals only a string: Python's own test is CEL's
            return item in container
        return any(_equal(item, element) for element in container)
    if tc is dict and type(item) is str:
        return item in container
    raise NotNative


def _index(container: Any, key: Any) -> Any:
    tc = type(container)
    if tc is list and type(key) is int and 0 <= key < len(container):
        return container[key]
    if tc is dict and type(key) is str and key in container:
        return container[key]
    raise NotNative


def _strings(*values: Any) -> None:
    for value in values:
        if type(value) is not str:
            raise NotNative


_DECIMAL = re.compile(r"[+-]?[0-9]+")  # Go's strconv.ParseInt(s, 10, 64): no spaces, no "_"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _to_string(x: Any) -> str:
    tx = type(x)
    if tx is str:
        return x
    if tx is int:
        return str(x)
    if tx is bool:
        return "true" if x else "false"
    raise NotNative  # doubles: Go's formatting; bytes: UTF-8 checks


def _to_int(x: Any) -> int:
    tx = type(x)
    if tx is int:
        return x
    if tx is str and _DECIMAL.fullmatch(x):
        return _int(int(x))
    raise NotNative


# what Go's unicode.IsSpace or Python's str.isspace may count as space (cel-cpp's trim() decides)
_MAYBE_SPACE = frozenset("\x85\xa0\u180e\u200b\ufeff")


def _trim(text: Any) -> str:
    """``trim()`` of a string with no space at either end (itself); anything else gives up."""
    if type(text) is not str:
        raise NotNative
    if text and (text[0].isspace() or text[-1].isspace() or text[0] in _MAYBE_SPACE or text[-1] in _MAYBE_SPACE):
        raise NotNative
    return text


def _fail(message: Any) -> Any:
    raise NotNative  # ``optimize``'s guards: cel-expr writes the message


def _matches(text: Any, pattern: Any) -> bool:
    _strings(text, pattern)
    try:
        return _re2_matches(text, pattern)
    except LibraryError:
        raise NotNative from None


def _join(items: Any, separator: str = "") -> str:
    if type(items) is not list:
        raise NotNative
    _strings(separator, *items)
    return separator.join(items)


def _split(text: Any, separator: Any, limit: Any = -1) -> list[str]:
    _strings(text, separator)
    if type(limit) is not int or separator == "":
        raise NotNative
    if limit == 0:
        return []
    return text.split(separator, limit - 1 if limit > 0 else -1)


def _sort(items: Any) -> list:
    if type(items) is not list:
        raise NotNative
    kinds = {type(item) for item in items}
    if len(kinds) > 1 or not kinds <= {str, int, float}:
        raise NotNative
    if float in kinds and any(item != item for item in items):
        raise NotNative  # NaN has no place in an order
    return sorted(items)


def _starts_with(text: Any, prefix: Any) -> bool:
    _strings(text, prefix)
    return text.startswith(prefix)


def _ends_with(text: Any, suffix: Any) -> bool:
    _strings(text, suffix)
    return text.endswith(suffix)


def _string_contains(text: Any, part: Any) -> bool:
    _strings(text, part)
    return part in text


def _lower_ascii(text: Any) -> str:
    _strings(text)
    return text.translate(_ASCII_LOWER)


def _upper_ascii(text: Any) -> str:
    _strings(text)
    return text.translate(_ASCII_UPPER)


def _optional(x: Any) -> OptionalValue:
    if type(x) is not OptionalValue:
        raise NotNative
    return x


def _or_value(opt: Any, default: Any) -> Any:
    opt = _optional(opt)
    return opt.value if opt.has_value else default


def _has_value(opt: Any) -> bool:
    return _optional(opt).has_value


def _value(opt: Any) -> Any:
    opt = _optional(opt)
    if not opt.has_value:
        raise NotNative  # "optional.none() dereference"
    return opt.value


def _or(opt: Any, other: Any) -> OptionalValue:
    opt = _optional(opt)
    return opt if opt.has_value else _optional(other)


def _optional_of(x: Any) -> OptionalValue:
    return OptionalValue(x, True)


def _optional_select(operand: Any, field: str) -> OptionalValue:
    if type(operand) is OptionalValue:
        if not operand.has_value:
            return NONE
        operand = operand.value
    if type(operand) is not dict:
        raise NotNative
    return OptionalValue(operand[field], True) if field in operand else NONE


def _optional_index(container: Any, key: Any) -> OptionalValue:
    entry = optional_entry(container, key)
    if entry is None:
        raise NotNative
    return entry


# Functions called as they are: (name, arity counting a member call's target) -> implementation;
# every argument is evaluated first (CEL calls are strict). Operators, size() and dyn() are
# written inline by the code generator (``Codegen.call``).
FUNCTIONS: dict[tuple[str, int], Callable[..., Any]] = {
    ("_+_", 2): _add,
    ("_-_", 2): _subtract,
    ("_*_", 2): _multiply,
    ("_/_", 2): _divide,
    ("_%_", 2): _modulo,
    ("-_", 1): _negate,
    ("@in", 2): _in,
    ("_[_]", 2): _index,
    ("string", 1): _to_string,
    ("int", 1): _to_int,
    ("startsWith", 2): _starts_with,
    ("endsWith", 2): _ends_with,
    ("contains", 2): _string_contains,
    ("matches", 2): _matches,
    ("join", 1): _join,
    ("join", 2): _join,
    ("split", 2): _split,
    ("split", 3): _split,
    ("lowerAscii", 1): _lower_ascii,
    ("trim", 1): _trim,
    (FAIL_FUNCTION, 1): _fail,
    ("upperAscii", 1): _upper_ascii,
    ("sort", 1): _sort,
    ("orValue", 2): _or_value,
    ("hasValue", 1): _has_value,
    ("value", 1): _value,
    ("or", 2): _or,
    ("optional.of", 1): _optional_of,
    ("optional.none", 0): lambda: NONE,
    ("_[?_]", 2): _optional_index,
}


def _less(x: Any, y: Any) -> bool:
    _ordered(x, y)
    return x < y


def _less_equal(x: Any, y: Any) -> bool:
    _ordered(x, y)
    return x <= y


def _greater(x: Any, y: Any) -> bool:
    _ordered(x, y)
    return x > y


def _greater_equal(x: Any, y: Any) -> bool:
    _ordered(x, y)
    return x >= y



def _bail() -> Any:
    raise NotNative


def _exceeded() -> Any:
    raise EngineBoundExceeded()


def _tick(counts: list[int], weight: int, limit: int) -> None:
    """One iteration of weight ``weight`` counted (a one-item comprehension written inline)."""
    counts[0] += 1
    counts[1] += weight
    if counts[1] > limit:
        raise EngineBoundExceeded()


def _optional_list(values: list, optional: frozenset[int]) -> list:
    out = []
    for i, value in enumerate(values):
        if i in optional:
            value = _optional(value)
            if not value.has_value:
                continue
            value = value.value
        out.append(value)
    return out


def _map_literal(entries: tuple[tuple[Any, Any, bool], ...]) -> dict:
    out: dict[str, Any] = {}
    for key, value, optional in entries:
        if type(key) is not str or key in out:
            raise NotNative  # other key kinds collide in a dict; a repeated key is an error
        if optional:
            value = _optional(value)
            if not value.has_value:
                continue
            value = value.value
        out[key] = value
    return out


def _select_optional(value: Any, field: str) -> Any:
    """``x.f`` where ``x`` may be an optional (``a.?b.c``): the plain case is inline."""
    if type(value) is OptionalValue:
        if not value.has_value:
            return NONE
        inner = value.value
        if type(inner) is not dict or field not in inner:
            raise NotNative
        return OptionalValue(inner[field], True)
    if type(value) is not dict:
        raise NotNative
    return value[field]


def _path_or(value: Any, fields: tuple[str, ...], default: Any) -> Any:
    """``value.?f1.?f2....orValue(default)``: the value down the path, or the default where a
    field is absent; selecting from a non-map is an error (cel-expr reports it)."""
    for field in fields:
        if type(value) is not dict:
            raise NotNative
        if field not in value:
            return default
        value = value[field]
    return value


_MISSING = object()


def _path_has(value: Any, fields: tuple[str, ...]) -> bool:
    """``value.?f1.?f2....hasValue()``."""
    return _path_or(value, fields, _MISSING) is not _MISSING


# ``type(x) == T`` (how ``optimize`` guards dyn values): the CEL type names of the values
# cel-expr takes from Python, and the types the guards spell without a type identifier
_CEL_TYPES = {str: "string", bool: "bool", float: "double", list: "list", dict: "map", type(None): "null_type",
              bytes: "bytes", datetime.timedelta: "google.protobuf.Duration",
              datetime.datetime: "google.protobuf.Timestamp"}
TYPE_IDENTS = frozenset(("string", "bool", "double", "list", "map", "null_type", "bytes", "int", "uint"))
TYPE_OF_VALUE = {"duration": "google.protobuf.Duration", "timestamp": "google.protobuf.Timestamp"}


def cel_type(value: Any) -> str:
    kind = type(value)
    if kind is int:
        if INT64_MIN <= value <= INT64_MAX:
            return "int"
        raise NotNative  # cel-expr decides what a larger Python int is
    name = _CEL_TYPES.get(kind)
    if name is None:
        raise NotNative  # optionals, library values
    return name


# the names the generated source calls (``FUNCTIONS``' implementations get names of their own)
HELPERS: dict[str, Any] = {
    "_bail": _bail, "_exceeded": _exceeded, "_equal": _equal, "_optional_list": _optional_list, "_map_literal": _map_literal,
    "_optional_select": _optional_select, "_select_optional": _select_optional, "_path_or": _path_or,
    "_path_has": _path_has, "_cel_type": cel_type, "_tick": _tick,
    "_less": _less, "_less_equal": _less_equal, "_greater": _greater, "_greater_equal": _greater_equal,
}
