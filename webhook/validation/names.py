"""Kubernetes' name and label checks, with apimachinery's messages byte for byte.

``k8s.io/apimachinery/pkg/api/validate/content`` (``IsDNS1123Label``, ``IsDNS1123Subdomain``,
``IsDNS1035Label``, ``IsLabelKey`` a.k.a. ``IsQualifiedName``, ``IsLabelValue``) and the
``NameIs*`` functions of ``pkg/api/validation`` (a ``generateName`` prefix may end in '-').
Each check returns the error messages, ``[]`` when the value is valid.
"""

from __future__ import annotations

import re

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL = re.compile(f"^{DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN = re.compile(f"^{DNS1123_SUBDOMAIN_FMT}$")
_DNS1035_LABEL = re.compile(f"^{DNS1035_LABEL_FMT}$")
_QUALIFIED_NAME = re.compile(f"^{QUALIFIED_NAME_FMT}$")
_LABEL_VALUE = re.compile(f"^{LABEL_VALUE_FMT}$")

_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                      "start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                          "'.', and must start and end with an alphanumeric character")
_DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                      "alphabetic character, and end with an alphanumeric character")
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                       "alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")

EMPTY_ERROR = "must be non-empty"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``RegexError``: Go's loop leaves a doubled space before each " or"."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def dns1123_label(value: str) -> list[str]:
    errs = [max_len_error(63)] if len(value) > 63 else []
    if not _DNS1123_LABEL.match(value):
        if _DNS1123_SUBDOMAIN.match(value):  # a valid subdomain, so (length checked above) it is the dots
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    errs = [max_len_error(253)] if len(value) > 253 else []
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def dns1035_label(value: str) -> list[str]:
    errs = [max_len_error(63)] if len(value) > 63 else []
    if not _DNS1035_LABEL.match(value):
        errs.append(regex_error(_DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def _content_max_len_error(length: int) -> str:
    """``MaxLenError`` of apimachinery's ``api/validate/content`` (bytes, where
    ``util/validation``'s says characters)."""
    return f"must be no more than {length} bytes"


def qualified_name(value: str) -> list[str]:
    """``IsQualifiedName``: since apimachinery v0.36 ``content.IsLabelKey``, with that package's
    wording ("a valid label key", lengths in bytes; its ``IsDNS1123Subdomain`` for the prefix)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + EMPTY_ERROR)
        else:
            if len(prefix) > 253:
                errs.append("prefix part " + _content_max_len_error(253))
            if not _DNS1123_SUBDOMAIN.match(prefix):
                errs.append("prefix part " + regex_error(_DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    else:
        return [("a valid label key " + regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                     "123-abc")
                 + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")]
    if not name:
        errs.append("name part " + EMPTY_ERROR)
    elif len(name) > 63:
        errs.append("name part " + _content_max_len_error(63))
    if not _QUALIFIED_NAME.match(name):
        errs.append("name part " + regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name",
                                               "123-abc"))
    return errs


def label_value(value: str) -> list[str]:
    """``IsValidLabelValue``: since apimachinery v0.36 ``content.IsLabelValue`` (length in bytes)."""
    errs = [_content_max_len_error(63)] if len(value) > 63 else []
    if not _LABEL_VALUE.match(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def mask_trailing_dash(name: str) -> str:
    """``maskTrailingDash``: a trailing dash makes the last two characters one "a", as Go does it."""
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    return dns1123_label(mask_trailing_dash(name) if prefix else name)


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return dns1123_subdomain(mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool) -> list[str]:
    return dns1035_label(mask_trailing_dash(name) if prefix else name)


def path_segment_name(name: str, prefix: bool) -> list[str]:
    """``path.ValidatePathSegmentName``."""
    errs = []
    if not prefix and name in (".", ".."):
        errs.append(f"may not be '{name}'")
    for illegal in ("/", "%"):
        if illegal in name:
            errs.append(f"may not contain '{illegal}'")
    return errs
