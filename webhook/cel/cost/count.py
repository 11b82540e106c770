"""cel-go's *actual* cost of one evaluation, as the apiserver charges a CRD rule.

Kubernetes evaluates a rule with cel-go's cost tracker on (``cel.OptTrackCost``, Kubernetes'
``library.CostEstimator.CallCost`` as its estimator) and charges what it counted against the
per-call limit and the request's budget. cel-expr counts nothing, so a rule's checked AST
(cel-go's shape, from ``webhook.cel.checker``) is evaluated here a second time, counting as
cel-go's ``CostObserver`` does:

* a variable, a field selection, an index, a presence test's operand: 1 each (``has()``
  itself 0: Kubernetes turns off ``PresenceTestHasCost``); constants 0;
* ``&&``, ``||`` and ``?:`` cost nothing themselves and evaluate only what cel-go evaluates
  (left to right, short-circuit);
* list and map literals 10 and 30, unless every element is a constant: ``OptOptimize``
  builds those once (and type conversions of a constant, and ``in`` over a constant list);
* a comprehension: its range, its accumulator's initial value, each iteration's condition
  and step, its result;
* a call: ``CallCost`` of its actual arguments and result (Kubernetes' libraries), else
  cel-go's own charges (string traversals, ``in`` over a list, comparisons of strings, ...).

Errors are values, as in cel-go: an evaluation goes on past them and is charged for what it
evaluates. Where this evaluator is not sure of cel-go's count (a function, a value or a
case outside what it knows), ``ActualCost.count`` answers None and the caller charges the
estimate, never less than cel-go would. The count stops the moment it passes the limit:
no evaluation here runs away either.
"""

from __future__ import annotations

import datetime
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.cel.checker.checker import Checked
from webhook.cel.cost.estimate import LIST_CREATE, MAP_CREATE, REGEX_LENGTH, STRING_TRAVERSAL
from webhook.cel.library import OVERLOADS, LibraryError, OpaqueValue, Overload
from webhook.cel.library import ext
from webhook.cel.library.base import NONE, OptionalValue
from webhook.cel.library.format import NamedFormat
from webhook.cel.library.lists import cel_equals
from webhook.cel.library.regex import find, find_all, matches
from webhook.cel.library.dispatch import select_overload
from webhook.cel.syntax.ast import (Call, Comprehension, CreateList, CreateMap, CreateStruct, Expr, Ident, Literal, Select, walk)
from webhook.cel.common.types import DYN
from webhook.cel.common.values import parse_duration
from webhook.gocompat.strconv import go_parse_int
from webhook.gocompat.time import parse_rfc3339

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class Unknown(Exception):
    """cel-go's count is not known here: the caller charges the estimate."""


class _Exceeded(Exception):
    def __init__(self, cost: int) -> None:
        self.cost = cost


@dataclass(frozen=True, slots=True)
class Error:
    """A CEL error value (it propagates; what is evaluated meanwhile is charged)."""

    message: str


@dataclass(frozen=True, slots=True)
class CelTypeValue:
    """A CEL type as a value (``type(x)``, ``int``)."""

    name: str


EXCEEDED = object()  # the value of a count that passed the limit


@dataclass(frozen=True, slots=True)
class CountedEvaluation:
    value: Any   # the evaluation's value, an ``Error``, or ``EXCEEDED``
    cost: int    # what cel-go charged (up to the step that passed the limit)


class _Frame:
    """One count's state: the activation, the comprehension variables in scope, the cost so far."""

    __slots__ = ("activation", "locals", "cost", "limit")

    def __init__(self, activation: Mapping[str, Any], limit: int) -> None:
        self.activation = activation
        self.locals: dict[str, Any] = {}
        self.cost = 0
        self.limit = limit

    def charge(self, amount: int) -> None:
        self.cost += amount
        if self.cost > self.limit:
            raise _Exceeded(self.cost)


Step = Callable[[_Frame], Any]


class ActualCost:
    """The cost counter of one checked expression (compiled once)."""

    __slots__ = ("_root",)

    def __init__(self, checked: Checked) -> None:
        self._root: Step | None
        try:
            self._root = _Compiler(checked).compile(checked.expr, frozenset())
        except (Unknown, RecursionError):  # RecursionError: nested deeper than Python's stack
            self._root = None

    def count(self, activation: Mapping[str, Any], limit: int) -> CountedEvaluation | None:
        """cel-go's value and cost on ``activation`` (None: not known here)."""
        if self._root is None:
            return None
        frame = _Frame(activation, limit)
        try:
            value = self._root(frame)
        except _Exceeded as exceeded:
            return CountedEvaluation(EXCEEDED, exceeded.cost)
        except Exception:  # Unknown, or a value outside what is known here (nesting too deep...)
            return None
        return CountedEvaluation(value, frame.cost)


# --- sizes (cel-go's actualSize, Kubernetes' traversalCost) ------------------------------------


def actual_size(value: Any) -> int:
    kind = type(value)
    if kind is str or kind is bytes or kind is list or kind is dict:
        return len(value)
    if kind is OptionalValue and value.has_value:
        return actual_size(value.value)
    return 1


def _traversal(value: Any) -> int:
    kind = type(value)
    if kind is str:
        return int(len(value.encode()) * STRING_TRAVERSAL)
    if kind is bytes:
        return int(len(value) * STRING_TRAVERSAL)
    if kind is list:
        return sum(_traversal(item) for item in value)
    if kind is dict:
        return sum(_traversal(key) + _traversal(item) for key, item in value.items())
    return 1


def _ceil(size: float, factor: float) -> int:
    return math.ceil(size * factor)


# --- call costs --------------------------------------------------------------------------------

