"""Compiling a schema node's ``x-kubernetes-validations`` once, as the apiserver does when a CRD is
created: static checks of each entry, ``self``/``oldSelf`` typed by the schema, cel-go's checker
and cost estimate, the engine's program of the rule's source, and the apiserver's words for a
rule that would make it reject the CRD."""


from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from webhook.cel import CelCompileError, Engine
from webhook.cel.cost.count import CostCounter
from webhook.cel.checker.checker import check
from webhook.cel.checker.literals import instantiation_error
from webhook.cel.cost.estimate import CrdSizeEstimator, RuntimeCharge
from webhook.cel.cost.estimate import estimate as estimate_cost
from webhook.cel.crd.rewrite import engine_source
from webhook.cel.crd.rule_entry import (
    RuleIssue, go_rule_json, malformed_entry, normalize_field_path, static_rule_issues)
from webhook.cel.syntax.ast import Comprehension, Ident, Select, walk
from webhook.cel.syntax.parser import CelSyntaxError, format_errors, parse, parse_with_spans
from webhook.cel.common.decl import DeclType, decl_type
from webhook.cel.common.types import BOOL, DYN, STRING, optional_of
from webhook.gocompat.fmt import go_json
from webhook.cel.crd.rules import (
    CompiledRule, CompileFailure, NodeRules, RuleCost, max_cardinality, union_fields)


class CrdRuleError(ValueError):
    """The schema node's rules are not accepted by the apiserver (the CRD itself is rejected)."""

    def __init__(self, path: str, issues: list[RuleIssue], costs: list[RuleCost] | None = None,
                 max_cardinality: int = 1) -> None:
        self.path = path
        self.issues = issues
        self.costs = costs or []          # of the rules that did compile
        self.max_cardinality = max_cardinality
        self.errors = [issue.render(path) for issue in issues]
        super().__init__("; ".join(self.errors))


# Rules whose worst case is at most this are charged their worst case; costlier ones are charged
# their estimate over the actual object's sizes (never more than the worst case).
CHEAP_RULE_COST = 1000


def _charge_for(checked: Any, max_cost: int) -> RuntimeCharge | None:
    return RuntimeCharge(checked, max_cost) if max_cost > CHEAP_RULE_COST else None


def compile_schema_rules(node_schema: Mapping[str, Any], *, is_root: bool, path: str = "", engine: Engine) -> NodeRules:
    """Compile the ``x-kubernetes-validations`` of one schema node for ``engine`` (kept by the
    engine per node).

    Raises ``CrdRuleError`` with the apiserver's CRD-admission wording when a rule would make
    the apiserver reject the CRD.
    """
    # embedded resources are resource roots too (apiVersion, kind, metadata.name/generateName)
    is_root = is_root or bool(node_schema.get("x-kubernetes-embedded-resource"))
    # kept by the engine per schema node (kept alive with its rules, so its id stays unique)
    key = (id(node_schema), is_root)
    kept = engine.schema_rules.get(key)
    if kept is not None and kept[0] is node_schema:
        return kept[1]
    rules = _compile(node_schema, is_root=is_root, path=path, engine=engine)
    engine.schema_rules.put(key, (node_schema, rules))
    return rules


def _compile(node_schema: Mapping[str, Any], *, is_root: bool, path: str, engine: Engine) -> NodeRules:
    entries = node_schema.get("x-kubernetes-validations") or []
    decl = decl_type(node_schema, is_root=is_root, name=SELF_TYPE_NAME) if entries else None
    issues: list[RuleIssue] = []
    compiled: list[CompiledRule] = []
    if not isinstance(entries, list):
        raise CrdRuleError(path, [RuleIssue("x-kubernetes-validations", "Invalid", "must be of type array",
                                            go_json(entries))])
    for index, entry in enumerate(entries):
        entry_issues = malformed_entry(index, entry) or static_rule_issues(index, entry, node_schema)
        if entry_issues:
            issues.extend(entry_issues)
            continue
        rule_or_issues = _compile_rule(index, entry, decl, node_schema, engine)
        if isinstance(rule_or_issues, list):
            issues.extend(rule_or_issues)
        else:
            compiled.append(rule_or_issues)
    if issues:
        costs = [RuleCost(r.index, r.max_cost, r.message_max_cost) for r in compiled]
        raise CrdRuleError(path, issues, costs, max_cardinality(decl))
    return NodeRules(tuple(compiled), decl, path)


_VARIABLES = ("self", "oldSelf", "__oldSelfPresent")


