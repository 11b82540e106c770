"""What a client sent, decoded: an AdmissionReview's version and request, or a
:class:`BadReview` saying what is wrong (answered as a 4xx ``metav1.Status``); and the
apiserver's ``?timeout=``."""

from __future__ import annotations

import functools
import urllib.parse

import orjson
from pydantic import ValidationError

from webhook.admission.review import SUPPORTED_VERSIONS, AdmissionRequest
from webhook.gocompat.time import parse_go_duration


class BadReview(Exception):
    """A request that is not a well-formed review: the HTTP code, reason and message of its answer."""

    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def decode_review(body: bytes) -> tuple[str, AdmissionRequest]:
    """The apiVersion asked and the request; raises :class:`BadReview` with a clear message."""
    if not body:
        raise BadReview(400, "BadRequest", "empty body: expected an AdmissionReview")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadReview(400, "BadRequest", f"malformed JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadReview(400, "BadRequest", f"expected an AdmissionReview object, got a JSON {type(data).__name__}")
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if kind != "AdmissionReview":
        raise BadReview(400, "BadRequest", f"expected kind AdmissionReview, got {_given(kind, 'no kind')}")
    if api_version not in SUPPORTED_VERSIONS:
        raise BadReview(
            400, "BadRequest",
            f"unsupported apiVersion {_given(api_version, '(none given)')}: expected one of "
            f"{', '.join(SUPPORTED_VERSIONS)}",
        )
    request = data.get("request")
    if not isinstance(request, dict):
        raise BadReview(400, "BadRequest", "AdmissionReview has no request")
    if not request.get("uid"):
        raise BadReview(400, "BadRequest", "AdmissionReview request has no uid")
    try:  # the envelope is checked above: only the request goes through the model
        admission = AdmissionRequest.model_validate(request)
    except ValidationError as exc:
        raise BadReview(400, "BadRequest", f"invalid AdmissionReview: {summarize(exc, 'request')}") from None
    if admission.object is None and admission.operation in _WRITES:
        raise BadReview(400, "BadRequest", f"invalid AdmissionReview: a {admission.operation} request has no "
                                           f"request.object (the apiserver always sends the object written)")
    return api_version, admission


def _given(value: object, absent: str) -> str:
    """A field of the envelope as the client sent it: its JSON (a string quoted), or ``absent``."""
    return absent if value is None else orjson.dumps(value).decode()


# The operations whose review always carries ``request.object``: the object written. DELETE
# carries the object deleted as ``oldObject`` (``object`` is null), CONNECT the connect options
# (``PodExecOptions``, ...) as ``object``, or nothing; the chain answers both.
_WRITES = frozenset(("CREATE", "UPDATE"))


def summarize(exc: ValidationError, within: str = "") -> str:
    """Pydantic's errors as one line: ``where: what`` for the first few."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False)[:5]:
        where = ".".join(str(p) for p in (within, *error["loc"]) if p != "")
        parts.append(f"{where}: {error['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


@functools.lru_cache(maxsize=64)  # the apiserver sends the same few query strings
def query_timeout(query: str) -> float | None:
    """``timeout_seconds`` of the first ``timeout=`` in a raw query string."""
    return next((timeout_seconds(value) for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True)
                 if name == "timeout"), None)


@functools.lru_cache(maxsize=64)
def timeout_seconds(text: str) -> float | None:
    """The apiserver's ``?timeout=`` (a Go duration: ``10s``, ``1m30s``, ``500ms``) in
    seconds; None when absent, not a duration, or not positive."""
    nanoseconds = parse_go_duration(text)
    return nanoseconds / 1e9 if nanoseconds is not None and nanoseconds > 0 else None
