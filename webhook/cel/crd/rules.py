"""A schema node's compiled rules evaluated on its value, as the apiserver runs them: each
rule's outcome (down its program's ladder, ``webhook.cel.ladder``), its charge to the request's
budget (cel-go's count, ``webhook.cel.cost.count``), a failed rule's message, and the errors
in the apiserver's words."""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any, Mapping

from webhook.cel import CelCostExceeded, CelEvalError, EngineBoundExceeded
from webhook.cel.cost.calls import Error
from webhook.cel.cost.count import EXCEEDED, CostCounter, CountedEvaluation
from webhook.cel.cost.estimate import RuntimeCharge
from webhook.cel.ladder import ALL, DECLINED, Routes
from webhook.cel.library.base import NONE, OptionalValue
from webhook.cel.limits import (
    MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES, MAX_REQUEST_SIZE_BYTES, PER_CALL_LIMIT)
from webhook.cel.common.decl import DeclType
from webhook.cel.common.values import invalid_item_reads, invalid_reads, to_cel
from webhook.cel.crd.budget import CostBudget


OUT_OF_BUDGET = "validation failed due to running out of cost budget, no further validation rules will be run"


_MESSAGE_OUT_OF_BUDGET = ("messageExpression evaluation failed due to running out of cost budget, no further "
                          "validation rules will be run")


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()   # no old value (CREATE, or the field is new on UPDATE)


@dataclass(frozen=True, slots=True)
class RuleResult:
    index: int
    passed: bool
    message: str | None
    error: str | None
    reason: str | None
    field_path: str | None


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
    # the fields of list items it reads through a macro's variable, by list (None: self; else a
    # property of self), each None where items are used whole (``compile._item_fields``)
    item_fields: Mapping[str | None, frozenset[str] | None] = dataclass_field(default_factory=dict)
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
    if counted is None or not counted.agrees_with(outcome):
        return None
    return counted.cost


def union_fields(*sets: frozenset[str] | None) -> frozenset[str] | None:
    if any(fields is None for fields in sets):
        return None
    return frozenset().union(*sets)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class RuleCost:
    """Estimated worst-case costs of one rule (for the CRD's cost budget)."""

    index: int
    rule: int
    message_expression: int | None


class NodeRules:
    """The compiled rules of one schema node."""

    __slots__ = ("rules", "decl", "uses_old_self", "path", "properties", "reads_items")

    def __init__(self, rules: tuple[CompiledRule, ...], decl: DeclType | None, path: str) -> None:
        self.rules = rules
        # only the properties the rules read are handed to the engine (None: the whole object)
        self.properties = read_properties(decl, union_fields(*(rule.fields for rule in rules)))
        self.decl = decl
        self.path = path
        self.uses_old_self = any(rule.uses_old_self for rule in rules)
        self.reads_items = any(rule.item_fields for rule in rules)

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
        if self.reads_items:  # ... also in the list items it reads
            outcomes = [_invalid_item_outcome(rule, self_value, self.decl) or o for rule, o in zip(runnable, outcomes)]
        failures: list[RuleResult] = []
        for rule, outcome in zip(runnable, outcomes):
            charge = rule.cost
            if type(outcome) is CountedEvaluation:  # cel-go's count answered (``cost_count``): its cost is known
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

    def invalid_items(self, value: Any) -> bool:
        """Whether a rule reads a list item field whose value contradicts the schema (the walk
        then reports Kubernetes' invalid-data error)."""
        return self.reads_items and any(_invalid_item_outcome(rule, value, self.decl) is not None
                                        for rule in self.rules)

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
        """Every rule's outcome (a value, the CelEvalError, or cel-go's ``CountedEvaluation``),
        rule by rule, each down the ladder's rule stage."""
        return [rule_outcome(rule.program, rule.count, bool, rule.program, activation, routes, _is_true)
                for rule in rules]

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
            # (a message's error is not worded: the static message stands in, as in the apiserver)
            text = rule_outcome(rule.message_program, rule.message_count, str, None, activation, routes, None)
            if type(text) is CountedEvaluation:
                charge, text = _known_cost(text.cost), text.value
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


