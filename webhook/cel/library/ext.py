"""cel-go extension functions Kubernetes enables, in plain Python, for the cel-python backend.

(cel-cpp implements these natively for the default backend: strings v2, lists, sets and the
optional-types functions.) Each entry: CEL name -> implementation over plain Python values.
"""

from __future__ import annotations

import datetime
from typing import Any

from webhook.cel.errors import CelCostExceeded
from webhook.gocompat.fmt import go_value

from webhook.cel.library.base import NONE, LibraryError, OptionalValue
from webhook.cel.library.lists import cel_equals
from webhook.cel.limits import RANGE_LIMIT
from webhook.cel.common.typenames import DURATION, GO_VALUE_TYPES, TIMESTAMP, not_an_int


def _index_error(i: int) -> LibraryError:
    return LibraryError(f"index out of range: {i}")


def char_at(s: str, i: int) -> str:
    if i < 0 or i > len(s):
        raise _index_error(i)
    return s[i] if i < len(s) else ""


def index_of(s: str, sub: str, offset: int = 0) -> int:
    if sub == "":
        return offset
    if offset < 0:
        raise _index_error(offset)
    if offset >= len(s):
        return -1
    return s.find(sub, offset)


def last_index_of(s: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        return len(s) if sub == "" else s.rfind(sub)
    if sub == "":
        return offset
    if offset < 0:
        raise _index_error(offset)
    if offset >= len(s):
        return -1
    return s.rfind(sub, 0, offset + len(sub))


def _ascii(s: str, upper: bool) -> str:
    return "".join((c.upper() if upper else c.lower()) if c.isascii() else c for c in s)


def replace(s: str, old: str, new: str, n: int = -1) -> str:
    if old == "":
        pieces = list(s)
        limit = len(pieces) + 1 if n < 0 else n
        out, count = [], 0
        for piece in ["", *pieces]:
            if piece:
                out.append(piece)
            if count < limit:
                out.append(new)
                count += 1
        return "".join(out)
    return s.replace(old, new, n if n >= 0 else -1)


def split(s: str, sep: str, n: int = -1) -> list[str]:
    if n == 0:
        return []
    if sep == "":
        parts = list(s)
        return parts if n < 0 or n >= len(parts) else [*parts[: n - 1], "".join(parts[n - 1 :])]
    return s.split(sep, n - 1 if n > 0 else -1)


def substring(s: str, start: int, end: int | None = None) -> str:
    if end is None:
        if start < 0 or start > len(s):
            raise _index_error(start)
        return s[start:]
    if start > end:
        raise LibraryError(f"invalid substring range. start: {start}, end: {end}")
    for i in (start, end):
        if i < 0 or i > len(s):
            raise _index_error(i)
    return s[start:end]


# Go's unicode.IsSpace
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def trim(s: str) -> str:
    return s.strip(_GO_SPACE)


def quote(s: str) -> str:
    escapes = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v", "\\": "\\\\", '"': '\\"'}
    return '"' + "".join(escapes.get(c, c) for c in s) + '"'


def slice_(items: list, start: int, end: int) -> list:
    if start < 0 or end < 0:
        raise LibraryError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise LibraryError(f"cannot slice({start}, {end}), start index must be less than or equal to end index")
    if end > len(items):
        raise LibraryError(f"cannot slice({start}, {end}), list is length {len(items)}")
    return items[start:end]


_KINDS = {str: "string", float: "double", bool: "bool", bytes: "bytes", type(None): "null_type",
          datetime.datetime: TIMESTAMP, datetime.timedelta: DURATION, list: "list", dict: "map"}


def flatten(items: list, depth: int = 1) -> list:
    if type(depth) is not int:
        raise LibraryError(not_an_int(GO_VALUE_TYPES.get(_KINDS.get(type(depth), ""), type(depth).__name__)))
    if not isinstance(items, list):
        raise TypeError("flatten applies to lists")
    if depth < 0:
        raise LibraryError("level must be non-negative")
    out: list = []
    for item in items:
        out.extend(flatten(item, depth - 1) if isinstance(item, list) and depth > 0 else [item])
    return out


def distinct(items: list) -> list:
    out: list = []
    for item in items:
        if not any(cel_equals(item, seen) for seen in out):
            out.append(item)
    return out


def sort(items: list) -> list:
    kinds = {type(i) for i in items}
    if len(kinds) > 1 and not kinds <= {int, float}:
        raise LibraryError("list elements must have the same type")
    return sorted(items)


def lists_range(n: int) -> list[int]:
    if n > RANGE_LIMIT:  # as the default engine's guard: never build a list past the cost limit
        raise CelCostExceeded()
    return list(range(n))


def _lists(*values: Any) -> None:
    if not all(isinstance(value, list) for value in values):
        raise TypeError("sets functions take lists")  # the caller's "no such overload"


def sets_contains(a: list, b: list) -> bool:
    _lists(a, b)
    return all(any(cel_equals(x, y) for y in a) for x in b)


def sets_intersects(a: list, b: list) -> bool:
    _lists(a, b)
    return any(any(cel_equals(x, y) for y in a) for x in b)


def sets_equivalent(a: list, b: list) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)


