"""JSON values of a custom resource as CEL sees them (Kubernetes' ``UnstructuredToVal``).

The schema decides the conversion: ``date``/``date-time`` strings become timestamps,
``duration`` strings durations, ``byte`` strings bytes, integers in ``number`` fields doubles;
object properties are renamed to their escaped CEL names and null properties are absent
(``has()`` is false for them). Unknown (preserved) fields are kept so that equality sees them.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from webhook.cel.escaping import RESERVED_SYMBOLS
from webhook.cel.types import DeclType
from webhook.gofmt import go_type_name
from webhook.validation.strfmt import parse_go_duration
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


def go_rfc3339_nano(moment: datetime) -> str:
    """Go's ``t.Format(time.RFC3339Nano)`` in the time's own offset, as cel-go's ``string()`` of a
    timestamp prints it: the fraction without trailing zeros, ``Z`` for UTC, else ``+hh:mm``."""
    text = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    offset = moment.utcoffset()
    if not offset:
        return text + "Z"
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{text}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


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


# --- Go's strconv, as cel-go converts strings to numbers ------------------------------------

_GO_INT = re.compile(r"[+-]?[0-9]+")
_GO_UINT = re.compile(r"[0-9]+")
_GO_DECIMAL_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_GO_HEX_FLOAT = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)")
_GO_FLOAT_SPECIALS = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "infinity": math.inf,
                      "+infinity": math.inf, "-infinity": -math.inf, "nan": math.nan}


def go_parse_int(text: str, *, signed: bool = True) -> int | None:
    """strconv.ParseInt(s, 10, 64) / ParseUint: ASCII digits, a sign only for signed numbers,
    in range; None where Go returns an error."""
    if not (_GO_INT if signed else _GO_UINT).fullmatch(text):
        return None
    number = int(text)
    low, high = (-(2**63), 2**63 - 1) if signed else (0, 2**64 - 1)
    return number if low <= number <= high else None


def go_parse_float(text: str) -> float | None:
    """strconv.ParseFloat(s, 64), None where Go returns an error: no surrounding space, hex
    floats need an exponent, a finite number too large for a double is out of range."""
    special = _GO_FLOAT_SPECIALS.get(text.lower())
    if special is not None:
        return special
    hexadecimal = _GO_HEX_FLOAT.fullmatch(text)
    if hexadecimal:
        try:
            number = float.fromhex(hexadecimal[1] + "0x" + hexadecimal[2])
        except OverflowError:
            return None
    elif _GO_DECIMAL_FLOAT.fullmatch(text):
        number = float(text)
    else:
        return None
    return None if math.isinf(number) else number


# --- Go's time.Parse(time.RFC3339, s), as cel-go converts a string to a timestamp ---------------

_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(?:Z|([+-])(\d{2}):(\d{2}))", re.A)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# cel-go's timestamp range: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z (seconds)
_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800, 253_402_300_799


def parse_rfc3339(text: str) -> datetime | None:
    """The instant Go's ``time.Parse(time.RFC3339, s)`` reads (an upper-case ``T`` and ``Z``,
    seconds up to 59, a fraction after a dot or a comma, an offset with a colon), None where
    Go refuses it; ``OverflowError`` outside CEL's years 1 to 9999 ("timestamp overflow")."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, sign, offset_hour, offset_minute = match.groups()
    if not (1 <= int(month) <= 12 and int(hour) <= 23 and int(minute) <= 59 and int(second) <= 59):
        return None
    if sign and not (int(offset_hour) <= 24 and int(offset_minute) <= 60):  # Go's general parser's bounds
        return None
    days_in_month = (31, 29 if _leap(int(year)) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[int(month) - 1]
    if not 1 <= int(day) <= days_in_month:
        return None
    # days since 1970 by the proleptic calendar (year 0 included), so that the range check sees it
    days = _days_from_civil(int(year), int(month), int(day))
    seconds = days * 86_400 + int(hour) * 3600 + int(minute) * 60 + int(second)
    if sign:
        offset = int(offset_hour) * 3600 + int(offset_minute) * 60
        seconds -= offset if sign == "+" else -offset
    if not _MIN_SECONDS <= seconds <= _MAX_SECONDS:
        raise OverflowError("timestamp overflow")
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    return _EPOCH + timedelta(seconds=seconds, microseconds=micros)


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468
