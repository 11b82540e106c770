"""CEL validation rules of CRD schemas (``x-kubernetes-validations``), as the apiserver runs them.

    rules = compile_schema_rules(node_schema, is_root=False, path="spec")
    for result in rules.evaluate(self_value, old_value, budget=CostBudget()):
        ...  # failed rules only: message resolved, or the runtime error as the apiserver words it

Compilation happens once per schema node (cached). ``self``/``oldSelf`` are typed from the schema
for checking (escaped property names, formats, list types, int-or-string as dyn, embedded
resources) and evaluated with values converted by that same type.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Mapping

from webhook.cel import CelCompileError, CelCostExceeded, CelEvalError, EngineBoundExceeded, get_engine
from webhook.cel.cost.calls import Error
from webhook.cel.cost.count import EXCEEDED, CostCounter, CountedEvaluation
from webhook.cel.checker.checker import check
from webhook.cel.checker.literals import instantiation_error
from webhook.cel.cost.estimate import CrdSizeEstimator, RuntimeCharge
from webhook.cel.cost.estimate import estimate as estimate_cost
from webhook.cel.ladder import ALL, Routes
from webhook.cel.library.base import NONE, OptionalValue
from webhook.cel.limits import (MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES, MAX_REQUEST_SIZE_BYTES, PER_CALL_LIMIT,
                                RUNTIME_CEL_COST_BUDGET)
from webhook.cel.rewrite import engine_source
from webhook.cel.rule_entry import RuleIssue, go_rule_json, malformed_entry, normalize_field_path, static_rule_issues
from webhook.cel.syntax.ast import Ident, Select, walk
from webhook.cel.syntax.parser import CelSyntaxError, format_errors, parse, parse_with_spans
from webhook.cel.common.decl import DeclType, decl_type
from webhook.cel.common.types import BOOL, DYN, STRING, optional_of
from webhook.cel.common.values import invalid_reads, to_cel
from webhook.gocompat.fmt import go_json

OUT_OF_BUDGET = "validation failed due to running out of cost budget, no further validation rules will be run"
_MESSAGE_OUT_OF_BUDGET = ("messageExpression evaluation failed due to running out of cost budget, no further "
                          "validation rules will be run")


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()   # no old value (CREATE, or the field is new on UPDATE)


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


@dataclass(frozen=True, slots=True)
class RuleResult:
    index: int
    passed: bool
    message: str | None
    error: str | None
    reason: str | None
    field_path: str | None


class CostBudget:
    """The runtime cost budget of one request, shared by every rule it evaluates.

    Each evaluation is charged what cel-go counts (``CompiledRule.cost``), which takes a
    second evaluation. A charge that cannot change what happens is counted later instead
    (``charge_later``): its estimate, an upper bound, is within the per-call limit and within
    what is left once every deferred charge is counted at its estimate too. Deferred charges
    are counted when ``remaining`` is read; the budget never runs out before they are
    (``exhausted``, ``depleted``), so it runs out at the same rule either way."""

    __slots__ = ("_remaining", "_deferred", "_deferred_bound")

    def __init__(self, limit: int = RUNTIME_CEL_COST_BUDGET) -> None:
        self._remaining = limit
        self._deferred: list[tuple[Callable[[Any, Any], int], Any, Any]] = []
        self._deferred_bound = 0

    @property
    def remaining(self) -> int:
        """What is left, every deferred charge counted."""
        if self._deferred:
            deferred, self._deferred, self._deferred_bound = self._deferred, [], 0
            self._remaining -= sum(count(activation, outcome) for count, activation, outcome in deferred)
        return self._remaining

    @remaining.setter
    def remaining(self, value: int) -> None:
        self._deferred, self._deferred_bound = [], 0
        self._remaining = value

    def charge_later(self, bound: int, count: Callable[[Any, Any], int], activation: Any, outcome: Any) -> bool:
        """Defer the charge ``count(activation, outcome)`` (at most ``bound``); False when it
        must be counted now."""
        if bound > PER_CALL_LIMIT or self._remaining - self._deferred_bound - bound < 0:
            return False
        self._deferred.append((count, activation, outcome))
        self._deferred_bound += bound
        return True

    @property
    def exhausted(self) -> bool:
        """The budget ran out (deferred charges never make it run out)."""
        return self._remaining < 0

    @property
    def depleted(self) -> bool:
        """Nothing is left (``remaining <= 0``), counting deferred charges only when it may be so."""
        return self._remaining - self._deferred_bound <= 0 and self.remaining <= 0


@dataclass(frozen=True, slots=True)
class CompiledRule:
    index: int
    rule: str
    program: Any
    message: str | None
    message_program: Any
    uses_old_self: bool
    optional_old_self: bool
    reason: str | None
    field_path: str | None
    error_string: str      # how the apiserver names the rule in errors (message or rule, trimmed)
    max_cost: int = 0                     # estimated worst-case cost of one evaluation
    message_max_cost: int | None = None   # same for messageExpression
    source: str | None = None             # what the engine compiled (None: it could not)
    fields: frozenset[str] | None = None  # the fields of self/oldSelf it reads (None: the whole value)
    runtime_charge: RuntimeCharge | None = None           # expensive rules: charged by actual sizes
    message_runtime_charge: RuntimeCharge | None = None
    actual: CostCounter | None = None                      # cel-go's count of an evaluation
    message_actual: CostCounter | None = None

    def charge(self, activation: Mapping[str, Any]) -> int:
        """At least what cel-go charges one evaluation: the estimate (worst case, or over the
        sizes of the values seen)."""
        if self.runtime_charge is None:
            return self.max_cost
        return self.runtime_charge(activation)

    def message_charge(self, activation: Mapping[str, Any]) -> int:
        if self.message_runtime_charge is None:
            return self.message_max_cost or 0
        return self.message_runtime_charge(activation)

    def bound(self, activation: Mapping[str, Any]) -> int:
        """An upper bound of ``cost``."""
        if self.runtime_charge is None:
            return self.max_cost if self.max_cost <= PER_CALL_LIMIT else PER_CALL_LIMIT + 1
        return min(self.runtime_charge(activation), PER_CALL_LIMIT + 1)

    def message_bound(self, activation: Mapping[str, Any]) -> int:
        return min(self.message_charge(activation), PER_CALL_LIMIT + 1)

    def count(self, activation: Mapping[str, Any]) -> CountedEvaluation | None:
        """cel-go's evaluation of the rule, counted (None: not known here)."""
        return self._count(self.actual, activation)

    def message_count(self, activation: Mapping[str, Any]) -> CountedEvaluation | None:
        """cel-go's evaluation of the messageExpression, counted (None: not known here)."""
        return self._count(self.message_actual, activation)

    def _count(self, actual: CostCounter | None, activation: Mapping[str, Any]) -> CountedEvaluation | None:
        if actual is None:
            return None
        if self.optional_old_self:  # oldSelf is an optional to the rule and its message (the engine's source spells it out)
            old = OptionalValue.of(activation["oldSelf"]) if activation["__oldSelfPresent"] else NONE
            activation = {**activation, "oldSelf": old}
        return actual.count(activation, PER_CALL_LIMIT)

    def cost(self, activation: Mapping[str, Any], outcome: Any) -> int:
        """What the apiserver charges the evaluation that gave ``outcome`` (a value or the
        CelEvalError): cel-go's count where it is known here, else the estimate (capped just
        past the per-call limit, where cel-go would have stopped)."""
        counted = _counted(self.count, activation, outcome)
        return counted if counted is not None else self.bound(activation)

    def message_cost(self, activation: Mapping[str, Any], outcome: Any) -> int:
        counted = _counted(self.message_count, activation, outcome)
        return counted if counted is not None else self.message_bound(activation)


