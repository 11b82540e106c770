"""Judging an existing object: the CRD's own schema and CEL rules, then every policy that
applies, each giving its own results.

How an object at rest is judged, and why (Kyverno's background scan and ValidatingAdmissionPolicy
evaluation build the same request: ``admission.NewAttributesRecord(obj, nil, ..., admission.Create,
...)``, no old object, no user; Gatekeeper's audit reviews the object alone):

- as a **CREATE of the object, without an ``oldObject``**. A rule about a transition
  (``request.operation == 'UPDATE'``, ``oldObject.spec...``, a policy matching UPDATE only) has
  nothing to compare and is not applied; it cannot fail an object that merely exists. The user
  is ``infergate-audit`` (``AUDITOR``), the namespace the object's own.
- the **CRD's schema and CEL rules as on a CREATE** (``CRDRegistry.prepare`` then ``validate``,
  the two halves of the apiserver's handling): an UPDATE that changes nothing would let
  ratcheting excuse every field stored before the CRD tightened, which is what the audit is
  for. Its failures are results ``fail`` of the policy ``crd-schema`` (``rule``: the field);
  on a CREATE the apiserver drops ``status`` where the CRD has the subresource, so status is
  not judged.
- the policies see the object **as decoded** (pruned and defaulted, as the apiserver reads it
  back), **without the policies' mutations**: the object is judged as stored, as Kyverno's
  background scan runs no mutate rules. Validations placed in the mutating stage still run.
- **per policy**: a policy that applies (rules, selectors, matchConditions) and whose rules all
  hold gives one ``pass``; else one result per failing validation (``rule``:
  ``validations[i]``; ``fail``, or ``warn`` when its actions have Warn and not Deny), one
  ``warn`` per rule of its ``warnings`` that does not hold, or one ``error`` when it cannot be
  evaluated. A policy without validations (mutations only) gives nothing.

Only objects with failures pay for naming the rules (an ``--explain`` run of the failing policy);
an object that passes costs one run of the chain's batches, as a review does.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from webhook.admission.chain import AdmissionChain, CRDSource, native_validation, offline_request, request_view
from webhook.audit.results import CRD_SCHEMA, DENY, AuditResult, ObjectAudit, ResourceRef, ordered
from webhook.kinds import Kind
from webhook.policy import Policy, PolicyInput, PolicySet, PolicySetProvider, Trace, Verdict
from webhook.policy.actions import own_actions
from webhook.schema import CRDRegistry, RequestError
from webhook.schema.registry import MARKER
from webhook.state import ClusterState

AUDITOR = "infergate-audit"  # request.userInfo.username of an audit's requests
WARN = frozenset({"Warn"})
_VALIDATION = re.compile(r"validations\[\d+\]")
_WARNING = re.compile(r"warnings\[\d+\]")
# traces that are not a validation's verdict (a builtin policy's rules have names of their own)
_NOT_RULES = ("matchConditions", "variables", "lookups", "warnings", "auditAnnotations", "mutations")


class Auditor:
    """Judges existing objects against the CRDs in force (``registry``: a ``CRDRegistry`` or
    ``WatchedCRDs``; None: policies alone), the policies in force and the cluster ``state``
    their lookups read: the three things an ``AdmissionChain`` is built from, each re-read
    through ``current()`` per object (hot reload, a cluster's CRDs). Pure CPU work, no I/O."""

    def __init__(self, registry: CRDSource | None, policies: PolicySetProvider, state: ClusterState) -> None:
        self.registry = registry
        self.policies = policies
        self.state = state

    @classmethod
    def of_chain(cls, chain: AdmissionChain) -> "Auditor":
        """The auditor of what ``chain`` admits with."""
        return cls(chain.registry, chain.policies, chain.state)

    def audit(self, obj: dict[str, Any]) -> ObjectAudit:
        """Every result for ``obj`` (an object as stored: a dump's item, a watch cache's object).
        Raises ``ValueError`` when ``obj`` is no Kubernetes object (no apiVersion and kind)."""
        if not isinstance(obj, dict) or not isinstance(obj.get("apiVersion"), str) \
                or not isinstance(obj.get("kind"), str) or not obj["apiVersion"] or not obj["kind"]:
            raise ValueError("not a Kubernetes object (no apiVersion and kind)")
        ref = ResourceRef.of(obj)
        results: list[AuditResult] = []
        registry = self.registry.current() if self.registry is not None else None
        decoded = obj
        if registry is not None and registry.served(ref.api_version, ref.kind) is not None:
            decoded = _schema(registry, obj, ref, results)
        request = offline_request(decoded, namespace=ref.namespace or None, username=AUDITOR)
        inp = PolicyInput(request_view(request), decoded, None,
                          self.state.get("v1", "Namespace", ref.namespace) if ref.namespace else None, self.state)
        policy_set = self.policies.current()
        unchecked: list[tuple[str, str]] = []
        for mutating in (True, False):
            candidates = policy_set.for_review(inp.rule_key, mutating=mutating)
            if mutating:  # the mutating stage's validations only: mutations are not applied
                candidates = tuple(p for p in candidates if getattr(p, "validates_when_mutating", False))
            for policy in candidates:  # one binding of the review's values for every batch
                prepare = getattr(policy, "prepare", None)
                if prepare is not None:
                    prepare(inp, mutating=mutating)
            for policy in candidates:
                results += _judge(policy, inp, mutating, policy_set, unchecked)
        native = getattr(policy_set, "native", None)
        if native:  # Kubernetes' own ValidatingAdmissionPolicies: one result per binding that applies
            results += _native(native, request, decoded, registry, self.state, unchecked)
        return ObjectAudit(ref, ordered(results), tuple(unchecked))

    def audited_kinds(self) -> list[Kind]:
        """Every kind (at every version) the CRDs in force serve that a policy may apply to (what
        a live audit lists), in order."""
        registry = self.registry.current() if self.registry is not None else None
        if registry is None:
            return []
        policy_set = self.policies.current()
        found = []
        for api_version, kind in registry.kinds():
            served = registry.served(api_version, kind)
            key = (served.group, kind, "CREATE", "")
            if any(policy_set.for_review(key, mutating=m) for m in (True, False)):
                found.append(Kind(api_version, kind, served.plural, served.namespaced))
        return found


def _native(native: Any, request: Any, obj: dict[str, Any], registry: CRDRegistry | None,
            state: ClusterState, unchecked: list[tuple[str, str]]) -> list[AuditResult]:
    """The ValidatingAdmissionPolicies' results on ``obj``: per binding that applies, ``pass``,
    one ``fail`` per failed validation (``warn`` under Warn without Deny) or an ``error`` (under
    failurePolicy Fail; under Ignore the apiserver admits and records nothing, and so does this); what
    was left out, the state not knowing it, into ``unchecked``."""
    try:
        answer, _ = native_validation(native, request, obj, registry, state)
    except Exception as exc:  # a bug must still end as a result, not stop the scan
        return [AuditResult("ValidatingAdmissionPolicy", "", "error", f"internal error: {type(exc).__name__}: {exc}")]
    unchecked += answer.unchecked
    out = []
    for found in answer.results:
        if found.result == "error" and not found.fail_closed:
            continue  # failurePolicy Ignore: the apiserver admits, and says nothing of the error
        actions = frozenset(found.actions) or DENY
        result = found.result
        if result == "fail" and "Deny" not in actions and "Warn" in actions:
            result = "warn"
        out.append(AuditResult(found.policy, found.rule, result, found.message, actions, fail_closed=found.fail_closed))
    return out


def _schema(registry: CRDRegistry, obj: dict[str, Any], ref: ResourceRef, results: list[AuditResult]) -> dict[str, Any]:
    """The CRD's verdict on ``obj`` as a CREATE into ``results``; the object as decoded."""
    try:
        decoded, _ = registry.prepare("CREATE", obj, None, None, namespace=ref.namespace or None)
    except RequestError as exc:
        results.append(AuditResult(CRD_SCHEMA, "decode", "fail", str(exc.status().get("message", exc))))
        return obj
    # the apiserver's closing note that CEL rules were skipped is no finding of its own
    errors = [error for error in registry.validate("CREATE", decoded)[0] if error != MARKER]
    if errors:
        results += [AuditResult(CRD_SCHEMA, error.field if error.field != "<nil>" else "", "fail", str(error))
                    for error in errors]
    else:
        results.append(AuditResult(CRD_SCHEMA, "", "pass"))
    return decoded


def _judge(policy: Policy, inp: PolicyInput, mutating: bool, policy_set: PolicySet,
           unchecked: list[tuple[str, str]]) -> list[AuditResult]:
    """One policy's results on ``inp`` (none when it does not apply), under the validation
    actions in force for it there (an operator's override for the namespace, else its own);
    what its rules left out read, the state not knowing it, into ``unchecked``."""
    try:
        actions = frozenset(policy_set.actions_for(policy, inp)[0]) or DENY
        verdict = policy.evaluate(inp, mutating=mutating)
        if verdict is None:
            return []
        unchecked += verdict.unchecked
        if not verdict.denials and not verdict.warnings:
            return [AuditResult(policy.name, "", "pass", actions=actions)]
        # name the failing rules: the exact path, traced (the same answers, rule by rule)
        explained = policy.evaluate(inp, mutating=mutating, explain=True)
    except Exception as exc:  # a bug must still end as a result, not stop the scan
        return [AuditResult(policy.name, "", "error", f"internal error: {type(exc).__name__}: {exc}",
                            own_actions(policy))]
    if explained is None:  # (cannot happen: the same input applied a moment ago)
        explained = verdict
    return _attributed(policy.name, explained, actions)


def _attributed(name: str, verdict: Verdict, actions: frozenset[str]) -> list[AuditResult]:
    """A policy's denials and warnings, each with the rule that said it (the one it names, else
    from the traces: the exact path appends one denial per failed validation and one warning per
    failed warning rule, in order)."""
    failed = iter(_failed(verdict.traces, validations=True))
    warned = iter(_failed(verdict.traces, validations=False))
    fail_result = "fail" if "Deny" in actions or "Warn" not in actions else "warn"
    error_prefix, not_applied = f"policy {name}: ", f"policy {name} not applied: "
    out: list[AuditResult] = []
    for denial in verdict.denials:
        if denial.reason == "InternalError" and denial.message.startswith(error_prefix):
            out.append(AuditResult(name, _rule_of(denial.message[len(error_prefix):]), "error", denial.message,
                                   actions, fail_closed=True))
        else:
            rule = denial.rule or next(failed, denial.field_path or "")  # (a rule left out has no trace's turn)
            out.append(AuditResult(name, rule, fail_result, denial.message, actions))
    for warning in verdict.warnings:
        if warning.startswith(not_applied):
            out.append(AuditResult(name, _rule_of(warning[len(not_applied) + len(error_prefix):]), "error", warning,
                                   actions))
        else:
            out.append(AuditResult(name, verdict.warning_rules.get(warning) or next(warned, ""), "warn", warning,
                                   WARN))
    return out


def _failed(traces: Iterable[Trace], *, validations: bool) -> list[str]:
    """The validations (else the warning rules), in order, that did not hold: a CEL rule whose
    value was not true (errors apart: they end the policy), a rule of a policy written in
    Python (named by itself, e.g. ``catalog``) whose verdict was false (a warning: unknown)."""
    pattern = _VALIDATION if validations else _WARNING
    plain = "false" if validations else "unknown"
    found = []
    for t in traces:
        if pattern.fullmatch(t.rule):
            if t.verdict != "true" and not t.verdict.startswith("error"):
                found.append(t.rule)
        elif t.verdict == plain and "." not in t.rule and "[" not in t.rule and not t.rule.startswith(_NOT_RULES):
            found.append(t.rule)
    return found


def _rule_of(text: str) -> str:
    """``validations[2]`` of ``validations[2]: expression '...' resulted in error: ...``."""
    rule = text.partition(": ")[0]
    return rule if " " not in rule else ""
