"""``string.format`` of cel-go's strings extension as Kubernetes runs it (version 2, en_US).

cel-cpp's own ``format`` prints lists, maps, doubles and errors differently, so Kubernetes'
formatter is ported here: clauses ``%s %d %f %.Nf %e %b %o %x %X %%``, CEL-literal quoting
inside lists and maps, Go's number formatting, and the validation Kubernetes runs at compile
time when the format string and the argument list are literals (``check_format``).
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Callable
from typing import Any

from webhook.cel.library.base import LibraryError, OpaqueValue, Overload
from webhook.gocompat.fmt import go_quote
from webhook.gocompat.time import go_rfc3339_nano

_SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
DEFAULT_PRECISION = 6
# cel-expr-python's names of type values -> CEL's
_TYPE_NAMES = {
    "BOOL": "bool", "BYTES": "bytes", "DOUBLE": "double", "INT": "int", "UINT": "uint", "STRING": "string",
    "NULL": "null_type", "LIST": "list", "MAP": "map", "TIMESTAMP": "google.protobuf.Timestamp",
    "DURATION": "google.protobuf.Duration", "TYPE": "type",
}


class FormatError(LibraryError):
    pass


class ExactDuration(OpaqueValue):
    """A duration handed to ``format`` to the nanosecond: cel-expr-python gives Python a
    duration as a ``timedelta`` (microseconds), so ``optimize`` passes a duration argument as
    this value, made from cel-cpp's exact ``string(d)`` ("0.000000002s")."""

    cel_type = "infergate.internal.ExactDuration"
    __slots__ = ("nanos",)

    def __init__(self, nanos: int) -> None:
        self.nanos = nanos

    @property
    def key(self) -> str:
        return _seconds_text(self.nanos) + "s"

    @classmethod
    def from_key(cls, key: str) -> ExactDuration:
        return cls(int(decimal.Decimal(key.removesuffix("s")) * 1_000_000_000))


class MapEntries(OpaqueValue):
    """The first element of a list that stands for a map handed to ``format``: cel-expr-python
    gives Python a map as a ``dict``, where the keys ``1`` and ``true`` are one, so ``optimize``
    passes a map argument as ``[MapEntries(), [key, value], ...]``."""

    cel_type = "infergate.internal.MapEntries"
    __slots__ = ()

    @property
    def key(self) -> str:
        return ""

    @classmethod
    def from_key(cls, key: str) -> MapEntries:
        return cls()


def _entries(value: Any) -> list[tuple[Any, Any]] | None:
    """A map's entries: of a ``dict``, or of a list standing for one (``MapEntries``)."""
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list) and value and isinstance(value[0], MapEntries):
        return [(key, item) for key, item in value[1:]]
    return None


def _seconds_text(nanos: int) -> str:
    """Exact decimal seconds of ``nanos`` (no exponent, no trailing zeros)."""
    sign = "-" if nanos < 0 else ""
    whole, fraction = divmod(abs(nanos), 1_000_000_000)
    return sign + str(whole) + (f".{fraction:09d}".rstrip("0") if fraction else "")


# --- CEL values' type names and string forms (as cel-go prints them) ----------------------


def type_name(value: Any) -> str:
    if value is None:
        return "null_type"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray)):
        return "bytes"
    if isinstance(value, datetime.datetime):
        return "google.protobuf.Timestamp"
    if isinstance(value, (datetime.timedelta, ExactDuration)):
        return "google.protobuf.Duration"
    if _entries(value) is not None:
        return "map"
    if isinstance(value, list):
        return "list"
    return getattr(value, "cel_type", type(value).__name__)