def _string_traversal(args: list, result: Any) -> int:
    return _ceil(actual_size(args[0]), STRING_TRAVERSAL)


def _double_traversal(args: list, result: Any) -> int:
    return _ceil(actual_size(args[0]) * 2, STRING_TRAVERSAL)


def _regex(args: list, result: Any) -> int:
    return (_ceil(1.0 + actual_size(args[0]), STRING_TRAVERSAL)
            * _ceil(actual_size(args[1]), REGEX_LENGTH))


def _nominal(args: list, result: Any) -> int:
    return 1


def _contains_ip(args: list, result: Any, *, cidr: bool, string: bool) -> int:
    cidr_size = actual_size(args[0])
    cost = _ceil(cidr_size + cidr_size, STRING_TRAVERSAL)
    if cidr:
        cost += _ceil(cidr_size, STRING_TRAVERSAL) + 1
    if string:
        cost += _ceil(actual_size(args[1]), STRING_TRAVERSAL)
    return cost


def _allocating_list(factor: float, size: int) -> int:
    """cel-go ext lists' trackAllocatingListCall."""
    return int(size * factor) + 1 + LIST_CREATE


# Kubernetes' library.CostEstimator.CallCost, by function name (and overload where it looks)
_KUBERNETES: dict[str, Callable[[list, Any], int]] = {
    **dict.fromkeys(("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"), lambda a, r: _traversal(a[0])),
    **dict.fromkeys(("url", "lowerAscii", "upperAscii", "substring", "trim", "jsonpatch.escapeKey"), _string_traversal),
    **dict.fromkeys(("replace", "split"), _double_traversal),
    "join": lambda a, r: _ceil(actual_size(r) * 2, STRING_TRAVERSAL),
    **dict.fromkeys(("find", "findAll"), _regex),
    **dict.fromkeys(("cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver"), _string_traversal),
    "ip.isCanonical": _double_traversal,
    **dict.fromkeys(("masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
                     "isLinkLocalUnicast", "isGlobalUnicast", "format.named", "sign", "asInteger", "isInteger",
                     "asApproximateFloat", "isGreaterThan", "isLessThan", "compareTo", "add", "sub", "major",
                     "minor", "patch", "getScheme", "getHostname", "getHost", "getPort", "getEscapedPath",
                     "getQuery"), _nominal),
}

# cel-go's CostTracker.costCall, by overload id (and the lists extension's trackers)
_CEL_GO: dict[str, Callable[[list, Any], int]] = {
    **dict.fromkeys(("starts_with_string", "ends_with_string", "string_to_bytes", "bytes_to_string",
                     "strings_quote", "string_format"), _string_traversal),
    "in_list": lambda a, r: actual_size(a[1]),
    **dict.fromkeys(("less_string", "greater_string", "less_equals_string", "greater_equals_string",
                     "less_bytes", "greater_bytes", "less_equals_bytes", "greater_equals_bytes",
                     "equals", "not_equals"),
                    lambda a, r: _ceil(min(actual_size(a[0]), actual_size(a[1])), STRING_TRAVERSAL)),
    **dict.fromkeys(("add_string", "add_bytes"),
                    lambda a, r: _ceil(actual_size(a[0]) + actual_size(a[1]), STRING_TRAVERSAL)),
    "matches_string": _regex,
    "contains_string": lambda a, r: (_ceil(actual_size(a[0]), STRING_TRAVERSAL)
                                     * _ceil(actual_size(a[1]), STRING_TRAVERSAL)),
    # the lists and sets extensions' trackers
    **dict.fromkeys(("list_slice", "lists_range", "list_reverse"), lambda a, r: _allocating_list(1, actual_size(r))),
    "list_flatten": lambda a, r: _allocating_list(1, actual_size(a[0])),
    "list_flatten_int": lambda a, r: _allocating_list(a[1], actual_size(a[0])),
    "list_distinct": lambda a, r: _self_compare(a[0]),
    **dict.fromkeys((f"list_{t}_sort" for t in ("bool", "bytes", "double", "int", "string")),
                    lambda a, r: _self_compare(a[0])),
    **dict.fromkeys(("list_sets_contains_list", "list_sets_intersects_list"),
                    lambda a, r: 1 + int(actual_size(a[0]) * actual_size(a[1]) * 1.0)),
    "list_sets_equivalent_list": lambda a, r: 1 + int(actual_size(a[0]) * actual_size(a[1]) * 2.0),
}


def _self_compare(items: Any) -> int:
    """cel-go ext lists' trackListSelfCompare (distinct, sort): O(n²) comparisons."""
    size = actual_size(items)
    factor = 2.0
    if size and type(items) is list and type(items[0]) in (str, bytes):
        factor += STRING_TRAVERSAL
    return _allocating_list(factor, size * size)


def call_cost(function: str, overload: str, args: list, result: Any) -> int:
    """What cel-go charges for one call (Kubernetes' ``CallCost`` first, as cel-go asks it first)."""
    kubernetes = _KUBERNETES.get(function)
    if kubernetes is not None and args:
        return kubernetes(args, result)
    if function == "ip" and args:
        return 1 if overload == "cidr_ip" else _string_traversal(args, result)
    if function in ("containsIP", "containsCIDR") and len(args) >= 2:
        return _contains_ip(args, result, cidr=function == "containsCIDR", string=overload.endswith("_string"))
    if function == "_==_" and len(args) == 2 and isinstance(args[0], OpaqueValue):
        return 1
    if function == "validate" and len(args) == 2:
        if not isinstance(args[0], NamedFormat):
            return 1
        if args[0].name not in _MAX_REGEX_SIZE:
            raise Unknown(function)  # a format whose regex size Kubernetes takes from a library's pattern
        return _ceil(1.0 + actual_size(args[1]), STRING_TRAVERSAL) * _ceil(_MAX_REGEX_SIZE[args[0].name], REGEX_LENGTH)
    tracked = _CEL_GO.get(overload)
    if tracked is not None:
        return tracked(args, result)
    if function in _UNKNOWN_FUNCTIONS or overload.startswith(("list_sets", "list_flatten", "list_distinct")) \
            or overload.endswith("_sort"):
        raise Unknown(overload)  # a tracker's overload not recognised from the arguments
    return 1


