"""String formats the apiserver checks (kube-openapi's strfmt registry, as kept for CRDs), and
which formats a CRD schema keeps at all (``kept_format``).

Each checker answers "is this string a valid <format>", following the Go functions
kube-openapi registers (govalidator, net, net/mail, time), not Python's notions.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable

from webhook.gocompat import neturl
from webhook.gocompat.time import parse_go_duration
from webhook.validation import names

# kube-openapi's HostnamePattern over a "skeleton" of the string where every non-ASCII
# letter becomes "a" and every symbol "#": the same language as its \p{L}/\p{S} classes.
_HOSTNAME = re.compile(
    r"^([a-zA-Z0-9#]((-?[a-zA-Z0-9#]{0,62})?)|([a-zA-Z0-9#](([a-zA-Z0-9\-#]{0,61}"
    r"[a-zA-Z0-9#])?)(\.)){1,}([a-zA-Z]){2,63})$")
_UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.I)
_UUID3 = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.I)
_UUID4 = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$", re.I)
_UUID5 = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$", re.I)
_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_RGB_PART = r"\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*"
_RGBCOLOR = re.compile(rf"^rgb\({_RGB_PART},{_RGB_PART},{_RGB_PART}\)$", re.A)
_SSN = re.compile(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$", re.A)
_ISBN10 = re.compile(r"^(?:[0-9]{9}X|[0-9]{10})$")
_ISBN13 = re.compile(r"^(?:[0-9]{13})$")
_CREDITCARD = re.compile(
    r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)[0-9]{12}|"
    r"6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11}|"
    r"6[27][0-9]{14})$")
_DATETIME_TIME = re.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
_WHITESPACE_AND_MINUS = re.compile(r"[\s-]+", re.A)
_BSON = re.compile(r"^[0-9a-fA-F]{24}$")
_SCALA_UNITS = (("ns", "nano"), ("us", "µs", "micro"), ("ms", "milli"), ("s", "sec"), ("m", "min"),
                ("h", "hr", "hour"), ("d", "day"), ("w", "wk", "week"))


_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_full_date(text: str) -> bool:
    """``time.Parse("2006-01-02", s)`` (proleptic Gregorian, year 0000 included)."""
    if len(text) != 10 or text[4] != "-" or text[7] != "-":
        return False
    y, m, d = text[:4], text[5:7], text[8:]
    if not all(part.isascii() and part.isdigit() for part in (y, m, d)):
        return False
    year, month, day = int(y), int(m), int(d)
    if not 1 <= month <= 12:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 1 <= day <= _DAYS_IN_MONTH[month - 1] + (1 if month == 2 and leap else 0)


def is_datetime(text: str) -> bool:
    """kube-openapi ``IsDateTime``: a full date, ``t``, a time with ``z`` or an offset."""
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not is_full_date(parts[0]):
        return False
    match = _DATETIME_TIME.match(parts[1])
    if not match:
        return False
    return match.group(1) <= "23" and match.group(2) <= "59" and match.group(3) <= "59"


_SCALA_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000,
             "h": 3_600_000_000_000, "d": 86_400_000_000_000, "w": 604_800_000_000_000}
_SCALA_DURATION = re.compile(r"^\s*(?:\d+\s*[A-Za-zµ]+\s*)+$", re.A)
_SCALA_PART = re.compile(r"(\d+)\s*([A-Za-zµ]+)", re.A)
_OVER = 1 << 63  # 2**63: strconv.Atoi's int64 range, and its wrap-around


def parse_duration(text: str) -> int | None:
    """kube-openapi ``ParseDuration`` in nanoseconds: Go's syntax, else the scala-like form
    ("3 days", "1h 30min"); what a ``format: duration`` string is, for validation and for CEL."""
    go = parse_go_duration(text)
    if go is not None:
        return go
    if not _SCALA_DURATION.match(text):
        return None
    total, recognised = 0, False
    for factor, unit in _SCALA_PART.findall(text):
        if int(factor) >= _OVER:  # strconv.Atoi's range error
            return None
        unit = unit.lower()
        for variants in _SCALA_UNITS:
            last = len(variants) - 1
            for i, variant in enumerate(variants):
                if (i == last and unit.startswith(variant)) or variant == unit:
                    recognised = True
                    total += int(factor) * _SCALA_NS[variants[0]]
    return _wrap_int64(total) if recognised else None


def _wrap_int64(value: int) -> int:
    """Go's silent int64 overflow."""
    return (value + _OVER) % (2 * _OVER) - _OVER