def _counted(count: Callable[[Mapping[str, Any]], CountedEvaluation | None], activation: Mapping[str, Any],
             outcome: Any) -> int | None:
    """cel-go's count of an evaluation, when the count saw what the engine saw (None: unknown).
    An evaluation the engine's bound stopped is not counted: it is over the per-call limit
    either way (and counting it could take as long as it would have)."""
    if isinstance(outcome, CelCostExceeded):
        return None
    counted = count(activation)
    if counted is None or not _agrees(counted, outcome):
        return None
    return counted.cost


def _agrees(counted: CountedEvaluation, outcome: Any) -> bool:
    value = counted.value
    if value is EXCEEDED:
        return True  # cel-go stops there, whatever the engine went on to answer
    if isinstance(outcome, CelEvalError):
        return isinstance(value, Error)
    return type(value) is type(outcome) and value == outcome


# Rules whose worst case is at most this are charged their worst case; costlier ones are charged
# their estimate over the actual object's sizes (never more than the worst case).
CHEAP_RULE_COST = 1000


def _union_fields(*sets: frozenset[str] | None) -> frozenset[str] | None:
    if any(fields is None for fields in sets):
        return None
    return frozenset().union(*sets)  # type: ignore[arg-type]


def _charge_for(checked: Any, max_cost: int) -> RuntimeCharge | None:
    return RuntimeCharge(checked, max_cost) if max_cost > CHEAP_RULE_COST else None