SELF_TYPE_NAME = "selfType0"


@dataclass(frozen=True, slots=True)
class _Analysis:
    """What compiling one expression against the schema found."""

    errors: str | None          # cel-go's display of the compile errors
    result_type: Any
    checked: Any
    parsed: Any
    source: str = ""            # what the engine evaluates (Kubernetes value semantics spelled out)


def analyze(expression: str, decl: DeclType | None, *, optional_old_self: bool = False) -> _Analysis:
    """Parse and type-check an expression with ``self``/``oldSelf`` typed by ``decl``."""
    try:
        parsed, spans = parse_with_spans(expression)
    except CelSyntaxError as err:
        return _Analysis(format_errors(expression, [(err.offset, err.message)]), None, None, None)
    self_type = decl.cel if decl is not None else DYN
    old_type = optional_of(self_type) if optional_old_self else self_type
    checked = check(parsed, {"self": self_type, "oldSelf": old_type}, object_types(decl))
    if checked.errors:
        return _Analysis(format_errors(expression, checked.errors), None, checked, parsed)
    source = engine_source(expression, parsed, spans, decl, optional_old_self=optional_old_self)
    return _Analysis(None, checked.result_type, checked, parsed, source)


def object_types(decl: DeclType | None) -> dict[str, DeclType]:
    """Every object type reachable from ``decl``, by type name (for field lookups)."""
    found: dict[str, DeclType] = {}
    stack = [decl] if decl is not None else []
    while stack:
        node = stack.pop()
        if node.kind == "object":
            found[node.cel.name] = node
            stack.extend(node.fields.values())
        elif node.elem is not None:
            stack.append(node.elem)
    return found


def _accessed_fields(parsed: Any) -> frozenset[str] | None:
    """The fields of ``self``/``oldSelf`` an expression selects, or None when it uses them whole."""
    fields: set[str] = set()
    selected = 0
    for node in walk(parsed):
        if isinstance(node, Select) and isinstance(node.operand, Ident) and node.operand.name in _VARIABLES[:2]:
            fields.add(node.field)
            selected += 1
    uses = sum(1 for node in walk(parsed) if isinstance(node, Ident) and node.name in _VARIABLES[:2])
    return frozenset(fields) if uses == selected else None


def _item_fields(parsed: Any) -> dict[str | None, frozenset[str] | None]:
    """The fields of list items an expression reads through a macro's variable, by the list:
    ``None`` for ``self`` itself, a property name for ``self.<property>`` (``self.all(p,
    p.number > 0)`` reads ``number`` of self's items); a variable used whole reads every field
    (``None``). The apiserver converts an item's field to CEL only when it is read
    (``UnstructuredToVal`` is lazy), so only these can fail as "invalid data"."""
    found: dict[str | None, frozenset[str] | None] = {}
    for node in walk(parsed):
        if not isinstance(node, Comprehension) or not node.iter_var:
            continue
        source = node.iter_range
        if isinstance(source, Ident) and source.name == "self":
            key: str | None = None
        elif isinstance(source, Select) and isinstance(source.operand, Ident) and source.operand.name == "self":
            key = source.field
        else:
            continue
        fields: set[str] = set()
        selected = uses = 0
        for inner in walk(node):
            if isinstance(inner, Select) and isinstance(inner.operand, Ident) and inner.operand.name == node.iter_var:
                fields.add(inner.field)
                selected += 1
            elif isinstance(inner, Ident) and inner.name == node.iter_var:
                uses += 1
        if uses == 0:
            continue
        read = frozenset(fields) if uses == selected else None
        if key in found:
            read = None if found[key] is None or read is None else found[key] | read
        found[key] = read
    return found


def _uses_old_self(parsed: Any) -> bool:
    return any(isinstance(node, Ident) and node.name == "oldSelf" for node in walk(parsed))