# Kubernetes' ConstantFormats' MaxRegexSize (what validate() is charged as a regex of that length)
_MAX_REGEX_SIZE = {"dns1123Label": 30, "dns1123Subdomain": 60, "dns1035Label": 30, "qualifiedName": 60,
                   "portName": 20, "dns1123LabelPrefix": 30, "dns1123SubdomainPrefix": 60,
                   "dns1035LabelPrefix": 30, "labelValue": 40}

# functions whose charges are not ported here
_UNKNOWN_FUNCTIONS = frozenset({"@sortByAssociatedKeys", "check", "fieldSelector", "labelSelector"})


# --- values ------------------------------------------------------------------------------------

def _is_number(value: Any) -> bool:
    kind = type(value)
    return kind is int or kind is float


def _kind(value: Any) -> str:
    """The runtime kind used to pick an overload: int double string bytes bool list map null ..."""
    kind = type(value)
    return _KINDS.get(kind) or ("opaque" if isinstance(value, OpaqueValue) else "other")


_KINDS = {int: "int", float: "double", str: "string", bytes: "bytes", bool: "bool", list: "list", dict: "map",
          type(None): "null", datetime.datetime: "timestamp", datetime.timedelta: "duration"}

_COMPARE = {"_<_": ("less", lambda x, y: x < y), "_<=_": ("less_equals", lambda x, y: x <= y),
            "_>_": ("greater", lambda x, y: x > y), "_>=_": ("greater_equals", lambda x, y: x >= y)}


def _compare(function: str, x: Any, y: Any) -> tuple[str, Any]:
    prefix, test = _COMPARE[function]
    kx, ky = _kind(x), _kind(y)
    if kx == ky and kx in ("string", "bytes", "bool", "int", "double", "timestamp", "duration"):
        return f"{prefix}_{kx}", test(x, y)
    if _is_number(x) and _is_number(y):
        if x != x or y != y:
            return f"{prefix}_{kx}_{ky}", False
        return f"{prefix}_{kx}_{ky}", test(x, y)
    return "", Error("no such overload")


def _int(value: int) -> Any:
    return value if _INT64_MIN <= value <= _INT64_MAX else Error("integer overflow")


_ARITHMETIC = {"_+_": ("add", operator.add), "_-_": ("subtract", operator.sub), "_*_": ("multiply", operator.mul)}


def _arithmetic(function: str, x: Any, y: Any) -> tuple[str, Any]:
    kx, ky = _kind(x), _kind(y)
    if kx != ky:
        return "", Error("no such overload")
    if kx == "int":
        if function in _ARITHMETIC:
            name, apply = _ARITHMETIC[function]
            return f"{name}_int64", _int(apply(x, y))
        if y == 0:
            return "", Error("division by zero" if function == "_/_" else "modulus by zero")
        quotient, remainder = abs(x) // abs(y), abs(x) % abs(y)  # Go truncates toward zero
        if function == "_/_":
            return "divide_int64", _int(quotient if (x < 0) == (y < 0) else -quotient)
        return "modulo_int64", remainder if x >= 0 else -remainder
    if kx == "double" and function in _ARITHMETIC:
        name, apply = _ARITHMETIC[function]
        return f"{name}_double", apply(x, y)
    if kx == "double" and function == "_/_":
        if y == 0:  # IEEE 754, as Go divides
            return "divide_double", math.nan if x == 0 or x != x else math.copysign(math.inf, x) * math.copysign(1, y)
        return "divide_double", x / y
    if function == "_+_" and kx in ("string", "bytes", "list"):
        return f"add_{kx}", x + y
    raise Unknown(f"{function}({kx}, {ky})")


def _index(container: Any, key: Any) -> Any:
    kind = type(container)
    if kind is list:
        if type(key) is float:
            if key != int(key):
                raise Unknown("fractional index")
            key = int(key)
        if type(key) is not int:
            return Error("unsupported index type")
        if 0 <= key < len(container):
            return container[key]
        return Error(f"index out of bounds: {key}")
    if kind is dict:
        if type(key) is str or type(key) is bool:
            return container[key] if key in container else Error(f"no such key: {key}")
        raise Unknown("a map index of another kind")
    raise Unknown("an index on a value of another kind")


def _in(item: Any, container: Any) -> tuple[str, Any]:
    kind = type(container)
    if kind is list:
        return "in_list", any(cel_equals(item, element) for element in container)
    if kind is dict:
        if type(item) is str:
            return "in_map", item in container
        raise Unknown("a map key of another kind")
    return "", Error("no such overload")


def _size(value: Any) -> tuple[str, Any]:
    kind = type(value)
    if kind is str or kind is bytes or kind is list or kind is dict:
        return "size", len(value)
    return "", Error("no such overload")


def _to_string(value: Any) -> tuple[str, Any]:
    kind = type(value)
    if kind is str:
        return "string_to_string", value
    if kind is int:
        return "int64_to_string", str(value)
    if kind is bool:
        return "bool_to_string", "true" if value else "false"
    raise Unknown("string() of this kind")


def _to_int(value: Any) -> tuple[str, Any]:
    kind = type(value)
    if kind is int:
        return "int64_to_int64", value
    if kind is str:
        parsed = go_parse_int(value)
        return "string_to_int64", Error("type conversion error") if parsed is None else _int(parsed)
    raise Unknown("int() of this kind")