def rule_outcome(program: Any, count: Callable[[Mapping[str, Any]], CountedEvaluation | None], kind: type,
                 exact: Any, activation: Mapping[str, Any], routes: Routes,
                 accept: Callable[[Any], bool] | None) -> Any:
    """One of a rule's programs (the rule's, ``kind`` bool; its messageExpression's, ``kind``
    str) down the ladder's rule stage: the program's own outcome (a value, or the
    CelEvalError), else, where an engine stopped it at a bound of its own, cel-go's count's
    (``exact``: the program whose exact path words cel-go's error; None: none is worded)."""
    for step in routes.rule_steps:
        answer = _RULE_ROUTES[step](program, count, kind, exact, activation, routes, accept)
        if answer is not DECLINED:
            return answer
    raise AssertionError("cost_count_route always answers")


def _program_route(program: Any, count: Any, kind: type, exact: Any, activation: Mapping[str, Any], routes: Routes,
                   accept: Callable[[Any], bool] | None) -> Any:
    """The program, down the program stage: its value or its error; DECLINED where an engine
    stopped it at a bound of its own (``EngineBoundExceeded``)."""
    try:
        return program.evaluate(activation, cost_limit=PER_CALL_LIMIT, accept=accept, routes=routes)
    except EngineBoundExceeded:
        return DECLINED
    except CelEvalError as err:
        return err


def _cost_count_route(program: Any, count: Callable[[Mapping[str, Any]], CountedEvaluation | None], kind: type,
                      exact: Any, activation: Mapping[str, Any], routes: Routes, accept: Any) -> Any:
    """Where the engine stopped at its own bound, cel-go's count: when cel-go finishes within
    the per-call limit with a value of ``kind`` (a rule's bool, a message's string), that
    value and its cost are the apiserver's; when cel-go stops too, the stop, charged what
    cel-go counted (past the limit); when cel-go's value is an error, the error in cel-go's
    words (``exact``'s exact path without the engine's bounds, which the count has shown to
    finish), charged what cel-go counted. Else the engine's stop stands: the count does not
    know the expression, or a message's value is an error (``exact`` None: the rule's static
    message stands in, as in the apiserver)."""
    stopped = EngineBoundExceeded()
    counted = count(activation)
    if counted is None:
        return stopped
    if type(counted.value) is kind:
        return counted
    if counted.value is EXCEEDED:
        return CountedEvaluation(stopped, counted.cost)
    if isinstance(counted.value, Error) and exact is not None:
        try:
            value = exact.evaluate_unbounded(activation)
        except EngineBoundExceeded:
            return stopped
        except CelEvalError as err:
            return CountedEvaluation(err, counted.cost)
        if type(value) is kind:  # the exact path's answer, where it and the count disagree
            return CountedEvaluation(value, counted.cost)
    return stopped


_RULE_ROUTES = {"program_route": _program_route, "cost_count_route": _cost_count_route}


def _known_cost(cost: int) -> Callable[[Any, Any], int]:
    return lambda activation, outcome: cost


def _runtime_error_text(err: CelEvalError, rule: CompiledRule) -> str:
    """A rule's runtime error as the apiserver reports it."""
    text = str(err)
    if isinstance(err, CompileFailure):
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
    reads = read_properties(decl, rule.fields)
    return next((CelEvalError(text) for key, text in invalid.items() if reads is None or key in reads), None)


def _invalid_item_outcome(rule: CompiledRule, value: Any, decl: DeclType | None) -> CelEvalError | None:
    """The "invalid data" error of the first list item field the rule reads that contradicts
    the schema (a whole-valued float in an integer field: ``8000.0``)."""
    for key, fields in rule.item_fields.items():
        items, items_decl = (value, decl) if key is None else _property(value, decl, key)
        text = invalid_item_reads(items, items_decl, fields)
        if text is not None:
            return CelEvalError(text)
    return None


def _property(value: Any, decl: DeclType | None, key: str) -> tuple[Any, DeclType | None]:
    if not isinstance(value, dict) or decl is None or decl.kind != "object":
        return None, None
    entry = decl.by_property.get(key)
    return value.get(key), entry[1] if entry is not None else None


def _error(rule: CompiledRule, text: str) -> RuleResult:
    return RuleResult(rule.index, False, None, text, None, None)


def read_properties(decl: DeclType | None, fields: frozenset[str] | None) -> frozenset[str] | None:
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


def _is_true(value: Any) -> bool:
    """A rule's common answer, which an engine's fast path may give (``Program.evaluate``)."""
    return value is True


class CompileFailure(CelEvalError):
    """Reported as is (the apiserver's "rule compile error: ..."), without "evaluating rule"."""
