"""CEL validation rules of CRD schemas (``x-kubernetes-validations``), as the apiserver runs them:
what ``apiextensions-apiserver``'s ``schema/cel`` adds to CEL.

    rules = compile_schema_rules(node_schema, is_root=False, path="spec")
    for result in rules.evaluate(self_value, old_value, budget=CostBudget()):
        ...  # failed rules only: message resolved, or the runtime error as the apiserver words it

Compilation happens once per schema node (cached). ``self``/``oldSelf`` are typed from the schema
for checking (escaped property names, formats, list types, int-or-string as dyn, embedded
resources) and evaluated with values converted by that same type.

- ``compile``: a node's rules compiled once (``compile_schema_rules``), or ``CrdRuleError``;
- ``rules``: ``NodeRules.evaluate``, each rule's outcome, charge and message;
- ``budget``: the request's ``CostBudget``;
- ``rewrite``: the source the engine evaluates (Kubernetes' value semantics spelled out);
- ``rule_entry``: an entry's static checks and Go's renderings in its errors.

Imported by ``webhook.schema`` (the walk, the object batch, CRD admission) and by
``webhook.policy.typecheck`` (object types); it imports the checker, the cost model, the common
types and values, and the engines it compiles rules on.
"""

from webhook.cel.crd.budget import CostBudget
from webhook.cel.crd.compile import (
    CrdRuleError, analyze, compile_program, compile_schema_rules, object_types, references_old_self)
from webhook.cel.crd.rule_entry import RuleIssue, normalize_field_path
from webhook.cel.crd.rules import ABSENT, OUT_OF_BUDGET, CompiledRule, NodeRules, RuleCost, RuleResult

__all__ = [
    "ABSENT", "OUT_OF_BUDGET", "CompiledRule", "CostBudget", "CrdRuleError", "NodeRules", "RuleCost", "RuleIssue", "RuleResult",
    "analyze", "compile_program", "compile_schema_rules", "normalize_field_path", "object_types", "references_old_self",
]
