"""Validation actions: what a policy's failed validation does, as ValidatingAdmissionPolicy's
``validationActions`` (a non-empty subset of ``Deny``, ``Warn``, ``Audit``; default
``[Deny]``; ``Deny`` with ``Warn`` is invalid).

``Deny`` refuses the request; ``Warn`` admits it with the failure as an admission warning,
in VAP's words; ``Audit`` admits it and records the failure in the response's audit
annotations under ``validation_failure`` (VAP's ``validation.policy.admission.k8s.io/
validation_failure`` value: a JSON list of ``{message, policy, binding, expressionIndex,
validationActions}``; the apiserver prefixes a webhook's keys with the webhook's name).
The checks here are VAP's (``validateValidationActions``), in its words.
"""

from __future__ import annotations

from typing import Any, Iterable

from webhook.gocompat.fmt import go_json, go_struct_json

DENY, WARN, AUDIT = "Deny", "Warn", "Audit"
ACTIONS = (DENY, WARN, AUDIT)  # the order actions are written in (Deny, Warn, Audit)
DENY_ONLY: frozenset[str] = frozenset({DENY})

# the key of the failures in the response's auditAnnotations: the apiserver records it as
# "<webhook name>/validation_failure" (VAP: "validation.policy.admission.k8s.io/validation_failure")
VALIDATION_FAILURE_KEY = "validation_failure"

_BOTH = ("must not contain both Deny and Warn (repeating the same validation failure information in the "
         "API response and headers serves no purpose)")


def action_problems(actions: Any) -> list[tuple[int | None, str]]:
    """What is wrong with a list of validation actions, as VAP's API validation says it:
    ``(index or None for the whole list, field.Error body)``; empty when it is valid."""
    if not isinstance(actions, list):
        return [(None, f"Invalid value: {go_json(actions)}: must be a list of Deny, Warn, Audit")]
    problems: list[tuple[int | None, str]] = []
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action not in ACTIONS:
            problems.append((i, f"Unsupported value: {go_json(action)}: supported values: "
                                "\"Audit\", \"Deny\", \"Warn\""))
        elif action in seen:
            problems.append((i, f"Duplicate value: {go_json(action)}"))
        if isinstance(action, str):
            seen.add(action)
    if DENY in seen and WARN in seen:
        problems.append((None, f"Invalid value: {go_json(actions)}: {_BOTH}"))
    if not actions:
        problems.append((None, "Required value: at least one validation action is required"))
    return problems


def ordered(actions: Iterable[str]) -> list[str]:
    """Actions in their written order (Deny, Warn, Audit): how reports and annotations list them."""
    chosen = set(actions)
    return [a for a in ACTIONS if a in chosen]


def warning_text(policy: str, message: str) -> str:
    """A failure under ``Warn``: VAP's warning ("Validation failed for ValidatingAdmissionPolicy
    '<policy>' with binding '<binding>': <message>"), for a policy without a binding."""
    return f"Validation failed for AdmissionPolicy '{policy}': {message}"


def failure_record(policy: str, binding: str, expression_index: int, message: str,
                   actions: Iterable[str]) -> dict[str, Any]:
    """One failure under ``Audit``, as VAP's ``ValidationFailureValue`` (its JSON field order)."""
    return {"message": message, "policy": policy, "binding": binding, "expressionIndex": expression_index,
            "validationActions": ordered(actions)}


def failure_annotation(records: list[dict[str, Any]]) -> str:
    """The ``validation_failure`` annotation's value: the records as a JSON list, as Go's
    ``encoding/json`` writes VAP's (fields in its order, HTML characters escaped)."""
    return "[" + ",".join(go_struct_json(r) for r in records) + "]"