_TYPE_NAMES = {int: "int", float: "double", str: "string", bool: "bool", bytes: "bytes", type(None): "null_type",
               list: "list", datetime.datetime: "google.protobuf.Timestamp",
               datetime.timedelta: "google.protobuf.Duration", CelTypeValue: "type"}
# type names that are values as they are (a map's type may be a schema's object type instead)
_TYPE_IDENTS = frozenset(_TYPE_NAMES.values()) - {"google.protobuf.Timestamp", "google.protobuf.Duration"} | {"map"}


def _type_of(value: Any) -> tuple[str, Any]:
    name = _TYPE_NAMES.get(type(value))
    if name is None:
        if not isinstance(value, OpaqueValue):
            raise Unknown("the type of a map (maybe a schema's object type)")
        name = value.cel_type
    return "type", CelTypeValue(name)


def _to_bytes(value: Any) -> tuple[str, Any]:
    kind = type(value)
    if kind is bytes:
        return "bytes_to_bytes", value
    if kind is str:
        return "string_to_bytes", value.encode()
    raise Unknown("bytes() of this kind")


def _parsed(overload: str, parse: Callable[[str], Any], text: Any) -> tuple[str, Any]:
    if type(text) is not str:
        raise Unknown(overload)
    value = parse(text)
    return overload, Error("type conversion error") if value is None else value


def _to_double(value: Any) -> tuple[str, Any]:
    kind = type(value)
    if kind is float:
        return "double_to_double", value
    if kind is int:
        return "int64_to_double", float(value)
    raise Unknown("double() of this kind")


def _optional_entry(container: Any, key: Any) -> Any:
    """``container.?key`` / ``container[?key]``: an optional of the entry (none when absent)."""
    if type(container) is OptionalValue:
        if not container.has_value:
            return NONE
        container = container.value
    kind = type(container)
    if kind is dict and type(key) is str:
        return OptionalValue.of(container[key]) if key in container else NONE
    if kind is list and type(key) is int:
        return OptionalValue.of(container[key]) if 0 <= key < len(container) else NONE
    raise Unknown("an optional entry of another kind")


def _optional_call(name: str, implementation: Callable[[OptionalValue], Any]) -> Callable[[list], tuple[str, Any]]:
    def call(args: list) -> tuple[str, Any]:
        if type(args[0]) is not OptionalValue:
            return "", Error("no such overload")
        return name, implementation(args[0])
    return call


def _strings(*values: Any) -> bool:
    return all(type(value) is str for value in values)


def _string_call(name: str, implementation: Callable[..., Any], overload: str,
                 ints: int = 0) -> Callable[[list], tuple[str, Any]]:
    """A function of strings (the last ``ints`` arguments ints)."""
    strings = -ints or None

    def call(args: list) -> tuple[str, Any]:
        if not _strings(*args[:strings]) or any(type(arg) is not int for arg in args[len(args) - ints:]):
            raise Unknown(f"{name} on another kind")
        try:
            return overload, implementation(*args)
        except LibraryError as err:
            return overload, Error(str(err))
    return call


def _list_call(name: str, implementation: Callable[..., Any], overload: str,
               nonnegative: bool = False) -> Callable[[list], tuple[str, Any]]:
    """A function of a list (and ints, or lists for the sets functions)."""
    def call(args: list) -> tuple[str, Any]:
        if type(args[0]) is not list or any(type(arg) not in (int, list) for arg in args[1:]):
            raise Unknown(f"{name} on another kind")
        if nonnegative and any(type(arg) is int and arg < 0 for arg in args[1:]):
            raise Unknown(f"{name} of a negative number")
        try:
            return overload, implementation(*args)
        except LibraryError as err:
            return overload, Error(str(err))
    return call


def _join(args: list) -> tuple[str, Any]:
    items, separator = args[0], args[1] if len(args) > 1 else ""
    if type(items) is not list or not _strings(separator, *items):
        raise Unknown("join on another kind")
    return "list_join_string" if len(args) > 1 else "list_join", separator.join(items)


def _sort(args: list) -> tuple[str, Any]:
    items = args[0]
    kinds = {_kind(item) for item in items} if type(items) is list else {"other"}
    if len(kinds) > 1 or not kinds <= {"int", "double", "string", "bool", "bytes"}:
        raise Unknown("sort of these values")
    return f"list_{next(iter(kinds), 'int')}_sort", sorted(items)


def _lists_range(args: list) -> tuple[str, Any]:
    if type(args[0]) is not int or args[0] > 1_000_000:
        raise Unknown("lists.range of this value")
    return "lists_range", list(range(max(args[0], 0)))