@dataclass(frozen=True, slots=True)
class RuleCost:
    """Estimated worst-case costs of one rule (for the CRD's cost budget)."""

    index: int
    rule: int
    message_expression: int | None


class NodeRules:
    """The compiled rules of one schema node."""

    __slots__ = ("rules", "decl", "uses_old_self", "path", "properties")

    def __init__(self, rules: tuple[CompiledRule, ...], decl: DeclType | None, path: str) -> None:
        self.rules = rules
        # only the properties the rules read are handed to the engine (None: the whole object)
        self.properties = _read_properties(decl, _union_fields(*(rule.fields for rule in rules)))
        self.decl = decl
        self.path = path
        self.uses_old_self = any(rule.uses_old_self for rule in rules)

    @property
    def costs(self) -> list[RuleCost]:
        return [RuleCost(r.index, r.max_cost, r.message_max_cost) for r in self.rules]

    @property
    def max_cardinality(self) -> int:
        """How often this node could repeat in a 3 MiB request (its unbounded cardinality)."""
        return max_cardinality(self.decl)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def evaluate(self, self_value: Any, old_value: Any = ABSENT, *, budget: CostBudget,
                 routes: Routes = ALL) -> list[RuleResult]:
        """Evaluate every rule; returns the failed ones (runtime errors included), in rule order.
        ``routes``: the fast routes that may run (``webhook.cel.ladder``)."""
        if self_value is None or not self.rules:
            return []
        if old_value is None:
            old_value = ABSENT
        if budget.depleted:
            budget.remaining = -1
            return [RuleResult(0, False, None, OUT_OF_BUDGET, None, None)]
        has_old = old_value is not ABSENT
        activation = self.activation(self_value, old_value)
        runnable = self.runnable(has_old)
        outcomes = self._run(runnable, activation, routes)
        invalid = invalid_reads(self_value, self.decl, self.properties)
        if invalid:  # data contradicting the schema: a rule that reads it fails as in Kubernetes
            outcomes = [_invalid_outcome(rule, self.decl, invalid) or o for rule, o in zip(runnable, outcomes)]
        failures: list[RuleResult] = []
        for rule, outcome in zip(runnable, outcomes):
            charge = rule.cost
            if type(outcome) is CountedEvaluation:  # cel-go's count answered (``_cel_go_outcome``): its cost is known
                charge, outcome = _known_cost(outcome.cost), outcome.value
            if not budget.charge_later(rule.bound(activation), charge, activation, outcome):
                cost = charge(activation, outcome)
                if cost > budget.remaining:
                    return self._out_of_budget(failures, budget)
                if cost > PER_CALL_LIMIT:
                    budget.remaining = -1
                    failures.append(_error(rule, f"'{CelCostExceeded().message}': no further validation rules will "
                                                 f"be run due to call cost exceeds limit for rule: {rule.error_string}"))
                    return failures
                budget.remaining -= cost
            if isinstance(outcome, CelEvalError):
                failures.append(_error(rule, _runtime_error_text(outcome, rule)))
                continue
            if outcome is True:
                continue
            message = self._message(rule, activation, budget, routes)
            if message is None:
                failures.append(RuleResult(rule.index, False, None, _MESSAGE_OUT_OF_BUDGET, None, rule.field_path))
                return failures
            failures.append(RuleResult(rule.index, False, message, None, rule.reason, rule.field_path))
        return failures

    def runnable(self, has_old: bool) -> list[CompiledRule]:
        """The rules evaluated on a node: transition rules need a comparable old value (unless
        oldSelf is optional)."""
        return [r for r in self.rules if has_old or not r.uses_old_self or r.optional_old_self]

    def activation(self, self_value: Any, old_value: Any = ABSENT) -> dict[str, Any]:
        """What the node's rules see (``old_value`` ABSENT: no old value)."""
        has_old = old_value is not ABSENT
        activation = {"self": self._to_cel(self_value), "oldSelf": None, "__oldSelfPresent": has_old}
        if has_old and self.uses_old_self:
            activation["oldSelf"] = self._to_cel(old_value)
        return activation

    def subset(self, rules: tuple[CompiledRule, ...]) -> "NodeRules":
        """The same node with only ``rules`` (indices, messages and ratcheting unchanged)."""
        return NodeRules(rules, self.decl, self.path)

    def _to_cel(self, value: Any) -> Any:
        properties = self.properties
        if properties is not None and isinstance(value, dict):
            value = {key: item for key, item in value.items() if key in properties}
        return to_cel(value, self.decl)

    @staticmethod
    def _run(rules: list[CompiledRule], activation: Mapping[str, Any], routes: Routes) -> list[Any]:
        """Every rule's outcome (a value or the CelEvalError), rule by rule (each program takes
        its own ladder: a true from the native route, else cel-expr)."""
        results: list[Any] = []
        for rule in rules:
            try:
                results.append(rule.program.evaluate(activation, cost_limit=PER_CALL_LIMIT, accept=_is_true,
                                                     routes=routes))
            except EngineBoundExceeded as err:
                results.append(_cel_go_outcome(rule.count(activation), err, bool, rule.program, activation))
            except CelEvalError as err:
                results.append(err)
        return results

    @staticmethod
    def _out_of_budget(failures: list[RuleResult], budget: CostBudget) -> list[RuleResult]:
        budget.remaining = -1
        failures.append(RuleResult(0, False, None, OUT_OF_BUDGET, None, None))
        return failures

    @staticmethod
    def _message(rule: CompiledRule, activation: Mapping[str, Any], budget: CostBudget,
                 routes: Routes) -> str | None:
        """The failure message; None when its messageExpression exhausts the budget."""
        if rule.message_program is not None:
            charge = rule.message_cost
            try:
                text = rule.message_program.evaluate(activation, cost_limit=PER_CALL_LIMIT, routes=routes)
            except EngineBoundExceeded as err:
                text = _cel_go_outcome(rule.message_count(activation), err, str, None, activation)
                if type(text) is CountedEvaluation:
                    charge, text = _known_cost(text.cost), text.value
            except CelEvalError as err:
                text = err
            if not budget.charge_later(rule.message_bound(activation), charge, activation, text):
                cost = charge(activation, text)
                if cost > budget.remaining:
                    budget.remaining = -1
                    return None
                budget.remaining -= cost
            if isinstance(text, str):
                text = text.strip()
                if text and "\n" not in text and len(text.encode()) <= MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES:
                    return text
        if rule.message:
            return rule.message.strip()
        return f"failed rule: {rule.error_string}"


