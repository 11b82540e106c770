"""URLs (``library/urls.go``): ``url()``, ``isURL()`` and the ``kubernetes.URL`` getters."""

from __future__ import annotations

from functools import lru_cache

from webhook.gocompat import neturl
from webhook.cel.library.base import LibraryError, OpaqueValue, Overload


class URL(OpaqueValue):
    cel_type = "kubernetes.URL"
    __slots__ = ("raw", "parsed")

    def __init__(self, raw: str, parsed: neturl.GoURL) -> None:
        self.raw = raw
        self.parsed = parsed

    @property
    def key(self) -> str:
        return self.raw

    @classmethod
    def from_key(cls, key: str) -> URL:
        return parse_url(key)


@lru_cache(maxsize=4096)
def parse_url(text: str) -> URL:
    try:
        neturl.parse_request_uri(text)
        parsed = neturl.parse(text)
    except neturl.URLError as err:
        raise LibraryError(f"URL parse error during conversion from string: {err}") from None
    return URL(text, parsed)


def get_scheme(url: URL) -> str:
    return url.parsed.scheme


def get_host(url: URL) -> str:
    return url.parsed.host


def get_hostname(url: URL) -> str:
    return neturl.split_host_port(url.parsed.host)[0]


def get_port(url: URL) -> str:
    return neturl.split_host_port(url.parsed.host)[1]


def get_escaped_path(url: URL) -> str:
    return neturl.escaped_path(url.parsed)


def get_query(url: URL) -> dict[str, list[str]]:
    return neturl.parse_query(url.parsed.raw_query)


U = URL.cel_type
TYPES = (URL,)
OVERLOADS = (
    Overload("url", "string_to_url", ("string",), U, parse_url),
    Overload("isURL", "is_url_string", ("string",), "bool", neturl.is_request_uri),
    Overload("getScheme", "url_get_scheme", (U,), "string", get_scheme, member=True),
    Overload("getHost", "url_get_host", (U,), "string", get_host, member=True),
    Overload("getHostname", "url_get_hostname", (U,), "string", get_hostname, member=True),
    Overload("getPort", "url_get_port", (U,), "string", get_port, member=True),
    Overload("getEscapedPath", "url_get_escaped_path", (U,), "string", get_escaped_path, member=True),
    Overload("getQuery", "url_get_query", (U,), "map(string, list(string))", get_query, member=True),
)
