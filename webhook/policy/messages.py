"""What a policy says: a failed rule's message (its messageExpression's value, else its message,
else the failed expression), a denial with its field path, the error of a rule that could not
be evaluated, and the values ``--explain`` traces."""

from __future__ import annotations

from typing import Any

from webhook.policy.verdict import Denial


class RuleError(Exception):
    """An expression that could not be evaluated or applied: the policy's failure policy
    decides (``Fail``: a denial, else a warning)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def expression_error(policy: str, rule: str, source: str, error: Exception) -> RuleError:
    return RuleError(f"policy {policy}: {rule}: expression {' '.join(source.split())!r} resulted in error: {error}")


def patch_error(policy: str, where: str, patch: Any, error: Exception) -> RuleError:
    return RuleError(f"policy {policy}: {where}: cannot apply {patch!r}: {error}")


def selector_error(policy: str, lookup: str, error: Exception) -> RuleError:
    return RuleError(f"policy {policy}: lookups.{lookup}.selector: {error}")


def not_applied(policy: str, error: RuleError) -> str:
    """The warning of a policy that fails open (``failurePolicy: Ignore``)."""
    return f"policy {policy} not applied: {error.message}"


def failed_expression(source: str) -> str:
    """A failed rule's message when it has none of its own."""
    return f"failed expression: {source.strip()}"


def message_text(rule: Any, value: Any, default: str) -> str:
    """A failed rule's message from its messageExpression's value: the value when it is
    text that is not blank, else the rule's message (as the apiserver falls back)."""
    return value if is_message(value) else rule.message or default


def is_message(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def denial(policy: str, rule: Any, message: str, index: int = 0) -> Denial:
    """A failed validation's denial, its message prefixed by its fieldPath; ``index``: the
    validation's place in ``spec.validations`` (the rule is named ``validations[index]``)."""
    if rule.fieldPath and not message.startswith(rule.fieldPath):
        message = f"{rule.fieldPath}: {message}"
    return Denial(policy, message, rule.reason, rule.fieldPath, index, f"validations[{index}]")


# the apiserver files a webhook's audit annotation under "<webhook name>/<key>" and drops a key
# that is not a qualified name (k8s.io/apiserver/pkg/admission/attributes.go, checkKeyFormat):
# the part after the "/" is at most 63 characters, without another "/"
MAX_AUDIT_KEY = 63


def audit_annotation_key(policy: str, key: str) -> str:
    """The key of a policy's audit annotation in the webhook's answer: ``<policy>.<key>``.
    (VAP's own keys are ``<policy>/<key>``; behind a webhook the "/" is the webhook's.)"""
    return f"{policy}.{key}"


def audit_key_problems(policy: str, keys: list[str]) -> list[tuple[int, str]]:
    """``(index, problem)`` of each audit annotation key the apiserver would drop."""
    problems = []
    for i, key in enumerate(keys):
        full = audit_annotation_key(policy, key)
        if len(full) > MAX_AUDIT_KEY:
            problems.append((i, f"Invalid value: {full!r}: the policy's name and the key, joined as "
                                f"<policy>.<key>, must be no more than {MAX_AUDIT_KEY} characters (the "
                                f"apiserver drops a longer audit annotation key)"))
    return problems


def annotation_text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def traced_value(value: Any) -> str:
    """An expression's value as ``--explain`` prints it."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."
