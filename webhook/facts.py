"""Exact parsing of the sizes the APIs write as strings.

One implementation shared by admission (policies) and the controller (planner), so both
answer the same for the same text:

* parameter counts (``"32B"``, ``"1.5B"``, ``"500M"``; docs/design.md, "Parameter counts") -> int, parsed with
  ``Decimal`` so ``1.1B`` is exactly 1_100_000_000 and never 1_100_000_000.0000002;
* Kubernetes quantities (``"12032Mi"``, ``"24Gi"``, ``"1.5"``, ``"100m"``, ``"1e3"``) -> an exact
  ``Decimal`` (what ``resource.MustParse`` means, without its rounding to milli-units).

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

PARAMETER_COUNT_PATTERN = r"^[0-9]+(\.[0-9]+)?[MmBb]$"
_PARAMETER_COUNT = re.compile(PARAMETER_COUNT_PATTERN)
_PARAMETER_SCALE = {"m": Decimal(10) ** 6, "b": Decimal(10) ** 9}


class FactError(ValueError):
    """A size string that does not match its documented format."""


def parse_parameter_count(text: str) -> int:
    """``"32B"`` -> 32_000_000_000; ``"1.5B"`` -> 1_500_000_000; ``"500M"`` -> 500_000_000.

    A fractional result (``"1.0000000001M"``) is rounded up: a limit or a need is never
    understated by parsing. Raises ``FactError`` for text outside ``^[0-9]+(\\.[0-9]+)?[MmBb]$``.
    """
    if not isinstance(text, str) or not _PARAMETER_COUNT.match(text):
        raise FactError(
            f"invalid parameter count {text!r}: expected a number with suffix M or B, "
            f"e.g. 500M, 1.5B, 32B"
        )
    value = Decimal(text[:-1]) * _PARAMETER_SCALE[text[-1].lower()]
    return int(value.to_integral_value(rounding="ROUND_CEILING"))


_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# The grammar of k8s.io/apimachinery/pkg/api/resource.ParseQuantity.
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?|[eE][+-]?[0-9]+)$"
)

GIB = Decimal(2) ** 30


def parse_quantity(value: str | int | float) -> Decimal:
    """A Kubernetes quantity as an exact ``Decimal`` (``"12032Mi"`` -> 12616466432)."""
    if isinstance(value, bool):
        raise FactError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(str(value))
    match = _QUANTITY.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise FactError(f"invalid quantity {value!r}: expected e.g. 24Gi, 12032Mi, 1.5, 100m")
    try:
        number = Decimal(match["number"])
    except InvalidOperation as exc:  # pragma: no cover - the pattern admits only decimals
        raise FactError(f"invalid quantity {value!r}") from exc
    suffix = match["suffix"]
    if suffix in _BINARY_SUFFIXES:
        return number * (Decimal(1024) ** _BINARY_SUFFIXES[suffix])
    if suffix in _DECIMAL_SUFFIXES:
        return number.scaleb(_DECIMAL_SUFFIXES[suffix])
    return number.scaleb(int(suffix[1:]))
