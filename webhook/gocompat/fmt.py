"""Go's ways of printing values, reproduced for the apiserver's error strings.

The apiserver builds its messages with ``fmt`` verbs (``%v``, ``%q``) and
``encoding/json``; the recorded answers depend on their exact output (``5`` not
``5.0``, ``1e+06`` not ``1000000.0``, non-ASCII kept by ``%q``).
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
            "\\": "\\\\", '"': '\\"'}


def go_quote(text: str) -> str:
    """``strconv.Quote``: printable runes kept, the rest escaped Go-style."""
    out = ['"']
    for ch in text:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            if code < 0x80:
                out.append(f"\\x{code:02x}")
            elif 0xD800 <= code <= 0xDFFF:  # lone surrogate: Go never sees one, prints U+FFFD
                out.append("\ufffd")
            elif code <= 0xFFFF:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _exp_form(mantissa: str, exp: int) -> str:
    sign = "-" if exp < 0 else "+"
    return f"{mantissa}e{sign}{abs(exp):02d}"


def _shortest_digits(value: float) -> tuple[str, int]:
    """Shortest round-trip digits and decimal exponent (value = 0.d1d2... x 10**dp)."""
    text = repr(abs(value))
    if "e" in text or "E" in text:
        mant, exp_s = text.lower().split("e")
        exp = int(exp_s)
    else:
        mant, exp = text, 0
    if "." in mant:
        int_part, frac = mant.split(".")
    else:
        int_part, frac = mant, ""
    if frac == "0":
        frac = ""
    digits = (int_part + frac).lstrip("0")
    lead_zeros = len(int_part + frac) - len((int_part + frac).lstrip("0"))
    dp = len(int_part) + exp - lead_zeros
    digits = digits.rstrip("0") or "0"
    return digits, dp


def go_float(value: float, *, json_style: bool = False) -> str:
    """``%v`` of a float64 (``strconv.FormatFloat(v, 'g', -1, 64)``), or its JSON form."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 and not json_style else "0"
    digits, dp = _shortest_digits(value)
    sign = "-" if value < 0 else ""
    exp = dp - 1
    if json_style:  # encoding/json: 'f' unless the magnitude is < 1e-6 or >= 1e21
        use_exp = abs(value) < 1e-6 or abs(value) >= 1e21
    else:  # strconv 'g' with shortest precision: %e when exp < -4 or exp >= 6
        use_exp = exp < -4 or exp >= 6
    if use_exp:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = _exp_form(mant, exp)
        if json_style:  # Go's JSON writes e-07, not e-07 padded differently: strip the zero pad
            text = re.sub(r"e([+-])0(\d)$", r"e\1\2", text)
        return sign + text
    if dp <= 0:
        return sign + "0." + "0" * (-dp) + digits
    if dp >= len(digits):
        return sign + digits + "0" * (dp - len(digits))
    return sign + digits[:dp] + "." + digits[dp:]


def go_value(value: Any) -> str:
    """``fmt.Sprintf("%v", value)`` for JSON-like values."""
    if value is None:
        return "<nil>"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_value(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def go_type_name(value: Any) -> str:
    """``%T`` of a value decoded by ``encoding/json`` into ``interface{}`` (ints as int64)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[string]interface {}"
    return type(value).__name__


_JSON_ESC = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
             "<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _json_string(text: str) -> str:
    out = ['"']
    for ch in text:
        esc = _JSON_ESC.get(ch)
        if esc is not None:
            out.append(esc)
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_struct_json(fields: Mapping[str, Any]) -> str:
    """``json.Marshal`` of a Go struct: its fields in declaration (here: insertion) order."""
    return "{" + ",".join(f"{_json_string(k)}:{go_json(v)}" for k, v in fields.items()) + "}"


def go_json(value: Any) -> str:
    """``json.Marshal`` of a JSON-like value: compact, keys sorted, HTML characters escaped."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value, json_style=True)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json_string(k)}:{go_json(value[k])}" for k in sorted(value)) + "}"
    return _json_string(str(value))
