"""What a call costs and returns in a counted evaluation (``count``): cel-go's sizes
(``actualSize``, Kubernetes' traversal cost), Kubernetes' ``CallCost`` and cel-go's own charges
by function, and the standard, extension and Kubernetes functions over plain values, with
cel-go's errors as values."""


from __future__ import annotations

import datetime
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.cel.cost.estimate import LIST_CREATE, REGEX_LENGTH, STRING_TRAVERSAL
from webhook.cel.library import OVERLOADS, LibraryError, OpaqueValue, Overload
from webhook.cel.library import ext
from webhook.cel.library.base import NONE, OptionalValue, optional_entry
from webhook.cel.library.format import NamedFormat
from webhook.cel.library.lists import cel_equals
from webhook.cel.library.regex import find, find_all, matches
from webhook.cel.library.dispatch import select_overload
from webhook.cel.common.values import parse_duration
from webhook.gocompat.strconv import go_parse_int
from webhook.gocompat.time import parse_rfc3339

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class Unknown(Exception):
    """cel-go's count is not known here: the caller charges the estimate."""


@dataclass(frozen=True, slots=True)
class Error:
    """A CEL error value (it propagates; what is evaluated meanwhile is charged)."""

    message: str


@dataclass(frozen=True, slots=True)
class CelTypeValue:
    """A CEL type as a value (``type(x)``, ``int``)."""

    name: str


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

COMPARE = {"_<_": ("less", lambda x, y: x < y), "_<=_": ("less_equals", lambda x, y: x <= y),
            "_>_": ("greater", lambda x, y: x > y), "_>=_": ("greater_equals", lambda x, y: x >= y)}


def compare(function: str, x: Any, y: Any) -> tuple[str, Any]:
    prefix, test = COMPARE[function]
    kx, ky = _kind(x), _kind(y)
    if kx == ky and kx in ("string", "bytes", "bool", "int", "double", "timestamp", "duration"):
        return f"{prefix}_{kx}", test(x, y)
    if _is_number(x) and _is_number(y):
        if x != x or y != y:
            return f"{prefix}_{kx}_{ky}", False
        return f"{prefix}_{kx}_{ky}", test(x, y)
    return "", Error("no such overload")


def checked_int(value: int) -> Any:
    return value if _INT64_MIN <= value <= _INT64_MAX else Error("integer overflow")


_ARITHMETIC = {"_+_": ("add", operator.add), "_-_": ("subtract", operator.sub), "_*_": ("multiply", operator.mul)}


def arithmetic(function: str, x: Any, y: Any) -> tuple[str, Any]:
    kx, ky = _kind(x), _kind(y)
    if kx != ky:
        return "", Error("no such overload")
    if kx == "int":
        if function in _ARITHMETIC:
            name, apply = _ARITHMETIC[function]
            return f"{name}_int64", checked_int(apply(x, y))
        if y == 0:
            return "", Error("division by zero" if function == "_/_" else "modulus by zero")
        quotient, remainder = abs(x) // abs(y), abs(x) % abs(y)  # Go truncates toward zero
        if function == "_/_":
            return "divide_int64", checked_int(quotient if (x < 0) == (y < 0) else -quotient)
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


def index_value(container: Any, key: Any) -> Any:
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


def contains(item: Any, container: Any) -> tuple[str, Any]:
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
        return "string_to_int64", Error("type conversion error") if parsed is None else checked_int(parsed)
    raise Unknown("int() of this kind")


_TYPE_NAMES = {int: "int", float: "double", str: "string", bool: "bool", bytes: "bytes", type(None): "null_type",
               list: "list", datetime.datetime: "google.protobuf.Timestamp",
               datetime.timedelta: "google.protobuf.Duration", CelTypeValue: "type"}
# type names that are values as they are (a map's type may be a schema's object type instead)
TYPE_IDENTS = frozenset(_TYPE_NAMES.values()) - {"google.protobuf.Timestamp", "google.protobuf.Duration"} | {"map"}


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


def counted_optional_entry(container: Any, key: Any) -> OptionalValue:
    """``container.?key`` / ``container[?key]`` (``optional_entry``); ``Unknown`` for a
    container or key of another kind."""
    entry = optional_entry(container, key)
    if entry is None:
        raise Unknown("an optional entry of another kind")
    return entry


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
MEMBER_FUNCTIONS: dict[tuple[str, int], Callable[[list], tuple[str, Any]]] = {
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
def _escape_key(value: Any) -> tuple[str, Any]:
    """A MutatingAdmissionPolicy's ``jsonpatch.escapeKey`` (RFC 6901: ``~`` then ``/``)."""
    if type(value) is not str:
        return "", Error("no such overload")
    return "string_jsonpatch_escapeKey_string", value.replace("~", "~0").replace("/", "~1")


GLOBAL_FUNCTIONS: dict[tuple[str, int], Callable[[list], tuple[str, Any]]] = {
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
    ("jsonpatch.escapeKey", 1): lambda args: _escape_key(args[0]),
    ("optional.none", 0): lambda args: ("optional_none", NONE),
    ("optional.ofNonZeroValue", 1): lambda args: ("optional_ofNonZeroValue",
                                                  ext.FUNCTIONS["optional.ofNonZeroValue"](args[0])),
    ("strings.quote", 1): _string_call("strings.quote", ext.quote, "strings_quote"),
    ("sets.contains", 2): _list_call("sets.contains", ext.sets_contains, "list_sets_contains_list"),
    ("sets.intersects", 2): _list_call("sets.intersects", ext.sets_intersects, "list_sets_intersects_list"),
    ("sets.equivalent", 2): _list_call("sets.equivalent", ext.sets_equivalent, "list_sets_equivalent_list"),
}
CONVERSIONS = frozenset({"bool", "bytes", "double", "duration", "dyn", "int", "string", "timestamp", "type", "uint"})

_LIBRARY: dict[str, Overload] = {overload.id: overload for overload in reversed(OVERLOADS)}  # the first of an id


def library_overloads(function: str, member: bool, arity: int, overload_ids: tuple[str, ...]) -> list[Overload]:
    """The library overloads a call may dispatch to: by the checker's ids, else by name (the
    format constructors' ids are spelled ``format-dns1123Label`` there)."""
    return [_LIBRARY[oid] for oid in overload_ids if oid in _LIBRARY] or [
        o for o in OVERLOADS if o.function == function and o.member == member and len(o.params) == arity]


def library_call(candidates: list[Overload], args: list) -> tuple[str, Any]:
    """A Kubernetes library function, dispatched on the actual arguments."""
    overload = select_overload(candidates, args)
    if overload is None:
        return "", Error("no such overload")
    try:
        return overload.id, overload.impl(*args)
    except LibraryError as err:
        return overload.id, Error(str(err))


