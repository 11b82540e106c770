"""``field.Error`` and ``metav1.Status``: the apiserver's error values and their exact text."""

from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from typing import Any

from webhook.gocompat.fmt import go_float, go_json, go_quote

# error type -> (StatusCause reason, text)
REQUIRED = ("FieldValueRequired", "Required value")
NOT_SUPPORTED = ("FieldValueNotSupported", "Unsupported value")
INVALID = ("FieldValueInvalid", "Invalid value")
TYPE_INVALID = ("FieldValueTypeInvalid", "Invalid value")
TOO_LONG = ("FieldValueTooLong", "Too long")
TOO_MANY = ("FieldValueTooMany", "Too many")
DUPLICATE = ("FieldValueDuplicate", "Duplicate value")
FORBIDDEN = ("FieldValueForbidden", "Forbidden")
INTERNAL = ("InternalError", "Internal error")

# kinds whose body never shows the bad value
_VALUELESS = {REQUIRED, FORBIDDEN, TOO_LONG, INTERNAL}
# errors that stop CEL rules from running (the "not checked" marker), see hasBlockingErr
BLOCKING = {NOT_SUPPORTED, REQUIRED, TOO_LONG, TOO_MANY, TYPE_INVALID}


class _Omit:
    """``field.OmitValueType``: the error prints no value."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT = _Omit()


def render_value(value: Any) -> str:
    """How ``field.Error`` prints a bad value: simple types with %v / %q, the rest as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    return go_json(value)


@dataclass(frozen=True, slots=True)
class FieldError:
    """One ``field.Error``; ``str()`` is the apiserver's ``<field>: <body>``."""

    kind: tuple[str, str]
    field: str  # "<nil>" for the empty path
    value: Any = OMIT
    detail: str = ""

    @property
    def reason(self) -> str:
        return self.kind[0]

    @property
    def body(self) -> str:
        text = self.kind[1]
        if self.kind not in _VALUELESS and self.value is not OMIT:
            text = f"{text}: {render_value(self.value)}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    @property
    def blocking(self) -> bool:
        return self.kind in BLOCKING

    def __str__(self) -> str:
        return f"{self.field}: {self.body}"

    def cause(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.body, "field": self.field}


def field_path(path: str | None) -> str:
    return path if path else "<nil>"


def required(path: str | None, detail: str = "") -> FieldError:
    return FieldError(REQUIRED, field_path(path), OMIT, detail)


def invalid(path: str | None, value: Any, detail: str) -> FieldError:
    return FieldError(INVALID, field_path(path), value, detail)


def type_invalid(path: str | None, value: Any, detail: str) -> FieldError:
    return FieldError(TYPE_INVALID, field_path(path), value, detail)


def not_supported(path: str | None, value: Any, valid: list[str]) -> FieldError:
    detail = "supported values: " + ", ".join(go_quote(v) for v in valid) if valid else ""
    return FieldError(NOT_SUPPORTED, field_path(path), value, detail)


def too_long(path: str | None, max_length: int) -> FieldError:
    detail = f"may not be more than {max_length} bytes" if max_length >= 0 else "value is too long"
    return FieldError(TOO_LONG, field_path(path), OMIT, detail)


def too_many(path: str | None, actual: int, maximum: int) -> FieldError:
    detail = f"must have at most {maximum} items" if maximum >= 0 else "has too many items"
    return FieldError(TOO_MANY, field_path(path), actual if actual >= 0 else OMIT, detail)


def duplicate(path: str | None, value: Any = OMIT) -> FieldError:
    return FieldError(DUPLICATE, field_path(path), value, "")


def forbidden(path: str | None, detail: str) -> FieldError:
    return FieldError(FORBIDDEN, field_path(path), OMIT, detail)


def internal(path: str | None, detail: str) -> FieldError:
    return FieldError(INTERNAL, field_path(path), OMIT, detail)


def aggregate_message(errors: list[FieldError]) -> str:
    """``ErrorList.ToAggregate().Error()``: one bare, several ``[a, b]``, duplicates dropped."""
    seen: dict[str, None] = {}
    for err in errors:
        seen.setdefault(str(err), None)
    texts = list(seen)
    if len(texts) == 1:
        return texts[0]
    return "[" + ", ".join(texts) + "]"


def invalid_status(kind: str, group: str, name: str, errors: list[FieldError]) -> dict[str, Any]:
    """``apierrors.NewInvalid``: HTTP 422, reason Invalid, one cause per error."""
    qualified = f"{kind}.{group}" if group else kind
    message = f"{qualified} {go_quote(name)} is invalid"
    if errors:
        message += ": " + aggregate_message(errors)
    details: dict[str, Any] = {"name": name, "group": group, "kind": kind,
                               "causes": [err.cause() for err in errors]}
    details = {k: v for k, v in details.items() if v}  # metav1.StatusDetails fields are omitempty
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "Invalid", "details": details, "code": 422}


def bad_request_status(message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "BadRequest", "code": 400}


@dataclass(slots=True)
class Outcome:
    """The apiserver's answer to one write."""

    allowed: bool
    code: int
    status: dict[str, Any] | None
    warnings: list[str] = dc_field(default_factory=list)
    object: dict[str, Any] | None = None
    errors: list[FieldError] = dc_field(default_factory=list)