def go_float(f: float) -> str:
    """``strconv.FormatFloat(f, 'g', -1, 64)``: what ``string(double)`` prints."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    sign = "-" if f < 0 else ""
    # shortest round-trip digits (Python's repr and Go agree on them)
    shortest = decimal.Decimal(repr(abs(f))).normalize().as_tuple()
    digits = "".join(map(str, shortest.digits))
    exponent = len(digits) - 1 + shortest.exponent  # decimal exponent of the first digit
    if exponent < -4 or exponent >= _SHORTEST_EPREC:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent >= 0:
        whole = digits[: exponent + 1].ljust(exponent + 1, "0")
        fraction = digits[exponent + 1 :]
        return sign + whole + ("." + fraction if fraction else "")
    return sign + "0." + "0" * (-exponent - 1) + digits


# fmt's %v switches to %e for decimal exponents of 21 and more (and below -4)
_SHORTEST_EPREC = 21


def _duration_string(d: datetime.timedelta | ExactDuration) -> str:
    """cel-go's ``FormatString`` of a duration: ``strconv.FormatFloat(d.Seconds(), 'f', -1, 64)``."""
    if isinstance(d, ExactDuration):
        nanos = d.nanos
    else:
        nanos = ((d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds) * 1000
    if nanos % 1_000_000_000 == 0:
        return str(nanos // 1_000_000_000) + "s"
    seconds = nanos / 1e9  # a float64, as Go's Duration.Seconds()
    return format(decimal.Decimal(repr(seconds)), "f") + "s"


def format_string(value: Any) -> str:
    """The ``%s`` clause (cel-go ``FormatString``)."""
    entries = _entries(value)
    if entries is not None:
        return _format_map(entries)
    if isinstance(value, list):
        return _format_list(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, datetime.datetime):
        return go_rfc3339_nano(value.astimezone(datetime.timezone.utc))
    if isinstance(value, (datetime.timedelta, ExactDuration)):
        return _duration_string(value)
    if callable(getattr(value, "name", None)):  # a CEL type value
        return _TYPE_NAMES.get(value.name(), value.name())
    raise FormatError(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, "
        f"and timestamps, was given {type_name(value)}"
    )


def _member(value: Any) -> str:
    """A list element or map value: cel-go's ``clauseForType`` plus ``quoteForCEL``."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return go_quote(go_float(value))
        return f"{value:.{DEFAULT_PRECISION}f}"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, (bytes, bytearray)):
        return "b" + go_quote(bytes(value).decode("utf-8", "replace"))
    if isinstance(value, datetime.datetime):
        return f"timestamp({go_quote(go_rfc3339_nano(value.astimezone(datetime.timezone.utc)))})"
    if isinstance(value, (datetime.timedelta, ExactDuration)):
        return f"duration({go_quote(_duration_string(value))})"
    return format_string(value)


def _format_list(values: list[Any]) -> str:
    return "[" + ", ".join(_member(v) for v in values) + "]"


def _format_map(entries: list[tuple[Any, Any]]) -> str:
    pairs = []
    for key, value in entries:
        if isinstance(key, str):
            key_text = go_quote(key)
        elif isinstance(key, (bool, int)):
            key_text = format_string(key)
        else:
            raise FormatError(f"no formatting function for map key of type {type_name(key)}")
        pairs.append((key_text, _member(value)))
    pairs.sort(key=lambda pair: pair[0])
    return "{" + ", ".join(f"{k}:{v}" for k, v in pairs) + "}"


# --- the numeric clauses -------------------------------------------------------------------


def _decimal(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise FormatError(f"decimal clause can only be used on integers, was given {type_name(value)}")


def _as_double(value: Any, clause: str) -> float:
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    if isinstance(value, float):
        return value
    raise FormatError(f"{clause} clause can only be used on doubles, was given {type_name(value)}")


def _group(integer_digits: str) -> str:
    """en_US digit grouping, as golang.org/x/text's message printer applies it."""
    groups = []
    while len(integer_digits) > 3:
        groups.insert(0, integer_digits[-3:])
        integer_digits = integer_digits[:-3]
    return ",".join([integer_digits, *groups])


def _fixed(precision: int | None) -> Callable[[Any], str]:
    def fixed(value: Any) -> str:
        f = _as_double(value, "fixed-point")
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "∞" if f > 0 else "-∞"
        text = f"{abs(f):.{DEFAULT_PRECISION if precision is None else precision}f}"
        integer, dot, fraction = text.partition(".")
        return ("-" if f < 0 else "") + _group(integer) + dot + fraction

    return fixed


def _scientific(precision: int | None) -> Callable[[Any], str]:
    def scientific(value: Any) -> str:
        f = _as_double(value, "scientific")
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "∞" if f > 0 else "-∞"
        mantissa, _, exponent = f"{f:.{DEFAULT_PRECISION if precision is None else precision}e}".partition("e")
        exp = int(exponent)
        return f"{mantissa}×10" + f"{'-' if exp < 0 else ''}{abs(exp):02d}".translate(_SUPERSCRIPTS)

    return scientific


def _binary(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return f"{value:b}"
    raise FormatError(f"only integers and bools can be formatted as binary, was given {type_name(value)}")


def _hex(upper: bool) -> Callable[[Any], str]:
    def hexadecimal(value: Any) -> str:
        if isinstance(value, str):
            text = value.encode().hex()
        elif isinstance(value, (bytes, bytearray)):
            text = bytes(value).hex()
        elif isinstance(value, int) and not isinstance(value, bool):
            text = f"{value:x}"
        else:
            raise FormatError(f"only integers, byte buffers, and strings can be formatted as hex, was given {type_name(value)}")
        return text.upper() if upper else text

    return hexadecimal


def _octal(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:o}"
    raise FormatError(f"octal clause can only be used on integers, was given {type_name(value)}")


# --- parsing -------------------------------------------------------------------------------


def _clause(text: str) -> tuple[int, Callable[[Any], str], str]:
    """(characters read after '%', formatter, clause letter); FormatError for bad clauses."""
    i, precision = 0, None
    if text.startswith("."):
        i = 1
        while True:
            if i >= len(text):
                raise FormatError(
                    "could not parse formatting clause: error while parsing precision: could not find end of precision specifier"
                )
            if not ("0" <= text[i] <= "9"):
                break
            i += 1
        precision = int(text[1:i]) if i > 1 else 0
    letter = text[i]
    formatters: dict[str, Callable[[Any], str]] = {
        "s": format_string, "d": _decimal, "f": _fixed(precision), "e": _scientific(precision),
        "b": _binary, "x": _hex(False), "X": _hex(True), "o": _octal,
    }
    if letter not in formatters:
        raise FormatError(f'could not parse formatting clause: unrecognized formatting clause "{letter}"')
    return i + 1, formatters[letter], letter


def format_(template: str, args: list[Any]) -> str:
    out, i, index = [], 0, 0
    while i < len(template):
        ch = template[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        if template[i + 1 : i + 2] == "%":
            out.append("%")
            i += 2
            continue
        if i + 1 >= len(template):
            raise FormatError("unexpected end of string")
        if index >= len(args):
            raise FormatError(f"index {index} out of range")
        read, formatter, _ = _clause(template[i + 1 :])
        try:
            out.append(formatter(args[index]))
        except FormatError as err:
            if str(err).startswith(("could not parse", "no formatting")):
                raise
            raise FormatError(f"error during formatting: {err}") from None
        i += 1 + read
        index += 1
    if index < len(args):
        raise FormatError(f"too many arguments supplied to string.format (expected {index}, got {len(args)})")
    return "".join(out)


def clause_letters(template: str) -> list[str] | None:
    """The clause letter each argument of ``template.format(args)`` meets, in order (None for
    a template ``format_`` refuses)."""
    letters, i = [], 0
    while i < len(template):
        if template[i] != "%":
            i += 1
        elif template[i + 1 : i + 2] == "%":
            i += 2
        elif i + 1 >= len(template):
            return None
        else:
            try:
                read, _, letter = _clause(template[i + 1 :])
            except (FormatError, IndexError):
                return None
            letters.append(letter)
            i += 1 + read
    return letters


# --- compile-time validation of literal calls ----------------------------------------------

_CLAUSE_TYPES = {
    "d": ({"int", "uint"}, "decimal clause can only be used on integers"),
    # strings pass: "NaN", "Infinity" and "-Infinity" are formatted as doubles
    "f": ({"double", "string"}, "fixed-point clause can only be used on doubles"),
    "e": ({"double", "string"}, "scientific clause can only be used on doubles"),
    "b": ({"int", "uint", "bool"}, "only integers and bools can be formatted as binary"),
    "x": ({"int", "uint", "string", "bytes"}, "only integers, byte buffers, and strings can be formatted as hex"),
    "X": ({"int", "uint", "string", "bytes"}, "only integers, byte buffers, and strings can be formatted as hex"),
    "o": ({"int", "uint"}, "octal clause can only be used on integers"),
}


def check_format(template: str, arg_types: list[str]) -> str | None:
    """The error Kubernetes reports at compile time for ``template.format([args...])``."""
    i, index = 0, 0
    try:
        while i < len(template):
            if template[i] != "%":
                i += 1
                continue
            if template[i + 1 : i + 2] == "%":
                i += 2
                continue
            if i + 1 >= len(template):
                return "unexpected end of string"
            if index >= len(arg_types):
                return f"index {index} out of range"
            read, _, letter = _clause(template[i + 1 :])
            allowed = _CLAUSE_TYPES.get(letter)
            given = arg_types[index]
            if allowed and given != "dyn" and given not in allowed[0]:
                return f"error during formatting: {allowed[1]}, was given {given}"
            i += 1 + read
            index += 1
    except FormatError as err:
        return str(err)
    if index < len(arg_types):
        return f"too many arguments supplied to string.format (expected {index}, got {len(arg_types)})"
    return None


TYPES = (ExactDuration, MapEntries)
OVERLOADS = (Overload("format", "string_format", ("string", "list(dyn)"), "string", format_, member=True),)
