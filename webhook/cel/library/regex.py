"""Regular expressions (``library/regex.go``): ``find`` and ``findAll`` with RE2 semantics.

Patterns compile with RE2 (as Go's ``regexp`` accepts the same syntax); compile errors are
reported in Go's wording (``error parsing regexp: missing closing ): `(a`"``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

from webhook.cel.library.base import LibraryError, Overload
from webhook.gocompat.regexp import compile_error

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


class RegexError(LibraryError):
    """An invalid pattern, worded as Go's ``regexp.Compile`` error."""


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> re2._Regexp:
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as err:
        raise RegexError(compile_error(pattern, err)) from None


def _compile_at_runtime(pattern: str) -> re2._Regexp:
    try:
        return compile_pattern(pattern)
    except RegexError as err:
        raise LibraryError(f"Illegal regex: {str(err).removeprefix('error parsing regexp: ')}") from None


@lru_cache(maxsize=1024)
def _matcher(pattern: str) -> Any:
    """The pattern compiled only to tell whether it matches: without capture groups RE2 can
    answer from its DFA, and the C++ object's ``Match`` skips the Python wrapper's match
    objects (~4 µs a call here, against ~25 µs through ``search``)."""
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    return re2.compile(pattern, options=options)._regexp


def matches(text: str, pattern: str) -> bool:
    """CEL's ``matches``: an RE2 partial match, as cel-cpp's ``RE2::PartialMatch``; a pattern
    that does not compile is cel-go's error, Go's ``regexp`` text (``String.Match`` returns
    ``&Err{err}``: ``error parsing regexp: missing closing ): `(```)."""
    try:
        encoded = text.encode()
    except UnicodeEncodeError as err:
        raise LibraryError(str(err)) from None
    try:
        regexp = _matcher(pattern)
    except re2.error as err:
        raise LibraryError(compile_error(pattern, err)) from None
    return regexp.Match(re2._Anchor.UNANCHORED, encoded, 0, len(encoded))[0] != (-1, -1)


def find(text: str, pattern: str) -> str:
    match = _compile_at_runtime(pattern).search(text)
    return match.group(0) if match else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = []
    for match in _compile_at_runtime(pattern).finditer(text):
        found.append(match.group(0))
        if len(found) == limit:
            break
    return found


OVERLOADS = (
    Overload("find", "string_find_string", ("string", "string"), "string", find, member=True),
    Overload("findAll", "string_find_all_string", ("string", "string"), "list(string)", find_all, member=True),
    Overload("findAll", "string_find_all_string_int", ("string", "string", "int"), "list(string)", find_all, member=True),
)