def is_duration(text: str) -> bool:
    return parse_duration(text) is not None


def _parse_ipv4(text: str, sloppy: bool) -> bool:
    parts = text.split(".")
    if len(parts) != 4:
        return False
    for part in parts:
        if not part or not (part.isascii() and part.isdigit()) or len(part) > 3 and not sloppy:
            return False
        if not sloppy and len(part) > 1 and part[0] == "0":
            return False
        if int(part) > 255:
            return False
    return True


def _parse_ipv6(text: str) -> bool:
    """``net.ParseIP`` for the IPv6 forms (an embedded dotted IPv4 tail allowed)."""
    if "%" in text or not text:
        return False
    groups_needed = 8
    if "." in text:
        head, _, tail = text.rpartition(":")
        if not _parse_ipv4(tail, sloppy=False):
            return False
        text = head + ":0:0"
        if head.endswith(":") and not head.endswith("::"):
            return False
    if text.count("::") > 1:
        return False
    if "::" in text:
        left, right = text.split("::")
        lparts = left.split(":") if left else []
        rparts = right.split(":") if right else []
        if len(lparts) + len(rparts) > groups_needed - 1:
            return False
        parts = lparts + rparts
    else:
        parts = text.split(":")
        if len(parts) != groups_needed:
            return False
    for part in parts:
        if not 1 <= len(part) <= 4 or any(c not in "0123456789abcdefABCDEF" for c in part):
            return False
    return True


def is_ipv4(text: str) -> bool:
    """``netutils.ParseIPSloppy(s) != nil && strings.Contains(s, ".")``."""
    return "." in text and (_parse_ipv4(text, sloppy=True) or _parse_ipv6(text))


def is_ipv6(text: str) -> bool:
    return ":" in text and _parse_ipv6(text)


def is_cidr(text: str) -> bool:
    """``netutils.ParseCIDRSloppy``."""
    addr, sep, prefix = text.partition("/")
    if not sep or not prefix.isascii() or not prefix.isdigit():  # leading zeros are fine (Go 1.16 dtoi)
        return False
    bits = int(prefix)
    if _parse_ipv4(addr, sloppy=True):
        return bits <= 32
    if _parse_ipv6(addr):
        return bits <= 128
    return False


