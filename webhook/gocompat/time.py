"""Go's ``time`` package where Kubernetes' answers depend on it: ``time.ParseDuration`` (the
``duration`` string format, CEL's ``duration()``, durations on the command line),
``time.Parse(time.RFC3339, s)`` (CEL's ``timestamp()``) and ``t.Format(time.RFC3339Nano)``
(CEL's ``string()`` of a timestamp)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

_GO_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
               "m": 60_000_000_000, "h": 3_600_000_000_000}
_OVER = 1 << 63  # Go's uint64 arithmetic refuses anything above this


def parse_go_duration(text: str) -> int | None:
    """``time.ParseDuration`` in nanoseconds (None where Go returns an error): ``[-+]`` then
    ``<number>[.<fraction>]<unit>`` pairs, with Go's integer arithmetic and overflow checks."""
    s, negative = text, text[:1] == "-"
    if s[:1] in ("+", "-"):
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        return None
    total = 0
    while s:
        if not (s[0] == "." or "0" <= s[0] <= "9"):
            return None
        digits = len(s) - len(s.lstrip("0123456789"))
        whole, s = s[:digits], s[digits:]
        if whole and int(whole) > _OVER:
            return None
        fraction = ""
        if s[:1] == ".":
            s = s[1:]
            places = len(s) - len(s.lstrip("0123456789"))
            fraction, s = s[:places], s[places:]
            if not whole and not fraction:
                return None
        elif not whole:
            return None
        end = next((i for i, c in enumerate(s) if c == "." or "0" <= c <= "9"), len(s))
        unit = _GO_UNIT_NS.get(s[:end])
        if unit is None:
            return None
        s = s[end:]
        value = int(whole or "0")
        if value > _OVER // unit:
            return None
        value *= unit
        if fraction:
            kept, scale = _leading_fraction(fraction)
            value += int(kept * (unit / scale))  # float64, as Go does, nanosecond-exact up to hours
            if value > _OVER:
                return None
        total += value
        if total > _OVER:
            return None
    if negative:
        return -total
    return total if total < _OVER else None


def _leading_fraction(digits: str) -> tuple[int, float]:
    """Go's ``leadingFraction``: the digits that fit an int64, and 10 to their count."""
    value, scale = 0, 1.0
    for c in digits:
        step = value * 10 + int(c)
        if value > (_OVER - 1) // 10 or step > _OVER:
            break
        value, scale = step, scale * 10
    return value, scale


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


def valid_rfc3339(text: str) -> bool:
    """Whether ``text`` is a timestamp cel-go takes: Go's ``time.Parse(time.RFC3339)`` reads it
    and it falls within CEL's years 1 to 9999 (what the apiserver checks of a constant
    ``timestamp('...')``)."""
    try:
        return parse_rfc3339(text) is not None
    except OverflowError:
        return False


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
