"""Go's ``net/netip`` parsing (``ParseAddr``, ``ParsePrefix``) with its exact error messages.

Python's ``ipaddress`` accepts and rejects different strings and words errors differently;
Kubernetes' ``ip()``/``cidr()`` messages embed Go's, so the parser is ported here and the
parsed bytes are handed to ``ipaddress`` for formatting and classification.
"""

from __future__ import annotations

import ipaddress

from webhook.cel.library.base import LibraryError
from webhook.gocompat.fmt import go_quote

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddrError(LibraryError):
    def __init__(self, text: str, msg: str, at: str = "") -> None:
        where = f" (at {go_quote(at)})" if at else ""
        super().__init__(f"ParseAddr({go_quote(text)}): {msg}{where}")


def parse_addr(text: str) -> tuple[Address, str]:
    """(address, zone) as ``netip.ParseAddr`` parses them."""
    for ch in text:
        if ch == ".":
            return ipaddress.IPv4Address(bytes(_ipv4_fields(text, text))), ""
        if ch == ":":
            return _parse_ipv6(text)
        if ch == "%":
            raise AddrError(text, "missing IPv6 address")
    raise AddrError(text, "unable to parse IP")


def _ipv4_fields(whole: str, s: str) -> list[int]:
    fields: list[int] = []
    val = digits = 0
    for i, ch in enumerate(s):
        if "0" <= ch <= "9":
            if digits == 1 and val == 0:
                raise AddrError(whole, "IPv4 field has octet with leading zero")
            val = val * 10 + ord(ch) - 48
            digits += 1
            if val > 255:
                raise AddrError(whole, "IPv4 field has value >255")
        elif ch == ".":
            if i == 0 or i == len(s) - 1 or s[i - 1] == ".":
                raise AddrError(whole, "IPv4 field must have at least one digit", s[i:])
            if len(fields) == 3:
                raise AddrError(whole, "IPv4 address too long")
            fields.append(val)
            val = digits = 0
        else:
            raise AddrError(whole, "unexpected character", s[i:])
    if len(fields) < 3:
        raise AddrError(whole, "IPv4 address too short")
    fields.append(val)
    return fields


def _parse_ipv6(text: str) -> tuple[Address, str]:
    s, zone = text, ""
    if "%" in s:
        s, zone = s.split("%", 1)
        if not zone:
            raise AddrError(text, "zone must be a non-empty string")
    ip = bytearray(16)
    ellipsis = -1
    if len(s) >= 2 and s[0] == ":" and s[1] == ":":
        ellipsis = 0
        s = s[2:]
        if not s:
            return ipaddress.IPv6Address(0), zone
    i = 0
    while i < 16:
        off = acc = 0
        while off < len(s):
            c = s[off]
            if "0" <= c <= "9":
                acc = (acc << 4) + ord(c) - 48
            elif "a" <= c <= "f":
                acc = (acc << 4) + ord(c) - 87
            elif "A" <= c <= "F":
                acc = (acc << 4) + ord(c) - 55
            else:
                break
            if off > 3:
                raise AddrError(text, "each group must have 4 or less digits", s)
            if acc > 0xFFFF:
                raise AddrError(text, "IPv6 field has value >=2^16", s)
            off += 1
        if off == 0:
            raise AddrError(text, "each colon-separated field must have at least one digit", s)
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and i != 12:
                raise AddrError(text, "embedded IPv4 address must replace the final 2 fields of the address", s)
            if i + 4 > 16:
                raise AddrError(text, "too many hex fields to fit an embedded IPv4 at the end of the address", s)
            ip[i : i + 4] = bytes(_ipv4_fields(text, s))
            s = ""
            i += 4
            break
        ip[i], ip[i + 1] = acc >> 8, acc & 0xFF
        i += 2
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            raise AddrError(text, "unexpected character, want colon", s)
        if len(s) == 1:
            raise AddrError(text, "colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise AddrError(text, "multiple :: in address", s)
            ellipsis = i
            s = s[1:]
            if not s:
                break
    if s:
        raise AddrError(text, "trailing garbage after address", s)
    if i < 16:
        if ellipsis < 0:
            raise AddrError(text, "address string too short")
        n = 16 - i
        ip[ellipsis + n : 16] = ip[ellipsis:i]
        ip[ellipsis : ellipsis + n] = bytes(n)
    elif ellipsis >= 0:
        raise AddrError(text, "the :: must expand to at least one field of zeros", s)
    return ipaddress.IPv6Address(bytes(ip)), zone


def parse_prefix(text: str) -> tuple[Address, int]:
    """(address with host bits kept, prefix length) as ``netip.ParsePrefix`` parses them."""

    def fail(msg: str) -> LibraryError:
        return LibraryError(f"netip.ParsePrefix({go_quote(text)}): {msg}")

    slash = text.rfind("/")
    if slash < 0:
        raise fail("no '/'")
    try:
        addr, zone = parse_addr(text[:slash])
    except LibraryError as err:
        raise fail(str(err)) from None
    if addr.version == 6 and zone:
        raise fail("IPv6 zones cannot be present in a prefix")
    bits_text = text[slash + 1 :]
    if len(bits_text) > 1 and not ("1" <= bits_text[0] <= "9"):
        raise fail(f"bad bits after slash: {go_quote(bits_text)}")
    if not bits_text or not (bits_text.isascii() and bits_text.isdigit()):
        raise fail(f"bad bits after slash: {go_quote(bits_text)}")
    bits = int(bits_text)
    if bits > addr.max_prefixlen:
        raise fail("prefix length out of range")
    return addr, bits


def is_4in6(addr: Address) -> bool:
    return addr.version == 6 and addr.ipv4_mapped is not None


def addr_string(addr: Address) -> str:
    """``netip.Addr.String()``."""
    return str(addr)