def _cel_go_outcome(counted: CountedEvaluation | None, stopped: EngineBoundExceeded, kind: type, program: Any,
             activation: Mapping[str, Any]) -> CountedEvaluation | EngineBoundExceeded:
    """Where the engine stopped at its own bound, cel-go's count: when cel-go finishes within
    the per-call limit with a value of ``kind`` (a rule's bool, a message's string), that
    value and its cost are the apiserver's; when cel-go stops too, the stop, charged what
    cel-go counted (past the limit); when cel-go's value is an error, the error in cel-go's
    words (``program``'s exact path without the engine's bounds, which the count has shown
    to finish), charged what cel-go counted. Else the engine's stop stands: the count does not
    know the expression, or a message's value is an error (``program`` None: the rule's static
    message stands in, as in the apiserver)."""
    if counted is None:
        return stopped
    if type(counted.value) is kind:
        return counted
    if counted.value is EXCEEDED:
        return CountedEvaluation(stopped, counted.cost)
    if isinstance(counted.value, Error) and program is not None:
        try:
            value = program.evaluate_unbounded(activation)
        except EngineBoundExceeded:
            return stopped
        except CelEvalError as err:
            return CountedEvaluation(err, counted.cost)
        if type(value) is kind:  # the exact path's answer, where it and the count disagree
            return CountedEvaluation(value, counted.cost)
    return stopped


