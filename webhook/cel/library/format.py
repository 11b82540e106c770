"""Named string formats (``library/format.go``): ``format.<name>()``, ``format.named()``, ``validate()``.

Messages are apimachinery's validation messages, byte for byte.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import re

from webhook.cel.library import goneturl
from webhook.cel.library.base import NONE, LibraryError, OpaqueValue, OptionalValue, Overload


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + "(\\." + _LABEL_FMT + ")*"
_DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QNAME_FMT + ")?"
_LABEL_RE = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")
_DNS1035_RE = re.compile(f"^{_DNS1035_FMT}$")
_QNAME_RE = re.compile(f"^{_QNAME_FMT}$")
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_QNAME_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
_UUID_RE = re.compile(r"(?i)(^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$)|(^[0-9a-f]{32}$)")
_TIME_RE = re.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
_FULL_DATE_RE = re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})$")


def is_dns1123_label(value: str) -> list[str]:
    errs = [_max_len(63)] if len(value) > 63 else []
    if not _LABEL_RE.match(value):
        if _SUBDOMAIN_RE.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(
                _regex_error(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                    "and must start and end with an alphanumeric character",
                    _LABEL_FMT,
                    "my-name",
                    "123-abc",
                )
            )
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = [_max_len(253)] if len(value) > 253 else []
    if not _SUBDOMAIN_RE.match(value):
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character",
                _SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = [_max_len(63)] if len(value) > 63 else []
    if not _DNS1035_RE.match(value):
        errs.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character",
                _DNS1035_FMT,
                "my-name",
                "abc-123",
            )
        )
    return errs


def is_qualified_name(value: str) -> list[str]:
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + msg for msg in is_dns1123_subdomain(prefix)]
    else:
        return [
            "a qualified name "
            + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + _max_len(63))
    if not _QNAME_RE.match(name):
        errs.append("name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(value: str) -> list[str]:
    errs = [_max_len(63)] if len(value) > 63 else []
    if not _LABEL_VALUE_RE.match(value):
        errs.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character",
                _LABEL_VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs


def _mask_trailing_dash(name: str) -> str:
    """apimachinery's quirk: a trailing dash makes the last two characters "a"."""
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def _is_date(value: str) -> bool:
    match = _FULL_DATE_RE.match(value)
    if not match:
        return False
    try:
        datetime.date(*map(int, match.groups()))
    except ValueError:
        return False
    return True


def _is_datetime(value: str) -> bool:
    if len(value) < 4:
        return False
    parts = value.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    match = _TIME_RE.match(parts[1])
    if not match:
        return False
    return match.group(1) <= "23" and match.group(2) <= "59" and match.group(3) <= "59"


def _is_base64(value: str) -> bool:
    try:
        base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _uri(value: str) -> list[str]:
    try:
        goneturl.parse_request_uri(value)
    except LibraryError as err:
        return [str(err)]
    return []


def _check(ok: bool, message: str) -> list[str]:
    return [] if ok else [message]


# format name -> validation returning the error messages
VALIDATORS = {
    "dns1123Label": is_dns1123_label,
    "dns1123Subdomain": is_dns1123_subdomain,
    "dns1035Label": is_dns1035_label,
    "qualifiedName": is_qualified_name,
    "dns1123LabelPrefix": lambda s: is_dns1123_label(_mask_trailing_dash(s)),
    "dns1123SubdomainPrefix": lambda s: is_dns1123_subdomain(_mask_trailing_dash(s)),
    "dns1035LabelPrefix": lambda s: is_dns1035_label(_mask_trailing_dash(s)),
    "labelValue": is_label_value,
    "uri": _uri,
    "uuid": lambda s: _check(bool(_UUID_RE.match(s)), "does not match the UUID format"),
    "byte": lambda s: _check(_is_base64(s), "invalid base64"),
    "date": lambda s: _check(_is_date(s), "invalid date"),
    "datetime": lambda s: _check(_is_datetime(s), "invalid datetime"),
}


class NamedFormat(OpaqueValue):
    cel_type = "kubernetes.NamedFormat"
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def key(self) -> str:
        return self.name

    @classmethod
    def from_key(cls, key: str) -> NamedFormat:
        return cls(key)


def named(name: str) -> OptionalValue:
    return OptionalValue.of(NamedFormat(name)) if name in VALIDATORS else NONE


def validate(fmt: NamedFormat, value: str) -> OptionalValue:
    errors = VALIDATORS[fmt.name](value)
    return OptionalValue.of(errors) if errors else NONE


def _constructor(name: str) -> Overload:
    function = f"format.{name}"
    return Overload(function, function, (), NamedFormat.cel_type, lambda: NamedFormat(name))


F = NamedFormat.cel_type
TYPES = (NamedFormat,)
OVERLOADS = (
    Overload("format.named", "format-named", ("string",), f"optional_type({F})", named),
    Overload("validate", "format-validate", (F, "string"), "optional_type(list(string))", validate, member=True),
    *(_constructor(name) for name in VALIDATORS),
)