# standard and extension functions over plain values: (function, arity) -> (args) -> (overload, value)
_MEMBER: dict[tuple[str, int], Callable[[list], tuple[str, Any]]] = {
    ("startsWith", 2): _string_call("startsWith", str.startswith, "starts_with_string"),
    ("endsWith", 2): _string_call("endsWith", str.endswith, "ends_with_string"),
    ("contains", 2): _string_call("contains", lambda s, sub: sub in s, "contains_string"),
    ("matches", 2): _string_call("matches", matches, "matches_string"),
    ("find", 2): _string_call("find", find, "string_find_string"),
    ("findAll", 2): _string_call("findAll", find_all, "string_find_all_string"),
    ("lowerAscii", 1): _string_call("lowerAscii", ext.FUNCTIONS["lowerAscii"], "string_lower_ascii"),
    ("upperAscii", 1): _string_call("upperAscii", ext.FUNCTIONS["upperAscii"], "string_upper_ascii"),
    ("trim", 1): _string_call("trim", ext.trim, "string_trim"),
    ("split", 2): _string_call("split", ext.split, "string_split_string"),
    ("replace", 3): _string_call("replace", ext.replace, "string_replace_string_string"),
    ("join", 1): _join,
    ("join", 2): _join,
    ("charAt", 2): _string_call("charAt", ext.char_at, "string_char_at_int", ints=1),
    ("indexOf", 2): _string_call("indexOf", ext.index_of, "string_index_of_string"),
    ("indexOf", 3): _string_call("indexOf", ext.index_of, "string_index_of_string_int", ints=1),
    ("lastIndexOf", 2): _string_call("lastIndexOf", ext.last_index_of, "string_last_index_of_string"),
    ("lastIndexOf", 3): _string_call("lastIndexOf", ext.last_index_of, "string_last_index_of_string_int", ints=1),
    ("substring", 2): _string_call("substring", ext.substring, "string_substring_int", ints=1),
    ("substring", 3): _string_call("substring", ext.substring, "string_substring_int_int", ints=2),
    ("split", 3): _string_call("split", ext.split, "string_split_string_int", ints=1),
    ("replace", 4): _string_call("replace", ext.replace, "string_replace_string_string_int", ints=1),
    ("findAll", 3): _string_call("findAll", find_all, "string_find_all_string_int", ints=1),
    ("slice", 3): _list_call("slice", ext.slice_, "list_slice"),
    ("reverse", 1): _list_call("reverse", lambda items: list(reversed(items)), "list_reverse"),
    ("flatten", 1): _list_call("flatten", ext.flatten, "list_flatten"),
    ("flatten", 2): _list_call("flatten", ext.flatten, "list_flatten_int", nonnegative=True),
    ("distinct", 1): _list_call("distinct", ext.distinct, "list_distinct"),
    ("sort", 1): _sort,
    ("hasValue", 1): _optional_call("optional_hasValue", lambda o: o.has_value),
    ("value", 1): _optional_call("optional_value",
                                 lambda o: o.value if o.has_value else Error("optional.none() dereference")),
    ("size", 1): lambda args: _size(args[0]),
}
_GLOBAL: dict[tuple[str, int], Callable[[list], tuple[str, Any]]] = {
    ("size", 1): lambda args: _size(args[0]),
    ("matches", 2): _string_call("matches", matches, "matches"),
    ("string", 1): lambda args: _to_string(args[0]),
    ("int", 1): lambda args: _to_int(args[0]),
    ("double", 1): lambda args: _to_double(args[0]),
    ("dyn", 1): lambda args: ("to_dyn", args[0]),
    ("bytes", 1): lambda args: _to_bytes(args[0]),
    ("type", 1): lambda args: _type_of(args[0]),
    ("duration", 1): lambda args: _parsed("string_to_duration", parse_duration, args[0]),
    ("timestamp", 1): lambda args: _parsed("string_to_timestamp", parse_rfc3339, args[0]),
    ("lists.range", 1): _lists_range,
    ("optional.of", 1): lambda args: ("optional_of", OptionalValue.of(args[0])),
    ("optional.none", 0): lambda args: ("optional_none", NONE),
    ("optional.ofNonZeroValue", 1): lambda args: ("optional_ofNonZeroValue",
                                                  ext.FUNCTIONS["optional.ofNonZeroValue"](args[0])),
    ("strings.quote", 1): _string_call("strings.quote", ext.quote, "strings_quote"),
    ("sets.contains", 2): _list_call("sets.contains", ext.sets_contains, "list_sets_contains_list"),
    ("sets.intersects", 2): _list_call("sets.intersects", ext.sets_intersects, "list_sets_intersects_list"),
    ("sets.equivalent", 2): _list_call("sets.equivalent", ext.sets_equivalent, "list_sets_equivalent_list"),
}
_CONVERSIONS = frozenset({"bool", "bytes", "double", "duration", "dyn", "int", "string", "timestamp", "type", "uint"})

_LIBRARY: dict[str, Overload] = {overload.id: overload for overload in reversed(OVERLOADS)}  # the first of an id


def _library_overloads(function: str, member: bool, arity: int, overload_ids: tuple[str, ...]) -> list[Overload]:
    """The library overloads a call may dispatch to: by the checker's ids, else by name (the
    format constructors' ids are spelled ``format-dns1123Label`` there)."""
    return [_LIBRARY[oid] for oid in overload_ids if oid in _LIBRARY] or [
        o for o in OVERLOADS if o.function == function and o.member == member and len(o.params) == arity]


def _library_call(candidates: list[Overload], args: list) -> tuple[str, Any]:
    """A Kubernetes library function, dispatched on the actual arguments."""
    overload = select_overload(candidates, args)
    if overload is None:
        return "", Error("no such overload")
    try:
        return overload.id, overload.impl(*args)
    except LibraryError as err:
        return overload.id, Error(str(err))


# --- compilation -------------------------------------------------------------------------------


