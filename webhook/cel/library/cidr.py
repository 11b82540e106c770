"""CIDR prefixes (``library/cidr.go``): ``cidr()``, ``isCIDR()`` and the ``net.CIDR`` methods."""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from webhook.cel.library.base import LibraryError, OpaqueValue, Overload
from webhook.cel.library.ip import IP, parse_ip
from webhook.cel.library.netaddr import Address, addr_string, is_4in6, parse_prefix
from webhook.gocompat.fmt import go_quote

_PARSE_ERROR = "network address parse error during conversion from string: "


class CIDR(OpaqueValue):
    """A prefix as written: host bits are kept (``string(cidr("10.0.0.1/8"))`` keeps them)."""

    cel_type = "net.CIDR"
    __slots__ = ("addr", "bits")

    def __init__(self, addr: Address, bits: int) -> None:
        self.addr = addr
        self.bits = bits

    @property
    def key(self) -> str:
        return f"{addr_string(self.addr)}/{self.bits}"

    @classmethod
    def from_key(cls, key: str) -> CIDR:
        addr, _, bits = key.rpartition("/")
        return cls(ipaddress.ip_address(addr), int(bits))

    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network((self.addr, self.bits), strict=False)

    def __str__(self) -> str:
        return self.key


@lru_cache(maxsize=4096)
def parse_cidr(text: str) -> CIDR:
    try:
        addr, bits = parse_prefix(text)
        if is_4in6(addr):
            raise LibraryError(f"IPv4-mapped IPv6 address {go_quote(text)} is not allowed")
    except LibraryError as err:
        # Kubernetes wraps the message twice (parseCIDR and stringToCIDR both add it)
        raise LibraryError(_PARSE_ERROR + _PARSE_ERROR + str(err)) from None
    return CIDR(addr, bits)


def is_cidr(text: str) -> bool:
    try:
        parse_cidr(text)
    except LibraryError:
        return False
    return True


def contains_ip(cidr: CIDR, ip: IP | str) -> bool:
    if isinstance(ip, str):
        try:
            ip = parse_ip(ip)
        except LibraryError:
            # cidrContainsIP receives the error value and answers "no such overload"
            raise LibraryError("no such overload") from None
    return ip.addr.version == cidr.addr.version and ip.addr in cidr.network()


def contains_cidr(cidr: CIDR, other: CIDR | str) -> bool:
    if isinstance(other, str):
        other = parse_cidr(other)
    if other.addr.version != cidr.addr.version:
        return False
    return cidr.bits <= other.bits and other.addr in cidr.network()


def ip(cidr: CIDR) -> IP:
    return IP(cidr.addr)


def masked(cidr: CIDR) -> CIDR:
    return CIDR(cidr.network().network_address, cidr.bits)


def prefix_length(cidr: CIDR) -> int:
    return cidr.bits


def to_string(cidr: CIDR) -> str:
    return cidr.key


C, I = CIDR.cel_type, IP.cel_type
TYPES = (CIDR,)
OVERLOADS = (
    Overload("cidr", "string_to_cidr", ("string",), C, parse_cidr),
    Overload("isCIDR", "is_cidr", ("string",), "bool", is_cidr),
    Overload("containsIP", "cidr_contains_ip_string", (C, "string"), "bool", contains_ip, member=True),
    Overload("containsIP", "cidr_contains_ip_ip", (C, I), "bool", contains_ip, member=True),
    Overload("containsCIDR", "cidr_contains_cidr_string", (C, "string"), "bool", contains_cidr, member=True),
    Overload("containsCIDR", "cidr_contains_cidr", (C, C), "bool", contains_cidr, member=True),
    Overload("ip", "cidr_ip", (C,), I, ip, member=True),
    Overload("masked", "cidr_masked", (C,), C, masked, member=True),
    Overload("prefixLength", "cidr_prefix_length", (C,), "int", prefix_length, member=True),
    Overload("string", "cidr_to_string", (C,), "string", to_string),
)
