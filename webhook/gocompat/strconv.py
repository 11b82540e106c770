"""Go's ``strconv`` parsers, as cel-go converts strings to numbers (``int()``, ``uint()``,
``double()`` of a string): None wherever Go returns an error."""

from __future__ import annotations

import math
import re

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
