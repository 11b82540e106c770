"""A loaded policy, compiled: whether it applies to a request (``matching``), and its stage
evaluated as one program (``batch_path``) or expression by expression (``exact``), the
apiserver's wording of what it says coming from ``messages``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from webhook.policy.batch_path import BatchPath
from webhook.policy.exact import ExactPath
from webhook.policy.expression import CEL_VARIABLES, Expression
from webhook.policy.matching import Matcher
from webhook.policy.messages import RuleError, not_applied
from webhook.policy.model import AdmissionPolicy, Lookup
from webhook.policy.scope import Prepared, PolicyInput
from webhook.policy.unknown import leave_unchecked, rule_reads, unknown_facts
from webhook.policy.verdict import Denial, Verdict
from webhook.state.knowledge import EVERYTHING

if TYPE_CHECKING:
    from webhook.cel import Evaluator

__all__ = ["CEL_VARIABLES", "CompiledPolicy", "Expression", "PolicyInput"]


class CompiledPolicy:
    """An :class:`AdmissionPolicy` with every expression compiled (see ``loader``)."""

    def __init__(self, spec: AdmissionPolicy, compile_: Callable[[str, tuple[Any, ...]], Expression],
                 file: str, evaluator: Evaluator) -> None:
        self.name = spec.metadata.name
        self.file = file
        self.definition = spec
        s = spec.spec
        self.fail_closed = s.failurePolicy == "Fail"
        # what a failed validation does (spec.validationActions; an operator may override it per
        # namespace: ``webhook.policy.actions``)
        self.validation_actions: frozenset[str] = frozenset(s.validationActions)
        self.validates_when_mutating = s.validationStage == "Mutating"
        self.matcher = Matcher(s.matchConstraints)
        self.exact = ExactPath(
            self.name, s.paramRef, evaluator.engine.known_sizes.remember,
            lookups=[(lk, _compile_lookup(lk, i, compile_)) for i, lk in enumerate(s.lookups)],
            match_conditions=[(m.name, compile_(m.expression, ("spec", "matchConditions", i, "expression")))
                              for i, m in enumerate(s.matchConditions)],
            variables=[(v.name, compile_(v.expression, ("spec", "variables", i, "expression")))
                       for i, v in enumerate(s.variables)],
            mutations=[(m.patchType, compile_(m.expression, ("spec", "mutations", i, "expression")))
                       for i, m in enumerate(s.mutations)],
            validations=[(v, compile_(v.expression, ("spec", "validations", i, "expression")),
                          compile_(v.messageExpression, ("spec", "validations", i, "messageExpression"))
                          if v.messageExpression else None) for i, v in enumerate(s.validations)],
            warnings=[(w, compile_(w.expression, ("spec", "warnings", i, "expression")),
                       compile_(w.messageExpression, ("spec", "warnings", i, "messageExpression"))
                       if w.messageExpression else None) for i, w in enumerate(s.warnings)],
            audit_annotations=[(a.key, compile_(a.valueExpression, ("spec", "auditAnnotations", i, "valueExpression")))
                               for i, a in enumerate(s.auditAnnotations)],
        )
        exact = self.exact
        judges = bool(exact.validations or exact.warnings or exact.audit_annotations)
        self.validating_stage = judges and not self.validates_when_mutating  # has work in the validating webhook
        self.mutating_stage = bool(exact.mutations) or self.validates_when_mutating  # ... in the mutating webhook
        self._stages = {True: self.mutating_stage, False: self.validating_stage}
        self.batches = BatchPath(exact, file, self._stages, self.validates_when_mutating, evaluator)
        # per rule, the lookups and params it reads (``webhook.policy.unknown``)
        self.rule_reads = rule_reads(exact) if exact.lookups or exact.param_ref else {}

    def matches(self, inp: PolicyInput) -> bool:
        """Whether the policy applies to ``inp`` (rules, then selectors; not matchConditions)."""
        return self.matcher.matches(inp)

    def may_apply(self, rule_key: tuple[str, str, Any, str], mutating: bool) -> bool:
        """Whether the policy has work in the stage and its rules match requests with this key
        (what :meth:`matches` checks first, before the selectors)."""
        return self._stages[mutating] and self.matcher.rules_match(*rule_key)

    def evaluate(self, inp: PolicyInput, *, mutating: bool, explain: bool = False) -> Verdict | None:
        """None when the policy does not apply (rules, selectors, matchConditions)."""
        if not self._applies(inp, mutating):
            return None
        verdict = Verdict(self.name, object=inp.object)
        trace = verdict.traces.append if explain else None
        try:
            if not explain:
                decided = self.batches.run(inp, verdict, mutating)
                if decided is not None:
                    return self._decidable(inp, verdict) if decided else None
            if not self.exact.run(inp, verdict, mutating, mutating == self.validates_when_mutating, trace):
                return None
        except RuleError as exc:
            if self.fail_closed:
                verdict.denials.append(Denial(self.name, exc.message, "InternalError"))
            else:
                verdict.warnings.append(not_applied(self.name, exc))
        return self._decidable(inp, verdict)

    def _decidable(self, inp: PolicyInput, verdict: Verdict) -> Verdict:
        """``verdict`` without the findings of rules that read what the cluster view does not know
        (``webhook.policy.unknown``); a view that holds every kind whole (a cluster's) knows all."""
        knowledge = getattr(inp.state, "knowledge", EVERYTHING)
        if self.rule_reads and knowledge.partial:
            lookups = verdict.lookups
            if lookups is None:
                prepared = inp.scope.prepared.get(self.batches.serial)
                lookups = prepared.lookups if isinstance(prepared, Prepared) else None
            params = self.exact.params(inp.state)
            activation = {"object": inp.object, "oldObject": inp.old_object, "request": inp.request,
                          "namespaceObject": inp.namespace_object, "params": params, "variables": {}}
            # a get's answer is looked at only when a rule that reads it failed (whether it named
            # anything takes a CEL evaluation): a rule that held without it said nothing either way
            failed = [d.rule for d in verdict.denials] + [verdict.warning_rules.get(w, "") for w in verdict.warnings]
            gets = frozenset().union(*(self.rule_reads.get(rule, frozenset()) for rule in failed))
            unknown = unknown_facts(self.exact, lookups, params, knowledge, activation, gets=gets)
            leave_unchecked(verdict, self.exact, self.rule_reads, unknown, activation, lookups)
        return verdict

    def prepare(self, inp: PolicyInput, *, mutating: bool) -> None:
        """Before a stage's policies run: this policy's lookups and state variables into the
        review's scope (``ReviewScope``), so that one binding serves every policy's batch."""
        if self._applies(inp, mutating):
            self.batches.prepare(inp, mutating)

    def _applies(self, inp: PolicyInput, mutating: bool) -> bool:
        return self._stages[mutating] and self.matcher.matches(inp)


def _compile_lookup(lookup: Lookup, i: int, compile_) -> dict[str, Expression]:
    source = lookup.get or lookup.list
    section = "get" if lookup.get else "list"
    fields = ("name", "namespace") if lookup.get else ("namespace", "labelSelector", "selector")
    return {f: compile_(getattr(source, f), ("spec", "lookups", i, section, f))
            for f in fields if getattr(source, f) is not None}
