"""What evaluating policies yields: denials, warnings, audit annotations, traces."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Denial:
    policy: str
    message: str
    reason: str = "Invalid"
    field_path: str | None = None
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
