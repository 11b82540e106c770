"""A native policy's CEL, as ``k8s.io/apiserver/pkg/admission/plugin/cel`` compiles and runs it.

Every expression sees ``object``, ``oldObject``, ``request``, ``params``, ``namespaceObject`` and
``variables`` (matchConditions get ``namespaceObject`` as null: the apiserver binds none for
them). ``variables`` is lazy, as the apiserver's composition: a variable is evaluated when an
expression reads it, once per evaluation context; one that fails makes the expression that reads
it fail with ``composited variable "<name>" fails to evaluate: <error>``. An evaluation error is
``expression '<source>' resulted in error: <error>``.

``authorizer`` (and ``authorizer.requestResource``) has no answer offline: an expression that
reads it, or a variable that does, is not compiled and its rule is unknown (left out).

Cost (``plugin/cel/activation.go`` ``Evaluate``, ``composition.go``): every evaluation is
charged cel-go's actual cost (``webhook.cel.cost.count``: the checked expression counted as
cel-go's tracker counts). Past the per-call limit the expression fails with ``operation
cancelled: actual cost limit exceeded`` (a variable's failure as its readers see it). A context
may carry a :class:`Budget`, which the expressions it runs share with the variables they read
(each variable charged when it is evaluated, once per context): once a charge passes what is
left, :class:`OutOfBudget` stops the whole stage, as ``ForInput`` returns its error. An
expression whose count is not known here is charged nothing and named (``Budget.uncounted``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from webhook.cel import CelCompileError, CelError, EngineBoundExceeded, Evaluator
from webhook.cel import mutation
from webhook.cel.checker.checker import check
from webhook.cel.common.types import DYN, CelType
from webhook.cel.cost.calls import Error as CountedError
from webhook.cel.cost.count import EXCEEDED, CostCounter
from webhook.cel.errors import COST_EXCEEDED
from webhook.cel.limits import PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET
from webhook.cel.syntax.parser import CelSyntaxError, format_errors, parse_with_spans

VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables")
_AUTHORIZER = re.compile(r"(?<![.\w])authorizer\b")
_VARIABLE = re.compile(r"(?<![.\w])variables\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_ANY_VARIABLE = re.compile(r"(?<![.\w])variables\b")
_NO_SUCH_KEY = re.compile(r"no such key: ([A-Za-z_][A-Za-z0-9_]*)")
OUT_OF_BUDGET = "validation failed due to running out of cost budget, no further validation rules will be run"


class CompileError(ValueError):
    """An expression the apiserver refuses when the policy is written."""


@dataclass(frozen=True)
class Program:
    """One compiled expression; ``program`` is None when it reads ``authorizer`` (``unknown``)."""

    source: str
    program: Any
    reads: frozenset[str]  # the variables (``variables.<name>``) it names; every one if it indexes the map
    unknown: bool = False  # it reads the authorizer, which has no answer offline
    result_type: CelType | None = None  # a mutation's: what the checker says it evaluates to
    counter: CostCounter | None = None  # cel-go's cost of an evaluation (None: not known here)


def compile_expression(source: str, evaluator: Evaluator, variable_names: tuple[str, ...] = (),
                       returns: CelType | None = None) -> Program:
    """``source`` compiled (raises :class:`CompileError` with cel-go's message). ``returns``: a
    mutation's expression, in the environment with the patch types (``webhook.cel.mutation``),
    run in their map spelling; the caller compares ``result_type`` with it."""
    named = frozenset(_VARIABLE.findall(source))
    every = len(_ANY_VARIABLE.findall(source)) > len(_VARIABLE.findall(source))
    reads = frozenset(variable_names) if every else named
    if _AUTHORIZER.search(source):
        return Program(source, None, reads, unknown=True)
    runnable = source
    checked = None
    if returns is None:
        constructions = mutation.construction_errors(source)
        if constructions:
            raise CompileError(format_errors(source, constructions))
    else:
        try:
            checked = mutation.check_mutation(source, {name: DYN for name in VARIABLES})
        except CelSyntaxError:
            checked = None  # the engine's compilation below words it
        if checked is not None and checked.errors:
            raise CompileError(format_errors(source, checked.errors))
        if checked is not None:
            runnable = mutation.runtime_source(source)
    try:
        program = evaluator.compile(runnable, VARIABLES)
    except CelCompileError as exc:
        raise CompileError(str(exc)) from None
    if checked is None:  # compiled: it parses and checks (the counter needs cel-go's checked AST)
        checked = check(parse_with_spans(source)[0], {name: DYN for name in VARIABLES}, {})
    counter = CostCounter(checked) if not checked.errors else None
    return Program(source, program, reads, result_type=getattr(checked, "result_type", None) if returns is not None else None,
                   counter=counter)


class EvaluationError(Exception):
    """An expression that failed: ``text`` as the apiserver writes it."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class Unknown(Exception):
    """An expression that reads what has no answer offline (the authorizer)."""


class OutOfBudget(Exception):
    """The budget of a stage ran out (``OUT_OF_BUDGET``): none of its results stand."""


class Budget:
    """What is left of one ``ForInput``'s runtime cost budget (``celconfig.RuntimeCELCostBudget``,
    matchConditions ``RuntimeCELCostBudgetMatchConditions``); ``uncounted``: the expressions
    charged nothing, their cel-go cost not known here."""

    def __init__(self, limit: int = RUNTIME_CEL_COST_BUDGET) -> None:
        self.remaining = limit
        self.uncounted: list[str] = []

    def charge(self, cost: int) -> None:
        if cost > self.remaining:
            self.remaining = -1
            raise OutOfBudget()
        self.remaining -= cost


class Context:
    """One evaluation context: the activation of one (request, params) and the lazy variables,
    charging ``budget`` when given."""

    def __init__(self, activation: dict[str, Any], variables: dict[str, Program], budget: Budget | None = None) -> None:
        self.activation = activation
        self.variables = variables
        self.budget = budget
        self._values: dict[str, Any] = {}
        self._errors: dict[str, str] = {}  # a variable's error as its readers see it
        self._unknown: set[str] = set()

    def _variable(self, name: str) -> None:
        if name in self._values or name in self._errors or name in self._unknown or name not in self.variables:
            return
        program = self.variables[name]
        try:
            self._values[name] = self.run(program)
        except Unknown:
            self._unknown.add(name)
        except _Failed as exc:
            self._errors[name] = f'composited variable "{name}" fails to evaluate: {exc.cause}'

    def run(self, program: Program, overrides: dict[str, Any] | None = None) -> Any:
        """``program``'s value; raises ``_Failed`` (the engine's error text) or ``Unknown``."""
        if program.unknown:
            raise Unknown()
        for name in program.reads:
            self._variable(name)
        if program.reads & self._unknown:
            raise Unknown()
        activation = dict(self.activation)
        if overrides:
            activation.update(overrides)
        activation["variables"] = {n: self._values[n] for n in program.reads if n in self._values}
        try:
            value, error = program.program.evaluate(activation), None
        except CelError as exc:
            value, error = None, exc
        counted = program.counter.count(activation, PER_CALL_LIMIT) if program.counter is not None else None
        if counted is None:
            if self.budget is not None:
                self.budget.uncounted.append(program.source)
        else:
            if self.budget is not None:
                self.budget.charge(counted.cost)
            if counted.value is EXCEEDED:
                raise _Failed(COST_EXCEEDED)
            if isinstance(error, EngineBoundExceeded) and not isinstance(counted.value, CountedError):
                return counted.value  # the engine stopped at a bound of its own; cel-go finished
        if error is None:
            return value
        text = str(error)
        missing = _NO_SUCH_KEY.fullmatch(text)
        if missing is not None and missing.group(1) in self._errors and missing.group(1) in program.reads:
            # the expression read a variable that failed: the lazy map hands it that error
            raise _Failed(self._errors[missing.group(1)]) from None
        raise _Failed(text) from None

    def evaluate(self, program: Program, overrides: dict[str, Any] | None = None) -> Any:
        """The value, or :class:`EvaluationError` in the apiserver's words, or :class:`Unknown`."""
        try:
            return self.run(program, overrides)
        except _Failed as exc:
            raise EvaluationError(f"expression '{program.source}' resulted in error: {exc.cause}") from None


class _Failed(Exception):
    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause
