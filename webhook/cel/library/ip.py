"""IP addresses (``library/ip.go``): ``ip()``, ``isIP()``, ``ip.isCanonical()`` and the ``net.IP`` methods."""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from webhook.cel.library.base import LibraryError, OpaqueValue, Overload
from webhook.cel.library.netaddr import Address, addr_string, is_4in6, parse_addr
from webhook.gocompat.fmt import go_quote


class IP(OpaqueValue):
    cel_type = "net.IP"
    __slots__ = ("addr",)

    def __init__(self, addr: Address) -> None:
        self.addr = addr

    @property
    def key(self) -> str:
        return addr_string(self.addr)

    @classmethod
    def from_key(cls, key: str) -> IP:
        return cls(ipaddress.ip_address(key))

    def __str__(self) -> str:
        return self.key


@lru_cache(maxsize=4096)
def parse_ip(text: str) -> IP:
    """Kubernetes' ``parseIPAddr``: Go's parser, no zones, no IPv4-mapped IPv6."""
    try:
        addr, zone = parse_addr(text)
    except LibraryError as err:
        raise LibraryError(f"IP Address {go_quote(text)} parse error during conversion from string: {err}") from None
    if zone:
        raise LibraryError(f"IP address {go_quote(text)} with zone value is not allowed")
    if is_4in6(addr):
        raise LibraryError(f"IPv4-mapped IPv6 address {go_quote(text)} is not allowed")
    return IP(addr)


def is_ip(text: str) -> bool:
    try:
        parse_ip(text)
    except LibraryError:
        return False
    return True


def is_canonical(text: str) -> bool:
    return parse_ip(text).key == text


def family(ip: IP) -> int:
    return ip.addr.version


def is_unspecified(ip: IP) -> bool:
    return ip.addr.is_unspecified


def is_loopback(ip: IP) -> bool:
    return ip.addr.is_loopback


def is_link_local_multicast(ip: IP) -> bool:
    packed = ip.addr.packed
    if ip.addr.version == 4:
        return packed[:3] == b"\xe0\x00\x00"
    return packed[0] == 0xFF and packed[1] & 0x0F == 0x02


def is_link_local_unicast(ip: IP) -> bool:
    packed = ip.addr.packed
    if ip.addr.version == 4:
        return packed[:2] == b"\xa9\xfe"
    return packed[0] == 0xFE and packed[1] & 0xC0 == 0x80


def is_global_unicast(ip: IP) -> bool:
    """Go's ``IsGlobalUnicast``: private ranges count as global."""
    addr = ip.addr
    if addr.version == 4 and addr.packed in (b"\x00\x00\x00\x00", b"\xff\xff\xff\xff"):
        return False
    return not (addr.is_unspecified or addr.is_loopback or addr.is_multicast or is_link_local_unicast(ip))


def to_string(ip: IP) -> str:
    return ip.key


I = IP.cel_type
TYPES = (IP,)
OVERLOADS = (
    Overload("ip", "string_to_ip", ("string",), I, parse_ip),
    Overload("isIP", "is_ip", ("string",), "bool", is_ip),
    Overload("ip.isCanonical", "ip_is_canonical", ("string",), "bool", is_canonical),
    Overload("family", "ip_family", (I,), "int", family, member=True),
    Overload("isUnspecified", "ip_is_unspecified", (I,), "bool", is_unspecified, member=True),
    Overload("isLoopback", "ip_is_loopback", (I,), "bool", is_loopback, member=True),
    Overload("isLinkLocalMulticast", "ip_is_link_local_multicast", (I,), "bool", is_link_local_multicast, member=True),
    Overload("isLinkLocalUnicast", "ip_is_link_local_unicast", (I,), "bool", is_link_local_unicast, member=True),
    Overload("isGlobalUnicast", "ip_is_global_unicast", (I,), "bool", is_global_unicast, member=True),
    Overload("string", "ip_to_string", (I,), "string", to_string),
)
