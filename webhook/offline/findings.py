"""One judged document's problems and warnings as the CI formats name them (``ci.Note``): each
with the rule that said it.

A policy's denial or warning is named by its rule, ``<policy>/validations[2]``,
``<policy>/warnings[0]`` (the admission chain records which rule said which text). The
apiserver's own problems are ``kube-apiserver/<cause reason>`` (``FieldValueInvalid``,
``FieldValueRequired``, ``FieldValueTooLong``, ...), a refusal without causes
``kube-apiserver/<status reason>`` (``RequestEntityTooLarge``), an unknown field
``kube-apiserver/unknown-field`` (refused under Strict, a warning under Warn) and any other
warning of the apiserver's ``kube-apiserver/warning``. The apiserver's closing cause "some
validation rules were not checked because the object was invalid" is said with the problems it
follows, not as one of its own. A document skipped as no schema serves its kind, which is a near
miss of a served one, warns as ``near-miss``.
"""

from __future__ import annotations

from typing import Any

from webhook.admission.chain import is_attribution
from webhook.offline.ci import Note
from webhook.schema.registry import MARKER

UNKNOWN_FIELD = "kube-apiserver/unknown-field"
NEAR_MISS = "near-miss"  # a skipped document whose apiVersion or kind is a near miss of a known one
# the apiserver's note that its CEL rules did not run, the object being invalid: a word on the
# other problems, not a problem of its own
_RULES_NOT_CHECKED = MARKER.cause()


def problems(status: dict[str, Any] | None, rules: dict[str, str]) -> tuple[Note, ...]:
    """A refusal's problems one by one: its causes (not the one naming the webhook), else its message."""
    if not status:
        return ()
    causes = [c for c in (status.get("details") or {}).get("causes") or () if isinstance(c, dict)
              and not is_attribution(c)]
    if len(causes) > 1:
        causes = [c for c in causes if c != _RULES_NOT_CHECKED]
    message = str(status.get("message", ""))
    if not causes:
        rule = UNKNOWN_FIELD if "strict decoding error: " in message else \
            f"kube-apiserver/{status.get('reason') or 'Failure'}"
        return (Note(message, rule),)
    out = []
    for cause in causes:
        text = str(cause.get("message", ""))
        where = cause.get("field")
        full = f"{where}: {text}" if where else text
        rule = rules.get(full) or rules.get(text) or f"kube-apiserver/{cause.get('reason') or 'Invalid'}"
        out.append(Note(full, rule))
    return tuple(out)


def warnings(texts: list[str], rules: dict[str, str]) -> tuple[Note, ...]:
    """Each warning with the rule that said it."""
    return tuple(Note(text, rules.get(text) or (UNKNOWN_FIELD if text.startswith('unknown field "')
                                                 else "kube-apiserver/warning")) for text in texts)