def _known_cost(cost: int) -> Callable[[Any, Any], int]:
    return lambda activation, outcome: cost


def _runtime_error_text(err: CelEvalError, rule: CompiledRule) -> str:
    """A rule's runtime error as the apiserver reports it."""
    text = str(err)
    if isinstance(err, _CompileFailure):
        return text
    if isinstance(err, CelCostExceeded):
        return (f"'{text}': no further validation rules will be run due to call cost exceeds limit for rule: "
                f"{rule.error_string}")
    if text.startswith("no such overload"):
        return (f"'{text}': call arguments did not match a supported operator, function or macro signature "
                f"for rule: {rule.error_string}")
    return f"{text} evaluating rule: {rule.error_string}"


def _invalid_outcome(rule: CompiledRule, decl: DeclType | None, invalid: dict[str | None, str]) -> CelEvalError | None:
    """The "invalid data" error of the first value the rule reads that contradicts the schema."""
    if None in invalid:
        return CelEvalError(invalid[None])
    reads = _read_properties(decl, rule.fields)
    return next((CelEvalError(text) for key, text in invalid.items() if reads is None or key in reads), None)


def _error(rule: CompiledRule, text: str) -> RuleResult:
    return RuleResult(rule.index, False, None, text, None, None)


# compiled rules by schema node (the node is kept alive with them, so its id stays unique)
_CACHE: OrderedDict[tuple[int, bool], tuple[Mapping[str, Any], NodeRules]] = OrderedDict()
_CACHE_SIZE = 4096


def compile_schema_rules(node_schema: Mapping[str, Any], *, is_root: bool, path: str = "") -> NodeRules:
    """Compile the ``x-kubernetes-validations`` of one schema node (cached per node).

    Raises ``CrdRuleError`` with the apiserver's CRD-admission wording when a rule would make
    the apiserver reject the CRD.
    """
    # embedded resources are resource roots too (apiVersion, kind, metadata.name/generateName)
    is_root = is_root or bool(node_schema.get("x-kubernetes-embedded-resource"))
    key = (id(node_schema), is_root)
    cached = _CACHE.get(key)
    if cached is not None and cached[0] is node_schema:
        _CACHE.move_to_end(key)
        return cached[1]
    rules = _compile(node_schema, is_root=is_root, path=path)
    _CACHE[key] = (node_schema, rules)
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return rules


