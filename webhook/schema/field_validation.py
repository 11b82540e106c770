"""Field validation: what kube-apiserver does with the fields of a write it does not know.

The request's ``fieldValidation`` directive (``?fieldValidation=``, in a review's
``request.options``) decides, for built-in and custom kinds alike
(``k8s.io/apiserver/pkg/endpoints/handlers/create.go`` and ``update.go``):

- ``Strict``: the write is refused, 400 BadRequest, every unknown field in one message
  (``transformDecodeError`` around ``runtime.strictDecodingError``)::

      Model in version "v1" cannot be handled as a Model: strict decoding error: unknown field "spec.bogus", unknown field "spec.x"

- ``Warn``: the write goes on, each unknown field one warning, ``unknown field "spec.bogus"``
  (``addStrictDecodingWarnings``); the default when the client sends none (``fieldValidation``
  in ``rest.go``). ``kubectl`` sends ``Strict`` (its ``--validate=strict`` default).
- ``Ignore``: the fields are dropped without a word.

A custom resource's unknown fields are the pruned paths (``schemaCoercingDecoder``: ObjectMeta's
first, then the pruning's, sorted, then embedded resources'); a built-in kind's are the strict
JSON decoder's (``sigs.k8s.io/json``: in the order of the body, at most 100). Paths are written
as both write them: ``spec.containers[0].bogus``, map keys as ``.key``.
"""

from __future__ import annotations

from typing import Any, Literal

FieldValidation = Literal["Strict", "Warn", "Ignore"]
DIRECTIVES: tuple[FieldValidation, ...] = ("Strict", "Warn", "Ignore")
SERVER_DEFAULT: FieldValidation = "Warn"  # a request that names none (rest.go's fieldValidation)

# sigs.k8s.io/json's decodeState.saveStrictError keeps at most this many
MAX_STRICT_ERRORS = 100


def directive(options: Any) -> FieldValidation:
    """The directive of a review's ``request.options`` (CreateOptions/UpdateOptions); the
    apiserver's default when it names none."""
    value = options.get("fieldValidation") if isinstance(options, dict) else None
    return value if value in DIRECTIVES else SERVER_DEFAULT


def unknown_field(path: str) -> str:
    """One unknown field as the apiserver words it (a warning, or a part of the error)."""
    return f'unknown field "{path}"'


class StrictDecodingError(ValueError):
    """A write refused under ``Strict``: the apiserver's 400 message."""


def strict_message(kind: str, version: str, paths: list[str]) -> str:
    """The 400's message under ``Strict``: ``transformDecodeError`` of the strict decoding error."""
    listed = ", ".join(unknown_field(p) for p in paths)
    return f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: {listed}'


def apply(directive_: FieldValidation, kind: str, version: str, paths: list[str]) -> list[str]:
    """The warnings for ``paths``, the unknown fields of one write, under ``directive_``; raises
    :class:`StrictDecodingError` under ``Strict`` when there are any."""
    if not paths or directive_ == "Ignore":
        return []
    if directive_ == "Strict":
        raise StrictDecodingError(strict_message(kind, version, paths))
    return [unknown_field(p) for p in paths]