def is_mac(text: str) -> bool:
    """``net.ParseMAC``: 6, 8 or 20 octets, ``:``/``-`` separated pairs or ``.`` separated quads."""
    if len(text) < 14:
        return False
    hexd = set("0123456789abcdefABCDEF")
    if text[2] in ":-":
        sep = text[2]
        if (len(text) + 1) % 3 != 0:
            return False
        n = (len(text) + 1) // 3
        if n not in (6, 8, 20):
            return False
        for i in range(n):
            pair = text[3 * i:3 * i + 2]
            if len(pair) != 2 or any(c not in hexd for c in pair):
                return False
            if i < n - 1 and text[3 * i + 2] != sep:
                return False
        return True
    if text[4] == ".":
        if (len(text) + 1) % 5 != 0:
            return False
        n = 2 * (len(text) + 1) // 5
        if n not in (6, 8, 20):
            return False
        for i in range(n // 2):
            quad = text[5 * i:5 * i + 4]
            if len(quad) != 4 or any(c not in hexd for c in quad):
                return False
            if i < n // 2 - 1 and text[5 * i + 4] != ".":
                return False
        return True
    return False


def is_email(text: str) -> bool:
    """``net/mail.ParseAddress`` (the common forms: ``local@domain`` and ``Name <local@domain>``)."""
    addr = text.strip()
    if addr.endswith(">") and "<" in addr:
        addr = addr[addr.rindex("<") + 1:-1]
    if addr.count("@") < 1:
        return False
    local, _, domain = addr.rpartition("@")
    if not local or not domain or " " in domain or domain.startswith(".") or domain.endswith("."):
        return False
    if local.startswith('"') and local.endswith('"') and len(local) >= 2:
        return True
    atext = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-/=?^_`{|}~.")
    if local.startswith(".") or local.endswith(".") or ".." in local:
        return False
    return all(c in atext or ord(c) > 127 for c in local) and all(
        c in atext or c in "[]:" or ord(c) > 127 for c in domain)


def _hostname_skeleton(text: str) -> str:
    out = []
    for ch in text:
        if ch.isascii():
            out.append("#" if unicodedata.category(ch)[0] == "S" else ch)
        else:
            cat = unicodedata.category(ch)[0]
            out.append("a" if cat == "L" else "#" if cat == "S" else "!")
    return "".join(out)


def is_hostname(text: str) -> bool:
    if not _HOSTNAME.match(_hostname_skeleton(text)) or len(text.encode()) > 255:
        return False
    return all(len(part.encode()) <= 63 for part in text.split("."))


def _sanitize(text: str) -> str:
    """govalidator drops whitespace and dashes before checking ISBNs and card numbers."""
    return _WHITESPACE_AND_MINUS.sub("", text)


def _isbn10(text: str) -> bool:
    s = _sanitize(text)
    if not _ISBN10.match(s):
        return False
    total = sum((10 - i) * (10 if c == "X" else int(c)) for i, c in enumerate(s))
    return total % 11 == 0


def _isbn13(text: str) -> bool:
    s = _sanitize(text)
    if not _ISBN13.match(s):
        return False
    total = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(s[:12]))
    return (10 - total % 10) % 10 == int(s[12])


def is_creditcard(text: str) -> bool:
    s = _sanitize(text)
    if not _CREDITCARD.match(s):
        return False
    total, double = 0, False
    for c in reversed(s):
        d = int(c)
        if double:
            d *= 2
            if d > 9:
                d -= 9
        total += d
        double = not double
    return total % 10 == 0


def is_base64(text: str) -> bool:
    """govalidator's ``IsBase64``: the shape only (padded standard alphabet)."""
    return bool(_BASE64.match(text))


# normalised format name (dashes removed, as go-openapi does) -> checker; exactly the string formats
# apiextensions supports at 1.36 (``supportedVersionedFormats``: k8s-short-name/k8s-long-name since 1.34)
FORMAT_CHECKERS: dict[str, Callable[[str], bool]] = {
    "bsonobjectid": lambda s: bool(_BSON.match(s)),
    "uri": neturl.is_request_uri,
    "email": is_email,
    "hostname": is_hostname,
    "ipv4": is_ipv4,
    "ipv6": is_ipv6,
    "cidr": is_cidr,
    "mac": is_mac,
    "uuid": lambda s: bool(_UUID.match(s)),
    "uuid3": lambda s: bool(_UUID3.match(s)),
    "uuid4": lambda s: bool(_UUID4.match(s)),
    "uuid5": lambda s: bool(_UUID5.match(s)),
    "isbn": lambda s: _isbn10(s) or _isbn13(s),
    "isbn10": _isbn10,
    "isbn13": _isbn13,
    "creditcard": is_creditcard,
    "ssn": lambda s: bool(_SSN.match(s)),
    "hexcolor": lambda s: bool(_HEXCOLOR.match(s)),
    "rgbcolor": lambda s: bool(_RGBCOLOR.match(s)),
    "byte": is_base64,
    "password": lambda s: True,
    "date": is_full_date,
    "datetime": is_datetime,
    "duration": is_duration,
    # kube-openapi's IsShortName/IsLongName are apimachinery's label and subdomain checks, lower case only
    "k8sshortname": lambda s: not names.dns1123_label(s),
    "k8slongname": lambda s: not names.dns1123_subdomain(s),
}
_NUMBER_FORMATS = {"integer": ("int32", "int64"), "number": ("float", "double")}


def kept_format(schema_type: str, fmt: str) -> str:
    """``StripUnsupportedFormatsPostProcessorForVersion``: the format a CRD schema node keeps for
    validation, ``""`` where the apiserver strips it (and warns ``unrecognized format``).

    String (and untyped) nodes keep a supported string format, compared with its dashes removed
    and its case kept; integer and number nodes keep only their Go sizes; other types none.
    """
    if schema_type in ("", "string"):
        return fmt if fmt.replace("-", "") in FORMAT_CHECKERS else ""
    return fmt if fmt in _NUMBER_FORMATS.get(schema_type, ()) else ""