def _compile_rule(index: int, entry: Mapping[str, Any], decl: DeclType | None,
                  node_schema: Mapping[str, Any], engine: Engine) -> CompiledRule | list[RuleIssue]:
    where = f"x-kubernetes-validations[{index}]"
    rule_text = entry.get("rule", "")
    optional_old_self = bool(entry.get("optionalOldSelf"))
    analysis = analyze(rule_text, decl, optional_old_self=optional_old_self)
    if analysis.errors is not None:
        return [RuleIssue(f"{where}.rule", "Invalid", f"compilation failed: {analysis.errors}", go_rule_json(entry))]
    if analysis.result_type != BOOL:
        return [RuleIssue(f"{where}.rule", "Invalid", "cel expression must evaluate to a bool", go_rule_json(entry))]
    problem = instantiation_error(analysis.parsed)
    if problem is not None:
        return [RuleIssue(f"{where}.rule", "Invalid", f"program instantiation failed: {problem}", go_rule_json(entry))]
    uses_old_self = _uses_old_self(analysis.parsed)
    issues: list[RuleIssue] = []
    if entry.get("optionalOldSelf") is not None and not uses_old_self:
        # set at all (false too) without oldSelf: apiextensions' validation.go (`OptionalOldSelf != nil`)
        issues.append(RuleIssue(f"{where}.optionalOldSelf", "Invalid",
                                "may not be set if oldSelf is not used in rule",
                                "true" if entry["optionalOldSelf"] else "false"))
    message_program = None
    message_cost: int | None = None
    message_charge = None
    message_actual = None
    message_parsed = None
    message_expression = entry.get("messageExpression") or ""
    if message_expression.strip():
        # typed as the rule is (Kubernetes compiles both in the rule's env: oldSelf optional too)
        message_analysis = analyze(message_expression, decl, optional_old_self=optional_old_self)
        if message_analysis.errors is not None:
            issues.append(RuleIssue(f"{where}.messageExpression", "Invalid",
                                    f"messageExpression compilation failed: {message_analysis.errors}",
                                    go_rule_json(entry)))
        elif message_analysis.result_type != STRING:
            issues.append(RuleIssue(f"{where}.messageExpression", "Invalid",
                                    "messageExpression must evaluate to a string", go_rule_json(entry)))
        elif (problem := instantiation_error(message_analysis.parsed)) is not None:
            issues.append(RuleIssue(f"{where}.messageExpression", "Invalid",
                                    f"messageExpression instantiation failed: {problem}", go_rule_json(entry)))
        else:
            message_program = _engine_program(message_analysis.source, engine)
            message_cost = estimate_cost(message_analysis.checked, CrdSizeEstimator(decl))[1]
            message_charge = _charge_for(message_analysis.checked, message_cost)
            message_actual = CostCounter(message_analysis.checked)
            message_parsed = message_analysis.parsed
    if issues:
        return issues
    max_cost = estimate_cost(analysis.checked, CrdSizeEstimator(decl))[1]
    source = analysis.source
    message = entry.get("message") or None
    field_path = entry.get("fieldPath") or None
    program = _engine_program(source, engine)
    return CompiledRule(
        index=index,
        rule=rule_text,
        program=program,
        source=None if isinstance(program, _Uncompilable) else source,
        message=message,
        message_program=message_program,
        uses_old_self=uses_old_self,
        optional_old_self=optional_old_self,
        reason=entry.get("reason"),
        field_path=normalize_field_path(field_path, node_schema) if field_path else None,
        error_string=(message or rule_text).strip(),
        max_cost=max_cost,
        message_max_cost=message_cost,
        item_fields=_item_fields(analysis.parsed),
        fields=union_fields(_accessed_fields(analysis.parsed),
                             _accessed_fields(message_parsed) if message_parsed is not None else frozenset()),
        runtime_charge=_charge_for(analysis.checked, max_cost),
        message_runtime_charge=message_charge,
        actual=CostCounter(analysis.checked),
        message_actual=message_actual,
    )


class _Uncompilable:
    """A rule that type-checks as the apiserver's does but that the engine cannot compile."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def evaluate(self, activation: Mapping[str, Any], *, cost_limit: int | None = None, accept: Any = None,
                 routes: Any = None) -> Any:
        raise CompileFailure(self.message)


def compile_program(source: str, engine: Engine) -> Any:
    """An ``engine`` program over ``self``/``oldSelf``/``__oldSelfPresent``, or None when the
    engine cannot compile ``source``."""
    program = _engine_program(source, engine)
    return None if isinstance(program, _Uncompilable) else program


def _engine_program(source: str, engine: Engine) -> Any:
    try:
        # cel-go's checker checked the rule's literals with the schema's types
        return engine.compile(source, _VARIABLES, mixed_literals=True)
    except CelCompileError as err:
        return _Uncompilable(f"rule compile error: compilation failed: {err}")


def references_old_self(expression: str) -> bool:
    """Whether an expression refers to ``oldSelf`` (False when it does not parse)."""
    try:
        return _uses_old_self(parse(expression))
    except CelSyntaxError:
        return False
