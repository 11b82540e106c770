"""What an audit says about one existing object: the object (``ResourceRef``), one
``AuditResult`` per policy that applies (or per failing rule), and what those add up to
(``Verdict``: denied, warned, audited), which ``infergate audit``'s exit status and impact
preview read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from webhook.apiversion import group_of

DENY = frozenset({"Deny"})
CRD_SCHEMA = "crd-schema"  # the policy name of the CRD's own schema and CEL rules
RESULTS = ("pass", "fail", "warn", "error")  # an OpenReports result (``skip`` is never written)


@dataclass(frozen=True)
class ResourceRef:
    """The object judged: its identity as stored (``uid`` empty when the input has none, as in a
    manifest rather than a dump)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    @classmethod
    def of(cls, obj: dict[str, Any]) -> "ResourceRef":
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        return cls(_text(obj.get("apiVersion")), _text(obj.get("kind")), _text(meta.get("namespace")),
                   _text(meta.get("name")), _text(meta.get("uid")))

    @property
    def group(self) -> str:
        return group_of(self.api_version)

    def as_dict(self) -> dict[str, str]:
        """``{apiVersion, kind, namespace, name}`` (``-o json``'s resource; the namespace left out
        for a cluster-scoped object)."""
        out = {"apiVersion": self.api_version, "kind": self.kind}
        if self.namespace:
            out["namespace"] = self.namespace
        out["name"] = self.name
        return out

    def label(self) -> str:
        """``Kind namespace/name`` as the table and the impact preview print it."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


@dataclass(frozen=True)
class AuditResult:
    """One finding: ``result`` is ``pass`` (the policy applies and every rule holds), ``fail`` (a
    validation does not hold; ``rule`` names it, e.g. ``validations[2]``), ``warn`` (a failure
    of a policy whose actions are Warn without Deny, or a rule of its ``warnings``), ``error``
    (the policy could not be evaluated; ``fail_closed`` when its ``failurePolicy`` is Fail, so
    that admission would deny). ``actions``: the validation actions in force."""

    policy: str
    rule: str
    result: str
    message: str = ""
    actions: frozenset[str] = DENY
    fail_closed: bool = False  # an ``error`` of a policy with ``failurePolicy: Fail``

    @property
    def denies(self) -> bool:
        """What the webhook would refuse the object for (``infergate audit`` exits 1): a failure
        under Deny, or an error of a fail-closed policy under Deny (admission denies both)."""
        if "Deny" not in self.actions:
            return False
        return self.result == "fail" or (self.result == "error" and self.fail_closed)

    @property
    def audited(self) -> bool:
        """A failure admission admits and records (actions with Audit, without Deny)."""
        return self.result in ("fail", "warn") and "Audit" in self.actions and "Deny" not in self.actions


@dataclass(frozen=True)
class ObjectAudit:
    """Every result for one object, in a stable order (``sort_key``)."""

    resource: ResourceRef
    results: tuple[AuditResult, ...]
    # what rules were left out for, the state not knowing it: (what, unit) each, once per rule
    # (``webhook.policy.unknown``; a live cluster knows every kind: always empty there)
    unchecked: tuple[tuple[str, str], ...] = ()

    @property
    def verdict(self) -> "Verdict":
        return Verdict.of(self.results)


_RANK = {"fail": 0, "error": 1, "warn": 2, "pass": 3}


def sort_key(result: AuditResult) -> tuple[Any, ...]:
    """Failures first (a report capped keeps them), then by policy, rule and message."""
    return _RANK.get(result.result, 4), result.policy, result.rule, result.message, sorted(result.actions)


def ordered(results: Iterable[AuditResult]) -> tuple[AuditResult, ...]:
    """Sorted and without repeats: the same object gives the same tuple every time."""
    return tuple(sorted(set(results), key=sort_key))


@dataclass(frozen=True)
class Verdict:
    """What an object's results add up to, as admission would act on them: denied (a Deny
    failure or a ``crd-schema`` failure), warned (a ``warn``), audited (a failure admitted and
    recorded under the Audit action).
    The impact preview compares these between two policy sets."""

    denied: bool
    warned: bool
    audited: bool
    error: bool = False

    @classmethod
    def of(cls, results: Iterable[AuditResult]) -> "Verdict":
        denied = warned = audited = error = False
        for r in results:
            denied = denied or r.denies
            audited = audited or r.audited
            warned = warned or r.result == "warn"
            error = error or r.result == "error"
        return cls(denied, warned, audited, error)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
