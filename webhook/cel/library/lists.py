"""Kubernetes' list functions (``library/lists.go``): isSorted, sum, min, max, indexOf, lastIndexOf."""

from __future__ import annotations

import datetime
from typing import Any

from webhook.cel.library.base import LibraryError, Overload

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def cel_equals(a: Any, b: Any) -> bool:
    """CEL equality: numbers compare across int/uint/double; bool is not a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(cel_equals(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return len(a) == len(b) and all(any(cel_equals(k, k2) and cel_equals(v, b[k2]) for k2 in b) for k, v in a.items())
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


# cel-go dispatches isSorted/sum/min/max on a dyn list by its first element's type (none fits a map, a
# list or null: "no such overload: sum(list)"); the chosen overload then fails on an element it
# cannot add or compare with types.MaybeNoSuchOverloadErr ("no such overload"), while min/max
# ignore the error of comparing two values of other kinds (1 and 'a'): they keep the one they have
_NUMERIC_KINDS = frozenset(("int", "double"))
_SUMMABLE_KINDS = frozenset(("int", "double", "duration"))
_COMPARABLE_KINDS = frozenset(("int", "double", "bool", "string", "bytes", "duration", "timestamp"))
_KINDS = {bool: "bool", int: "int", float: "double", str: "string", bytes: "bytes",
          datetime.datetime: "timestamp", datetime.timedelta: "duration"}


def _cel_kind(value: Any) -> str | None:
    return _KINDS.get(type(value))


def is_sorted(values: list[Any]) -> bool:
    """The walk stops at the first pair out of order (false) or the first element that is no
    traits.Comparer; values of two kinds are not compared (``optimize.Optimizer.dyn_is_sorted``)."""
    if values and _cel_kind(values[0]) not in _COMPARABLE_KINDS:
        raise LibraryError("no such overload: isSorted(list)")
    for previous, value in zip(values, values[1:]):
        kind, kept = _cel_kind(value), _cel_kind(previous)
        if kind not in _COMPARABLE_KINDS:
            raise LibraryError("no such overload")
        if (kind == kept or (kind in _NUMERIC_KINDS and kept in _NUMERIC_KINDS)) and previous > value:
            return False
    return True


def sum_(values: list[Any]) -> Any:
    if not values:
        return 0
    if _cel_kind(values[0]) not in _SUMMABLE_KINDS:
        raise LibraryError("no such overload: sum(list)")
    total = values[0]
    for value in values[1:]:
        kinds = (_cel_kind(total), _cel_kind(value))
        if not ((kinds[0] == kinds[1] and kinds[0] != "timestamp") or set(kinds) == {"duration", "timestamp"}):
            raise LibraryError("no such overload")
        total = total + value
        if isinstance(total, int) and not _INT64_MIN <= total <= _INT64_MAX:
            raise LibraryError("integer overflow")
    return total


def _extreme(function: str, values: list[Any], prefer: Any) -> Any:
    if not values:
        raise LibraryError(f"{function} called on empty list")
    if _cel_kind(values[0]) not in _COMPARABLE_KINDS:
        raise LibraryError(f"no such overload: {function}(list)")
    result = values[0]
    for value in values[1:]:
        kind, kept = _cel_kind(value), _cel_kind(result)
        if kind not in _COMPARABLE_KINDS:
            raise LibraryError("no such overload")
        if (kind == kept or (kind in _NUMERIC_KINDS and kept in _NUMERIC_KINDS)) and prefer(value, result):
            result = value
    return result


def min_(values: list[Any]) -> Any:
    return _extreme("min", values, lambda value, kept: value < kept)


def max_(values: list[Any]) -> Any:
    return _extreme("max", values, lambda value, kept: value > kept)


def index_of(values: list[Any], item: Any) -> int:
    return next((i for i, value in enumerate(values) if cel_equals(value, item)), -1)


def last_index_of(values: list[Any], item: Any) -> int:
    return next((i for i in range(len(values) - 1, -1, -1) if cel_equals(values[i], item)), -1)


# in Kubernetes' declaration order (library/lists.go comparableTypes, summableTypes)
_COMPARABLE = ("int", "uint", "double", "bool", "google.protobuf.Duration", "google.protobuf.Timestamp", "string", "bytes")
_SHORT = {"google.protobuf.Duration": "duration", "google.protobuf.Timestamp": "timestamp"}
_SNAKE = {"isSorted": "is_sorted", "sum": "sum", "min": "min", "max": "max"}
_SUMMABLE = ("int", "uint", "double", "google.protobuf.Duration")


def _per_type(function: str, impl: Any, types: tuple[str, ...], result: str | None) -> list[Overload]:
    overloads = []
    for t in types:
        short = _SHORT.get(t, t)
        suffix = "bool" if result == "bool" else short
        overloads.append(
            Overload(function, f"list_{short}_{_SNAKE[function]}_{suffix}", (f"list({t})",), result or t, impl, member=True)
        )
    return overloads


OVERLOADS = (
    *_per_type("isSorted", is_sorted, _COMPARABLE, "bool"),
    *_per_type("sum", sum_, _SUMMABLE, None),
    *_per_type("min", min_, _COMPARABLE, None),
    *_per_type("max", max_, _COMPARABLE, None),
    Overload("indexOf", "list_a_index_of_int", ("list(A)", "A"), "int", index_of, member=True),
    Overload("lastIndexOf", "list_a_last_index_of_int", ("list(A)", "A"), "int", last_index_of, member=True),
)
