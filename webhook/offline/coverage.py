"""Rule coverage of policy suites: which validations, warnings, mutations and audit annotations
of which policies the cases exercised, and which they never hit.

Read from the evaluation traces (``--explain``'s record of every rule evaluated), so the
evaluator needs no counters of its own. A rule is *hit* when it acted:

- a validation or warning when its expression was false (it denied / warned);
- a mutation when it yielded a non-empty patch;
- an audit annotation when it yielded a value.

Validations also count the cases they let pass, to show both sides were tried.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from webhook.policy import Trace

_EMPTY_PATCHES = ("[]", "{}", "None", "null")  # a mutation's trace verdict is its value's repr


@dataclass
class RuleCoverage:
    policy: str
    file: str
    rule: str  # "validations[2]", "mutations[0]", "auditAnnotations.team", or a built-in policy's rule
    label: str  # what the rule is about, for humans: its fieldPath, message or patch type
    hits: int = 0
    passes: int = 0
    errors: int = 0

    @property
    def hit(self) -> bool:
        return self.hits > 0

    def as_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "file": self.file, "rule": self.rule, "label": self.label,
                "hits": self.hits, "passes": self.passes, "errors": self.errors, "hit": self.hit}


def policy_rules(policy: Any) -> list[tuple[str, str]]:
    """(rule, label) of every rule a policy has. Python policies list theirs in ``coverage_rules``."""
    definition = getattr(policy, "definition", None)
    if definition is None:
        return [(rule, "built-in") for rule in getattr(policy, "coverage_rules", ())]
    spec = definition.spec
    rules = [(f"mutations[{i}]", m.patchType) for i, m in enumerate(spec.mutations)]
    rules += [(f"validations[{i}]", _validation_label(v)) for i, v in enumerate(spec.validations)]
    rules += [(f"warnings[{i}]", _short(w.message or w.expression)) for i, w in enumerate(spec.warnings)]
    rules += [(f"auditAnnotations.{a.key}", a.key) for a in spec.auditAnnotations]
    return rules


def _validation_label(validation: Any) -> str:
    label = validation.fieldPath or _short(validation.message or validation.expression)
    return label if validation.reason == "Invalid" else f"{label} ({validation.reason})"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


class Coverage:
    """Rules of the policies the suites loaded, and how often each was hit."""

    def __init__(self) -> None:
        self.rules: dict[tuple[str, str], RuleCoverage] = {}

    def add_policies(self, policies: Iterable[Any]) -> None:
        for policy in policies:
            for rule, label in policy_rules(policy):
                self.rules.setdefault((policy.name, rule), RuleCoverage(policy.name, str(policy.file), rule, label))

    def record(self, traces: Iterable[Trace]) -> None:
        for trace in traces:
            entry = self.rules.get((trace.policy, trace.rule))
            if entry is None:
                continue
            verdict = trace.verdict
            if verdict.startswith("error:"):
                entry.errors += 1
            elif trace.rule.startswith("mutations["):
                if verdict in _EMPTY_PATCHES:
                    entry.passes += 1
                else:
                    entry.hits += 1
            elif trace.rule.startswith("auditAnnotations."):
                if verdict in ("None", "null"):
                    entry.passes += 1
                else:
                    entry.hits += 1
            elif verdict == "false":
                entry.hits += 1
            elif verdict == "true":
                entry.passes += 1

    @property
    def missed(self) -> list[RuleCoverage]:
        return [r for r in self.rules.values() if not r.hit]

    @property
    def percent(self) -> float:
        """The share of rules hit (100 when there are none to hit)."""
        total = len(self.rules)
        return 100.0 * (total - len(self.missed)) / total if total else 100.0

    def as_dict(self) -> dict[str, Any]:
        total = len(self.rules)
        return {"rules": total, "hit": total - len(self.missed), "entries": [r.as_dict() for r in self.rules.values()]}

    def render(self) -> str:
        """The report: per policy, each rule with its counts; the rules never hit marked."""
        total, missed = len(self.rules), self.missed
        if not total:
            return "rule coverage: no policy rules (no policy suite ran)"
        percent = 100.0 * (total - len(missed)) / total if total else 100.0
        lines = [f"rule coverage: {total - len(missed)}/{total} rules hit ({percent:.0f}%)"]
        by_policy: dict[tuple[str, str], list[RuleCoverage]] = {}
        for entry in self.rules.values():
            by_policy.setdefault((entry.policy, entry.file), []).append(entry)
        for (policy, file), entries in by_policy.items():
            lines.append(f"  {policy} ({file})")
            for e in entries:
                mark = "  " if e.hit else "✗ "
                counts = f"hit {e.hits}" + (f", passed {e.passes}" if e.rule.startswith("validations[") else "")
                if e.errors:
                    counts += f", errors {e.errors}"
                lines.append(f"    {mark}{e.rule:<28} {counts:<22} {e.label}")
        if missed:
            lines.append("never hit:")
            lines += [f"  {e.policy} {e.rule}: {e.label}" for e in missed]
        return "\n".join(lines)
