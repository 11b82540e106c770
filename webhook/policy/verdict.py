"""What evaluating policies yields: denials, warnings, audit annotations, traces."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from webhook.policy.actions import DENY_ONLY


@dataclass(frozen=True)
class Denial:
    """A failed validation (or a rule that could not be evaluated under ``failurePolicy: Fail``):
    what the policy's validation actions then do (``webhook.policy.actions``) decides whether
    it denies."""

    policy: str
    message: str
    reason: str = "Invalid"
    field_path: str | None = None
    expression_index: int = 0  # the validation's index in spec.validations (0 for a rule error)
    rule: str = ""  # which of the policy's rules: "validations[2]" (CI formats name it "<policy>/<rule>")


@dataclass(frozen=True)
class Trace:
    """One rule as ``--explain`` shows it."""

    policy: str
    rule: str  # e.g. "validations[2]", "lookups.cls", "matchConditions.is-catalog"
    expression: str
    values: dict[str, Any]
    verdict: str  # "true", "false", "error: ...", a value, "skipped"


@dataclass
class Verdict:
    """One policy's answer to one request."""

    policy: str
    denials: list[Denial] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    warning_rules: dict[str, str] = field(default_factory=dict)  # a warning -> the rule that gave it: "warnings[0]"
    audit_annotations: dict[str, str] = field(default_factory=dict)
    object: dict[str, Any] | None = None  # the object after this policy's mutations
    traces: list[Trace] = field(default_factory=list)

    # Set by ``webhook.policy.actions.enforce`` when the policy failed (class attributes, not
    # fields: a verdict is made per policy per review, and most never fail):
    # the validation actions its failures met (the policy's own, or an operator's override for
    # the namespace): Deny keeps ``denials``; Warn and Audit make warnings and audit records
    validation_actions = DENY_ONLY
    # its failures under Audit: VAP's ValidationFailureValue records (``actions.failure_record``)
    audit_failures: ClassVar[list[dict[str, Any]] | tuple] = ()
    # Set by ``webhook.policy.unknown.leave_unchecked`` when rules were left out because what they
    # read is unknown to the cluster view: (what, unit) per unknown answer, for the summary note
    unchecked: ClassVar[tuple[tuple[str, str], ...]] = ()
    # the lookups' answers, set by the per-expression path (the batch path's are in the review's scope)
    lookups: ClassVar[dict[str, Any] | None] = None