def _compile(node_schema: Mapping[str, Any], *, is_root: bool, path: str) -> NodeRules:
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
        rule_or_issues = _compile_rule(index, entry, decl, node_schema)
        if isinstance(rule_or_issues, list):
            issues.extend(rule_or_issues)
        else:
            compiled.append(rule_or_issues)
    if issues:
        costs = [RuleCost(r.index, r.max_cost, r.message_max_cost) for r in compiled]
        raise CrdRuleError(path, issues, costs, max_cardinality(decl))
    return NodeRules(tuple(compiled), decl, path)


def _read_properties(decl: DeclType | None, fields: frozenset[str] | None) -> frozenset[str] | None:
    """The object properties behind the CEL fields the rules read (None: keep every property)."""
    if fields is None or decl is None or decl.kind != "object":
        return None
    properties = set()
    for name in fields:
        escaped = name if name in decl.fields else f"__{name}__"   # `self.namespace` reads `__namespace__`
        if escaped not in decl.field_names:
            return None
        properties.add(decl.field_names[escaped])
    return frozenset(properties)


def max_cardinality(decl: DeclType | None) -> int:
    """apiextensions' maxCardinality(minSerializedSize): the unbounded repeat count of a node."""
    min_size = decl.min_serialized_size if decl is not None else 1
    return MAX_REQUEST_SIZE_BYTES // (min_size + 1)


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


def _uses_old_self(parsed: Any) -> bool:
    return any(isinstance(node, Ident) and node.name == "oldSelf" for node in walk(parsed))


def _compile_rule(index: int, entry: Mapping[str, Any], decl: DeclType | None,
                  node_schema: Mapping[str, Any]) -> CompiledRule | list[RuleIssue]:
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
            message_program = _engine_program(message_analysis.source)
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
    program = _engine_program(source)
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
        fields=_union_fields(_accessed_fields(analysis.parsed),
                             _accessed_fields(message_parsed) if message_parsed is not None else frozenset()),
        runtime_charge=_charge_for(analysis.checked, max_cost),
        message_runtime_charge=message_charge,
        actual=CostCounter(analysis.checked),
        message_actual=message_actual,
    )


def _is_true(value: Any) -> bool:
    """A rule's common answer, which an engine's fast path may give (``Program.evaluate``)."""
    return value is True


class _Uncompilable:
    """A rule that type-checks as the apiserver's does but that the engine cannot compile."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def evaluate(self, activation: Mapping[str, Any], *, cost_limit: int | None = None, accept: Any = None,
                 routes: Any = None) -> Any:
        raise _CompileFailure(self.message)


class _CompileFailure(CelEvalError):
    """Reported as is (the apiserver's "rule compile error: ..."), without "evaluating rule"."""


def compile_program(source: str) -> Any:
    """An engine program over ``self``/``oldSelf``/``__oldSelfPresent``, or None when the engine
    cannot compile ``source``."""
    program = _engine_program(source)
    return None if isinstance(program, _Uncompilable) else program


def _engine_program(source: str) -> Any:
    try:
        # checker.py checked the rule's literals with the schema's types
        return get_engine().compile(source, _VARIABLES, mixed_literals=True)
    except CelCompileError as err:
        return _Uncompilable(f"rule compile error: compilation failed: {err}")


def references_old_self(expression: str) -> bool:
    """Whether an expression refers to ``oldSelf`` (False when it does not parse)."""
    try:
        return _uses_old_self(parse(expression))
    except CelSyntaxError:
        return False


__all__ = [
    "ABSENT", "CostBudget", "CrdRuleError", "NodeRules", "RuleCost", "RuleIssue", "RuleResult",
    "compile_program", "compile_schema_rules", "normalize_field_path", "references_old_self",
]
