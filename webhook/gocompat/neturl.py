"""The parts of Go's ``net/url`` that Kubernetes exposes: ``url.ParseRequestURI`` (the ``uri``
string format, CEL's ``url()``/``isURL()``/``format.uri()``) and the ``URL`` getters, with Go's
error texts (``URLError``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from webhook.gocompat.fmt import go_quote

_HEX = "0123456789abcdefABCDEF"
_UNRESERVED = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~")
_PATH_KEEP = _UNRESERVED | set("$&+,/:;=@")
_HOST_KEEP = _UNRESERVED | set("!$&'()*+,;=:[]<>\"")


class URLError(ValueError):
    """What Go's ``net/url`` returns as an error; ``str()`` is its text."""


@dataclass
class GoURL:
    scheme: str = ""
    opaque: str = ""
    host: str = ""
    path: str = ""
    raw_path: str = ""
    raw_query: str = ""
    force_query: bool = False
    fragment: str = ""
    has_user: bool = field(default=False, repr=False)


def _unescape(s: str, mode: str) -> str:
    """Go ``unescape``: validates %XX escapes; hosts reject some bytes."""
    i = 0
    while i < len(s):
        if s[i] == "%":
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise URLError(f"invalid URL escape {go_quote(s[i : i + 3])}")
            i += 3
            continue
        if mode == "host" and ord(s[i]) < 0x80 and s[i] not in _HOST_KEEP:
            raise URLError(f"invalid character {go_quote(s[i])} in host name")
        i += 1
    if mode == "query":
        s = s.replace("+", " ")
    return unquote_to_bytes(s).decode("utf-8", "surrogateescape")


def _escape_path(s: str) -> str:
    out = []
    for byte in s.encode("utf-8", "surrogateescape"):
        ch = chr(byte)
        out.append(ch if byte < 0x80 and ch in _PATH_KEEP else f"%{byte:02X}")
    return "".join(out)


def _scheme(raw: str) -> tuple[str, str]:
    for i, c in enumerate(raw):
        if c.isascii() and c.isalpha():
            continue
        if c.isascii() and (c.isdigit() or c in "+-."):
            if i == 0:
                return "", raw
            continue
        if c == ":":
            if i == 0:
                raise URLError("missing protocol scheme")
            return raw[:i], raw[i + 1 :]
        return "", raw
    return "", raw


def _valid_optional_port(port: str) -> bool:
    if port == "":
        return True
    return port[0] == ":" and all("0" <= b <= "9" for b in port[1:])


def _parse_host(host: str) -> str:
    if host.startswith("["):
        i = host.rfind("]")
        if i < 0:
            raise URLError("missing ']' in host")
        colon_port = host[i + 1 :]
        if not _valid_optional_port(colon_port):
            raise URLError(f"invalid port {go_quote(colon_port)} after host")
    else:
        i = host.rfind(":")
        if i != -1:
            colon_port = host[i:]
            if not _valid_optional_port(colon_port):
                raise URLError(f"invalid port {go_quote(colon_port)} after host")
    return _unescape(host, "host")


def _parse(raw: str, via_request: bool) -> GoURL:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise URLError("net/url: invalid control character in URL")
    if raw == "" and via_request:
        raise URLError("empty url")
    url = GoURL()
    if raw == "*":
        url.path = "*"
        return url
    scheme, rest = _scheme(raw)
    url.scheme = scheme.lower()
    if rest.endswith("?") and rest.count("?") == 1:
        url.force_query = True
        rest = rest[:-1]
    else:
        rest, _, url.raw_query = rest.partition("?")
    if not rest.startswith("/"):
        if url.scheme:
            url.opaque = rest
            return url
        if via_request:
            raise URLError("invalid URI for request")
        if ":" in rest.partition("/")[0]:
            raise URLError("first path segment in URL cannot contain colon")
    if (url.scheme or (not via_request and not rest.startswith("///"))) and rest.startswith("//"):
        authority, rest = rest[2:], ""
        slash = authority.find("/")
        if slash >= 0:
            authority, rest = authority[:slash], authority[slash:]
        at = authority.rfind("@")
        url.host = _parse_host(authority[at + 1 :])
        url.has_user = at >= 0
    url.path = _unescape(rest, "path")
    url.raw_path = "" if _escape_path(url.path) == rest else rest
    return url


def parse_request_uri(raw: str) -> GoURL:
    """``url.ParseRequestURI``; errors read ``parse "<raw>": <reason>``."""
    try:
        return _parse(raw, True)
    except URLError as err:
        raise URLError(f"parse {go_quote(raw)}: {err}") from None


def is_request_uri(raw: str) -> bool:
    """``url.ParseRequestURI`` succeeds (govalidator's ``IsRequestURI``, CEL's ``isURL``)."""
    try:
        parse_request_uri(raw)
    except URLError:
        return False
    return True


def parse(raw: str) -> GoURL:
    """``url.Parse`` (keeps the fragment apart)."""
    rest, _, fragment = raw.partition("#")
    try:
        url = _parse(rest, False)
    except URLError as err:
        raise URLError(f"parse {go_quote(rest)}: {err}") from None
    url.fragment = _unescape(fragment, "fragment") if fragment else ""
    return url


def split_host_port(host_port: str) -> tuple[str, str]:
    host, port = host_port, ""
    colon = host.rfind(":")
    if colon != -1 and _valid_optional_port(host[colon:]):
        host, port = host[:colon], host[colon + 1 :]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


_SUB_DELIMS = set("!$&'()*+,;=:@[]%")


def _valid_encoded(s: str) -> bool:
    return all(c in _SUB_DELIMS or (c.isascii() and c in _PATH_KEEP) for c in s)


def escaped_path(url: GoURL) -> str:
    if url.raw_path and _valid_encoded(url.raw_path):
        try:
            if _unescape(url.raw_path, "path") == url.path:
                return url.raw_path
        except URLError:
            pass
    if url.path == "*":
        return "*"
    return _escape_path(url.path)


def parse_query(raw_query: str) -> dict[str, list[str]]:
    """``url.ParseQuery`` ignoring malformed pairs (as ``URL.Query()`` does)."""
    values: dict[str, list[str]] = {}
    for pair in raw_query.split("&"):
        if not pair or ";" in pair:
            continue
        key, _, value = pair.partition("=")
        try:
            key, value = _unescape(key, "query"), _unescape(value, "query")
        except URLError:
            continue
        values.setdefault(key, []).append(value)
    return values