class _Compiler:
    def __init__(self, checked: Checked) -> None:
        self.checked = checked

    def function(self, e: Call) -> str:
        return self.checked.qualified_calls.get(e.id, e.function)

    def is_member(self, e: Call) -> bool:
        return e.target is not None and e.id not in self.checked.qualified_calls

    # constants as cel-go's OptOptimize builds them once

    def constant(self, e: Expr) -> tuple[bool, Any]:
        if isinstance(e, Literal):
            if e.kind == "uint":
                raise Unknown("uint")
            return True, e.value
        if isinstance(e, CreateList) and not e.optional_indices:
            values = [self.constant(element) for element in e.elements]
            if all(known for known, _ in values):
                return True, [value for _, value in values]
        if isinstance(e, CreateMap) and not any(entry.optional for entry in e.entries):
            keys = [self.constant(entry.key) for entry in e.entries]
            values = [self.constant(entry.value) for entry in e.entries]
            if all(known for known, _ in keys + values):
                if any(type(key) is not str for _, key in keys) or len({key for _, key in keys}) != len(keys):
                    raise Unknown("map literal keys")
                return True, {key: value for (_, key), (_, value) in zip(keys, values)}
        if isinstance(e, Call) and self.function(e) in _CONVERSIONS and not self.is_member(e) and len(e.args) == 1:
            known, value = self.constant(e.args[0])
            if known:
                implementation = _GLOBAL.get((self.function(e), 1))
                if implementation is None:
                    raise Unknown(f"{self.function(e)}() of a constant")
                _, converted = implementation([value])
                if isinstance(converted, Error):
                    raise Unknown("a constant conversion error")
                return True, converted
        return False, None

    def compile(self, e: Expr, scope: frozenset[str]) -> Step:
        known, value = self.constant(e)
        if known:
            return lambda f: value
        if isinstance(e, Ident):
            return self.ident(e, scope)
        if isinstance(e, Select):
            return self.select(e, scope)
        if isinstance(e, Call):
            return self.call(e, scope)
        if isinstance(e, CreateList):
            return self.create_list(e, scope)
        if isinstance(e, CreateMap):
            return self.create_map(e, scope)
        if isinstance(e, Comprehension):
            return self.comprehension(e, scope)
        if isinstance(e, CreateStruct):
            raise Unknown("message construction")
        raise Unknown(type(e).__name__)

    def ident(self, e: Ident, scope: frozenset[str]) -> Step:
        name = e.name
        if name not in scope and name in _TYPE_IDENTS and self.checked.types.get(e.id, DYN).kind == "type":
            value = CelTypeValue(name)  # a type name: a constant
            return lambda f: value
        if name in scope:
            def local(f: _Frame) -> Any:
                f.charge(1)
                return f.locals[name]
            return local

        def variable(f: _Frame) -> Any:
            f.charge(1)
            if name not in f.activation:
                raise Unknown(f"variable {name}")
            return f.activation[name]
        return variable

    def select(self, e: Select, scope: frozenset[str]) -> Step:
        operand = self.compile(e.operand, scope)
        field = e.field
        relative = 0 if _is_attribute(e.operand) else 1  # a selection from a computed value

        if e.test_only:
            def has(f: _Frame) -> Any:
                value = operand(f)
                if relative:
                    f.charge(relative)
                if isinstance(value, Error):
                    return value
                if type(value) is not dict:
                    raise Unknown("has() on another kind")
                return field in value
            return has

        optional = e.optional

        def select(f: _Frame) -> Any:
            value = operand(f)
            f.charge(1 + relative)
            if isinstance(value, Error):
                return value
            if optional or type(value) is OptionalValue:  # x.?f, and any selection below it
                return _optional_entry(value, field)
            if type(value) is not dict:
                raise Unknown("a selection on another kind")
            return value[field] if field in value else Error(f"no such key: {field}")
        return select

    def create_list(self, e: CreateList, scope: frozenset[str]) -> Step:
        elements = [self.compile(element, scope) for element in e.elements]
        optional = e.optional_indices

        def create(f: _Frame) -> Any:
            values = [element(f) for element in elements]
            f.charge(LIST_CREATE)
            error = next((v for v in values if isinstance(v, Error)), None)
            if error is not None or not optional:
                return error if error is not None else values
            out = []
            for i, value in enumerate(values):  # [?x]: x's value, when it has one
                if i not in optional:
                    out.append(value)
                elif type(value) is not OptionalValue:
                    return Error("no such overload")
                elif value.has_value:
                    out.append(value.value)
            return out
        return create

    def create_map(self, e: CreateMap, scope: frozenset[str]) -> Step:
        if any(entry.optional for entry in e.entries):
            raise Unknown("optional map entries")
        entries = [(self.compile(entry.key, scope), self.compile(entry.value, scope)) for entry in e.entries]

        def create(f: _Frame) -> Any:
            out: dict = {}
            error = None
            for key_step, value_step in entries:
                key, value = key_step(f), value_step(f)
                if error is None:
                    error = next((v for v in (key, value) if isinstance(v, Error)), None)
                if error is None:
                    if type(key) is not str:
                        raise Unknown("map keys of another kind")
                    if key in out:
                        error = Error(f"Failed with repeated key: {key}")
                    out[key] = value
            f.charge(MAP_CREATE)
            return error if error is not None else out
        return create

    def comprehension(self, e: Comprehension, scope: frozenset[str]) -> Step:
        iter_range = self.compile(e.iter_range, scope)
        init = self.compile(e.accu_init, scope)
        inner = scope | {e.iter_var, e.accu_var} | ({e.iter_var2} if e.iter_var2 else set())
        condition = self.compile(e.loop_condition, inner)
        # a step that appends to (map, filter) or inserts into (transformMap) its own accumulator
        fresh, accumulating = self.appending_step(e, inner) or self.inserting_step(e, inner) or (None, None)
        step = accumulating or self.compile(e.loop_step, inner)
        result = self.compile(e.result, (scope - {e.iter_var, e.iter_var2}) | {e.accu_var})
        first, second, accu = e.iter_var, e.iter_var2, e.accu_var

        def fold(f: _Frame) -> Any:
            items = iter_range(f)
            if isinstance(items, Error):
                return items
            saved = {name: f.locals.get(name, _UNSET) for name in (first, second, accu) if name}
            try:
                f.locals[accu] = fresh() if fresh else init(f)  # ([] and {}: constants, free)
                if type(items) is list:
                    pairs = enumerate(items) if second else ((item, None) for item in items)
                elif type(items) is dict:
                    if len(items) > 1 and not (_order_free(e) or fresh is dict):  # (a map: any order)
                        raise Unknown("an order-dependent fold over a map")
                    pairs = items.items() if second else ((key, None) for key in items)
                else:
                    return Error("got non-iterable")
                for one, two in pairs:
                    f.locals[first] = one
                    if second:
                        f.locals[second] = two
                    if condition(f) is not True:
                        if type(items) is dict and len(items) > 1:
                            # where cel-go stops depends on Go's random map order
                            raise Unknown("a fold over a map that stops early")
                        break
                    f.locals[accu] = step(f)
                return result(f)
            finally:
                for name, value in saved.items():
                    if value is _UNSET:
                        f.locals.pop(name, None)
                    else:
                        f.locals[name] = value
        return fold

    def appending_step(self, e: Comprehension, scope: frozenset[str]) -> tuple[type, Step] | None:
        """The step of ``map``/``filter``/``transformList``, ``@result + [x]`` (maybe under
        ``p ? ... : @result``) over an accumulator that starts as ``[]``, appending in place as
        cel-go's mutable accumulator does (a copy per append would be quadratic), charged as
        the concatenation is; None for any other step."""
        if not isinstance(e.accu_init, CreateList) or e.accu_init.elements:
            return None
        test, step = _accumulating(e, "_+_", 2)
        if step is None or not isinstance(step.args[1], CreateList) or step.args[1].optional_indices:
            return None
        read, element = (self.compile(arg, scope) for arg in step.args)  # @result: 1; [x]: 10 and x

        def append(accumulator: list, items: Any) -> Any:
            if isinstance(items, Error):
                return items
            accumulator.extend(items)
            return accumulator
        return list, _accumulate(None if test is None else self.compile(test, scope), read, [element], append)

    def inserting_step(self, e: Comprehension, scope: frozenset[str]) -> tuple[type, Step] | None:
        """The step of ``transformMap``/``transformMapEntry``, ``cel.@mapInsert(@result, k, v)``
        or ``cel.@mapInsert(@result, {k: v})`` (maybe under ``p ? ... : @result``) over an
        accumulator that starts as ``{}``, inserting in place as cel-go's mutable map does."""
        if not isinstance(e.accu_init, CreateMap) or e.accu_init.entries:
            return None
        test, step = _accumulating(e, "cel.@mapInsert", 3)
        if step is None:
            test, step = _accumulating(e, "cel.@mapInsert", 2)
        if step is None:
            return None
        read, *parts = (self.compile(arg, scope) for arg in step.args)

        def insert(accumulator: dict, *values: Any) -> Any:
            error = next((value for value in values if isinstance(value, Error)), None)
            if error is not None:
                return error
            entries = {values[0]: values[1]} if len(values) == 2 else values[0]
            if type(entries) is not dict or any(type(key) is not str for key in entries):
                raise Unknown("map entries of another kind")
            for key in entries:
                if key in accumulator:
                    return Error(f"insert failed: key {key} already exists")
            accumulator.update(entries)
            return accumulator
        return dict, _accumulate(None if test is None else self.compile(test, scope), read, parts, insert)

    def call(self, e: Call, scope: frozenset[str]) -> Step:
        function = self.function(e)
        member = self.is_member(e)
        nodes = ([e.target] if member else []) + list(e.args)
        if function in ("_&&_", "_||_") and len(nodes) == 2:
            return self.logical(function == "_&&_", *(self.compile(n, scope) for n in nodes))
        if function == "_?_:_" and len(nodes) == 3:
            test, then, otherwise = (self.compile(n, scope) for n in nodes)

            def conditional(f: _Frame) -> Any:
                chosen = test(f)
                if chosen is True:
                    return then(f)
                if chosen is False:
                    return otherwise(f)
                return chosen if isinstance(chosen, Error) else Error("no such overload")
            return conditional
        if function in ("_[_]", "_[?_]") and len(nodes) == 2:
            return self.index(nodes, scope, optional=function == "_[?_]")
        if function in ("or", "orValue") and member and len(nodes) == 2:
            return self.optional_or(function == "or", *(self.compile(n, scope) for n in nodes))
        if function == "@in" and len(nodes) == 2:
            known, values = self.constant(nodes[1])
            if known and type(values) is list and all(_is_primitive(v) for v in values):
                item = self.compile(nodes[0], scope)
                if not values:
                    return lambda f: False

                def in_constant_list(f: _Frame) -> Any:  # a set membership test: no call cost
                    value = item(f)
                    return value if isinstance(value, Error) else _in(value, values)[1]
                return in_constant_list
        steps = [self.compile(n, scope) for n in nodes]
        overload_ids = self.checked.overloads.get(e.id, ())
        apply = self.implementation(function, member, len(nodes), overload_ids)
        lenient = function == "@not_strictly_false"  # true for an error too

        def call(f: _Frame) -> Any:
            args = [step(f) for step in steps]
            error = None if lenient else next((arg for arg in args if isinstance(arg, Error)), None)
            if error is not None:
                overload, result = (overload_ids[0] if len(overload_ids) == 1 else ""), error
            else:
                overload, result = apply(args)
                if len(overload_ids) == 1:
                    overload = overload_ids[0]
            f.charge(call_cost(function, overload, args, result))
            return result
        return call

    def implementation(self, function: str, member: bool, arity: int,
                       overload_ids: tuple[str, ...]) -> Callable[[list], tuple[str, Any]]:
        if function in ("_==_", "_!=_"):
            equal = function == "_==_"
            return lambda args: ("equals" if equal else "not_equals", cel_equals(*args) is equal)
        if function in _COMPARE:
            return lambda args: _compare(function, *args)
        if function in ("_+_", "_-_", "_*_", "_/_", "_%_"):
            return lambda args: _arithmetic(function, *args)
        if function == "-_":
            return lambda args: _negate(args[0])
        if function == "!_":
            return lambda args: ("logical_not", (not args[0]) if type(args[0]) is bool else Error("no such overload"))
        if function == "@not_strictly_false":
            return lambda args: ("not_strictly_false", args[0] is not False)
        if function == "@in":
            return lambda args: _in(*args)
        table = _MEMBER if member else _GLOBAL
        implementation = table.get((function, arity))
        candidates = _library_overloads(function, member, arity, overload_ids)
        if implementation is not None and candidates:  # indexOf of a string or of a list
            def either(args: list) -> tuple[str, Any]:
                try:
                    return implementation(args)
                except Unknown:
                    if select_overload(candidates, args) is None:
                        raise
                    return _library_call(candidates, args)
            return either
        if implementation is not None:
            return implementation
        if candidates:
            return lambda args: _library_call(candidates, args)
        raise Unknown(function)

    def index(self, nodes: list[Expr], scope: frozenset[str], optional: bool) -> Step:
        container, key = (self.compile(n, scope) for n in nodes)
        relative = 0 if _is_attribute(nodes[0]) else 1

        def index(f: _Frame) -> Any:
            value, at = container(f), key(f)
            f.charge(1 + relative)
            if isinstance(value, Error):
                return value
            if isinstance(at, Error):
                return at
            if optional or type(value) is OptionalValue:  # x[?k], and any index below it
                return _optional_entry(value, at)
            return _index(value, at)
        return index

    @staticmethod
    def optional_or(optional: bool, left: Step, right: Step) -> Step:
        """``a.or(b)``, ``a.orValue(b)``: cel-go evaluates ``b`` only when ``a`` is none, and
        charges nothing for the choice itself (not a call: its own evaluator)."""
        def choose(f: _Frame) -> Any:
            value = left(f)
            if type(value) is not OptionalValue:
                return value if isinstance(value, Error) else Error("no such overload")
            if value.has_value:
                return value if optional else value.value
            return right(f)
        return choose

    @staticmethod
    def logical(conjunction: bool, left: Step, right: Step) -> Step:
        stop = not conjunction  # && stops at false, || at true

        def logical(f: _Frame) -> Any:
            lhs = left(f)
            if lhs is stop:
                return stop
            rhs = right(f)
            if rhs is stop:
                return stop
            if lhs is conjunction and rhs is conjunction:
                return conjunction
            for value in (lhs, rhs):
                if isinstance(value, Error):
                    return value
            return Error("no such overload")
        return logical