def _zero(value: Any) -> bool:
    if value is None or value is False:
        return True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == 0
    if isinstance(value, datetime.timedelta):
        return not value
    if isinstance(value, datetime.datetime):  # the zero time.Time: 0001-01-01T00:00:00Z
        return value == _ZERO_TIME
    return isinstance(value, (str, bytes, list, dict)) and len(value) == 0


_ZERO_TIME = datetime.datetime(1, 1, 1, tzinfo=datetime.timezone.utc)


def join(items: list, separator: str = "") -> str:
    """cel-go's ``join``: its runtime guard takes a list(string) by the first element (another
    one is a failed dispatch); the join itself refuses any later element that is no string."""
    if items and not isinstance(items[0], str):
        raise TypeError("no such overload")
    for item in items:
        if not isinstance(item, str):
            raise LibraryError(f"join: invalid input: {go_value(item)}")
    return separator.join(items)


def optional_value(o: OptionalValue) -> Any:
    if not o.has_value:
        raise LibraryError("optional.none() dereference")
    return o.value


# CEL name -> implementation (member functions take the receiver first)
FUNCTIONS: dict[str, Any] = {
    "charAt": char_at,
    "indexOf": index_of,
    "lastIndexOf": last_index_of,
    "lowerAscii": lambda s: _ascii(s, False),
    "upperAscii": lambda s: _ascii(s, True),
    "replace": replace,
    "split": split,
    "substring": substring,
    "trim": trim,
    "join": join,
    "strings.quote": quote,
    "slice": slice_,
    "flatten": flatten,
    "distinct": distinct,
    "reverse": lambda items: list(reversed(items)),
    "sort": sort,
    "lists.range": lists_range,
    "first": lambda items: OptionalValue.of(items[0]) if items else NONE,
    "last": lambda items: OptionalValue.of(items[-1]) if items else NONE,
    "sets.contains": sets_contains,
    "sets.intersects": sets_intersects,
    "sets.equivalent": sets_equivalent,
    "optional.of": OptionalValue.of,
    "optional.none": lambda: NONE,
    "optional.ofNonZeroValue": lambda v: NONE if _zero(v) else OptionalValue.of(v),
    "hasValue": lambda o: o.has_value,
    "value": optional_value,
    "orValue": lambda o, default: o.value if o.has_value else default,
    "or": lambda o, other: o if o.has_value else other,
    "optional.unwrap": lambda items: [o.value for o in items if o.has_value],
    "unwrapOpt": lambda items: [o.value for o in items if o.has_value],
}

# What each function's first argument must be (cel-cpp dispatches on it; a dyn value of
# another type is "no such overload", not a Python iteration over a map or a string).
RECEIVERS: dict[str, type] = {
    **dict.fromkeys(("charAt", "indexOf", "lastIndexOf", "lowerAscii", "upperAscii", "replace", "split",
                     "substring", "trim", "strings.quote"), str),
    **dict.fromkeys(("join", "slice", "flatten", "distinct", "reverse", "sort", "first", "last", "sets.contains",
                     "sets.intersects", "sets.equivalent", "optional.unwrap", "unwrapOpt"), list),
    **dict.fromkeys(("hasValue", "value", "orValue", "or"), OptionalValue),
    "lists.range": int,
}
