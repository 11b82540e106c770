"""JSON values of a custom resource as CEL sees them (Kubernetes' ``UnstructuredToVal``).

The schema decides the conversion: ``date``/``date-time`` strings become timestamps,
``duration`` strings durations, ``byte`` strings bytes, integers in ``number`` fields doubles;
object properties are renamed to their escaped CEL names and null properties are absent
(``has()`` is false for them). Unknown (preserved) fields are kept so that equality sees them.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from webhook.cel.common.escaping import RESERVED_SYMBOLS
from webhook.cel.common.decl import DeclType
from webhook.gocompat.fmt import go_type_name
from webhook.gocompat.time import parse_go_duration
from webhook.validation.strfmt import parse_duration as kube_openapi_duration

_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))\Z")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\Z")


def to_cel(value: Any, decl: DeclType | None) -> Any:
    """Convert one JSON value for CEL evaluation, guided by its schema's DeclType."""
    if value is None or decl is None or decl.plain:
        return value
    kind = decl.kind
    if kind == "object":
        if not isinstance(value, dict):
            return value
        known = decl.by_property
        converted = {}
        for key, item in value.items():
            if item is None:
                continue
            entry = known.get(key)
            if entry is None:
                converted[key] = item
                continue
            converted[entry[0]] = cel_item = to_cel(item, entry[1])
            if key in RESERVED_SYMBOLS:
                # cel-go resolves `self.namespace` to the field escaped as `__namespace__`
                converted[key] = cel_item
        return converted
    if kind == "map":
        if not isinstance(value, dict):
            return value
        elem = decl.elem
        return {key: to_cel(item, elem) for key, item in value.items()}
    if kind == "list":
        if not isinstance(value, list):
            return value
        elem = decl.elem
        if elem is None or elem.kind in ("string", "int", "bool", "dyn"):
            return value
        return [to_cel(item, elem) for item in value]
    if kind == "double":
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if isinstance(value, str):
        if kind == "timestamp":
            parsed = parse_timestamp(value) if decl.format == "date-time" else parse_date(value)
            return value if parsed is None else parsed
        if kind == "duration":
            parsed_duration = _timedelta(kube_openapi_duration(value))  # "3 days" too, as Kubernetes reads it
            return value if parsed_duration is None else parsed_duration
        if kind == "bytes":
            try:
                return base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                return value
    return value


_EXPECTED = {  # UnstructuredToVal's error for a value of the wrong JSON type, by CEL kind
    "object": "invalid data, expected a map for the provided schema with type=object",
    "map": "invalid data, expected a map for the provided schema with type=object",
    "list": "invalid data, expected an array for the provided schema with type=array",
}
_SCALARS = {  # CEL kind -> (accepted Python types, Go's name in "expected ...")
    "string": ((str,), "string"), "timestamp": ((str,), "string"), "duration": ((str,), "string"),
    "bytes": ((str,), "string"), "int": ((int,), "int"), "double": ((int, float), "float"), "bool": ((bool,), "bool"),
}
_NULL = "invalid data, got null for schema with nullable=false"


def invalid_reads(value: Any, decl: DeclType | None, properties: frozenset[str] | None) -> dict[str | None, str]:
    """Kubernetes' ``UnstructuredToVal`` errors for data that contradicts its own schema, where a
    rule would read it: ``{None: error}`` for the value itself, else ``{property: error}`` for the
    object's ``properties`` (all when None) whose value has the wrong JSON type or holds a null
    item the schema does not allow. Normally ``{}``: the apiserver's structural validation
    rejects such objects before any rule runs, so only rules evaluated directly meet them.
    """
    problem = _shape_error(value, decl)
    if problem is not None:
        return {None: problem}
    if decl is None or decl.kind != "object" or not isinstance(value, dict):
        return {}
    found = {}
    for key in value if properties is None else properties:
        item = value.get(key)
        entry = decl.by_property.get(key)
        if entry is None or item is None:
            continue  # absent, unknown or null properties are left out, not errors
        problem = _shape_error(item, entry[1])
        if problem is None and isinstance(item, (list, dict)) and entry[1].elem is not None:
            items = item if isinstance(item, list) else item.values()
            if not entry[1].elem.nullable and any(i is None for i in items):
                problem = _NULL
        if problem is not None:
            found[key] = problem
    return found


def invalid_item_reads(items: Any, decl: DeclType | None, fields: frozenset[str] | None) -> str | None:
    """``UnstructuredToVal``'s error for the first field of a list's items (``items``, a list of
    ``decl``) that a rule reads (``fields``, None: all) and whose value has the wrong JSON type,
    else None: the items are converted only as they are read."""
    if not isinstance(items, list) or decl is None or decl.kind != "list" or decl.elem is None:
        return None
    elem = decl.elem
    if elem.kind != "object":
        return None
    for item in items:
        if not isinstance(item, dict):
            continue
        for key in item if fields is None else (elem.field_names.get(f, f) for f in fields):
            entry = elem.by_property.get(key)
            if entry is not None and item.get(key) is not None:
                problem = _shape_error(item[key], entry[1])
                if problem is not None:
                    return problem
    return None


def _shape_error(value: Any, decl: DeclType | None) -> str | None:
    if decl is None:
        return None
    if value is None:
        return None if decl.nullable else _NULL
    if decl.int_or_string:
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return None
        return "invalid data, expected XIntOrString value to be either a string or integer"
    kind = decl.kind
    if kind in _EXPECTED:
        return None if isinstance(value, list if kind == "list" else dict) else _EXPECTED[kind]
    scalar = _SCALARS.get(kind)
    if scalar is None or (isinstance(value, scalar[0]) and (kind == "bool" or not isinstance(value, bool))):
        return None
    return f"invalid data, expected {scalar[1]}, got {go_type_name(value)}"


def parse_timestamp(text: str) -> datetime | None:
    """RFC 3339 date-time in its own offset, as Kubernetes reads a ``date-time`` field (kube-openapi's
    strfmt.ParseDateTime: Go's time.Parse); sub-second digits beyond microseconds are truncated."""
    match = _DATETIME.match(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, frac, zulu, sign, off_h, off_m = match.groups()
    micros = int((frac or "0")[:6].ljust(6, "0"))
    offset = timedelta(hours=int(off_h or 0), minutes=int(off_m or 0))
    # Go's time.Parse keeps the offset as the time's location (a zero offset is the apiserver's
    # Local, UTC): comparisons and arithmetic see the instant, string() prints the offset
    tz = timezone(-offset if sign == "-" else offset) if not zulu and offset else timezone.utc
    try:
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tz)
        moment.astimezone(timezone.utc)  # the instant, too, must be within datetime's years
    except (ValueError, OverflowError):
        return None
    return moment


def parse_date(text: str) -> datetime | None:
    match = _DATE.match(text)
    if match is None:
        return None
    try:
        return datetime(int(match[1]), int(match[2]), int(match[3]), tzinfo=timezone.utc)
    except ValueError:
        return None


def parse_duration(text: str) -> timedelta | None:
    """Go's ``time.ParseDuration`` (CEL's ``duration()``), to the microsecond."""
    return _timedelta(parse_go_duration(text))


def _timedelta(nanos: int | None) -> timedelta | None:
    """Nanoseconds to a timedelta, the sub-microsecond rest truncated toward zero."""
    if nanos is None:
        return None
    micros = abs(nanos) // 1000
    return timedelta(microseconds=-micros if nanos < 0 else micros)