_UNSET = object()


def _negate(value: Any) -> tuple[str, Any]:
    kind = type(value)
    if kind is int:
        return "negate_int64", _int(-value)
    if kind is float:
        return "negate_double", -value
    return "", Error("no such overload")


def _is_primitive(value: Any) -> bool:
    return type(value) in (bool, int, float, str)


def _is_attribute(e: Expr) -> bool:
    """Whether cel-go plans ``e`` as an attribute (a variable, a selection, an index, a
    conditional), which a selection or an index qualifies in place; any other operand is
    wrapped in a relative attribute first, observed (and charged) once more."""
    if isinstance(e, Ident) or (isinstance(e, Select) and not e.test_only):
        return True
    return isinstance(e, Call) and e.function in ("_[_]", "_?_:_") and e.target is None


def _accumulating(e: Comprehension, function: str, arity: int) -> tuple[Expr | None, Call | None]:
    """(test, step) when the loop step is ``function(@result, ...)``, maybe under
    ``test ? ... : @result``, and nothing else reads the accumulator; else (None, None)."""
    step, test = e.loop_step, None
    if _is_call(step, "_?_:_", 3) and _is_ident(step.args[2], e.accu_var):
        test, step = step.args[0], step.args[1]
    if not _is_call(step, function, arity) or not _is_ident(step.args[0], e.accu_var):
        return None, None
    others = [*step.args[1:], *([test] if test is not None else [])]
    if any(_is_ident(node, e.accu_var) for other in others for node in walk(other)):
        return None, None
    return test, step


