"""Named string formats (``library/format.go``): ``format.<name>()``, ``format.named()``, ``validate()``.

The names are apimachinery's checks and the others kube-openapi's strfmt registry, as Kubernetes
binds them (``webhook.validation``, shared with the schema engine).
"""

from __future__ import annotations

from typing import Callable

from webhook.gocompat import neturl
from webhook.cel.library.base import NONE, OpaqueValue, OptionalValue, Overload
from webhook.validation import names
from webhook.validation.strfmt import FORMAT_CHECKERS


def _uri(value: str) -> list[str]:
    try:
        neturl.parse_request_uri(value)
    except neturl.URLError as err:
        return [str(err)]
    return []


def _strfmt(name: str, message: str) -> Callable[[str], list[str]]:
    """``strfmt.Default.Validates(name, s)``: the schema engine's checker, one fixed message."""
    checker = FORMAT_CHECKERS[name]
    return lambda s: [] if checker(s) else [message]


# format name -> validation returning the error messages
VALIDATORS = {
    "dns1123Label": lambda s: names.name_is_dns_label(s, False),
    "dns1123Subdomain": lambda s: names.name_is_dns_subdomain(s, False),
    "dns1035Label": lambda s: names.name_is_dns1035_label(s, False),
    "qualifiedName": names.qualified_name,
    "dns1123LabelPrefix": lambda s: names.name_is_dns_label(s, True),
    "dns1123SubdomainPrefix": lambda s: names.name_is_dns_subdomain(s, True),
    "dns1035LabelPrefix": lambda s: names.name_is_dns1035_label(s, True),
    "labelValue": names.label_value,
    "uri": _uri,
    "uuid": _strfmt("uuid", "does not match the UUID format"),
    "byte": _strfmt("byte", "invalid base64"),
    "date": _strfmt("date", "invalid date"),
    "datetime": _strfmt("datetime", "invalid datetime"),
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
