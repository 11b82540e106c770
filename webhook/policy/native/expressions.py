"""A native policy's CEL, as ``k8s.io/apiserver/pkg/admission/plugin/cel`` compiles and runs it.

Every expression sees ``object``, ``oldObject``, ``request``, ``params``, ``namespaceObject`` and
``variables`` (matchConditions get ``namespaceObject`` as null: the apiserver binds none for
them). ``variables`` is lazy, as the apiserver's composition: a variable is evaluated when an
expression reads it, once per evaluation context; one that fails makes the expression that reads
it fail with ``composited variable "<name>" fails to evaluate: <error>``. An evaluation error is
``expression '<source>' resulted in error: <error>``.

``authorizer`` (and ``authorizer.requestResource``) has no answer offline: an expression that
reads it, or a variable that does, is not compiled and its rule is unknown (left out).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from webhook.cel import CelCompileError, CelError, Evaluator
from webhook.cel import mutation
from webhook.cel.common.types import DYN, CelType
from webhook.cel.syntax.parser import CelSyntaxError, format_errors

VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables")
_AUTHORIZER = re.compile(r"(?<![.\w])authorizer\b")
_VARIABLE = re.compile(r"(?<![.\w])variables\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_ANY_VARIABLE = re.compile(r"(?<![.\w])variables\b")
_NO_SUCH_KEY = re.compile(r"no such key: ([A-Za-z_][A-Za-z0-9_]*)")


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
    return Program(source, program, reads, result_type=getattr(checked, "result_type", None) if returns is not None else None)


class EvaluationError(Exception):
    """An expression that failed: ``text`` as the apiserver writes it."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class Unknown(Exception):
    """An expression that reads what has no answer offline (the authorizer)."""


class Context:
    """One evaluation context: the activation of one (request, params) and the lazy variables."""

    def __init__(self, activation: dict[str, Any], variables: dict[str, Program]) -> None:
        self.activation = activation
        self.variables = variables
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
            return program.program.evaluate(activation)
        except CelError as exc:
            text = str(exc)
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