def _accumulate(test: Step | None, read: Step, parts: list[Step], apply: Callable[..., Any]) -> Step:
    """One step of an accumulating fold: ``test`` (None: always), then the accumulator and
    the parts evaluated and charged as the call, ``apply(accumulator, *parts)`` in place."""
    def step(f: _Frame) -> Any:
        if test is not None:
            keep = test(f)
            if keep is False:
                return read(f)
            if keep is not True:
                return keep if isinstance(keep, Error) else Error("no such overload")
        accumulator, values = read(f), [part(f) for part in parts]
        f.charge(1)  # add_list, cel.@mapInsert: one call each
        if isinstance(accumulator, Error):
            return accumulator
        return apply(accumulator, *values)
    return step


def _is_call(e: Expr, function: str, arity: int) -> bool:
    return isinstance(e, Call) and e.function == function and e.target is None and len(e.args) == arity


def _is_ident(e: Expr, name: str) -> bool:
    return isinstance(e, Ident) and e.name == name


def _order_free(e: Comprehension) -> bool:
    """A fold whose value is the same in any iteration order: all, exists (a boolean
    accumulator), exists_one (a count)."""
    init, condition = e.accu_init, e.loop_condition
    if isinstance(init, Literal) and init.kind == "bool":
        return True
    # exists_one: a count over every entry
    return (isinstance(init, Literal) and init.kind == "int" and isinstance(condition, Literal)
            and condition.value is True)
