"""cel-python (``celpy``, a pure-Python CEL interpreter): what it is for, and how.

It is here for two things:

* **cel-go's exact wording and answers** where cel-cpp's differ: the default backend
  (``cel_expr``) hands an evaluation here when cel-cpp fails a selection, an index or a
  dispatch with words of its own (cel-go names the field, key or runtime types, or answers),
  or would cut text at a NUL (the last step of the ladder, ``webhook.cel.ladder``);
* **the fallback engine**: ``INFERGATE_CEL_ENGINE=cel-python`` runs every expression of a
  process on it, with no fast route (slower; for a platform without cel-expr's wheels, or to
  cross-check the default engine).

Expressions pass the checking step both backends share (``compiler.check``: Kubernetes'
declarations on cel-cpp's checker, the same errors), then celpy evaluates them with the same
Kubernetes library implementations (``webhook.cel.library``) and Python versions of the
cel-go extension functions cel-cpp provides natively (``library/ext.py``). What celpy 0.5
lacks is filled in around it (``webhook.cel.celpy``): the optional syntax (``x.?f``,
``m[?k]``, ``[?x]``, ``{?k: v}``) is spelled as function calls before celpy parses it
(``rewrite``), the evaluator (``evaluator``) runs cel-go's macros (two-variable
comprehensions, ``transform*``, ``sortBy``, ``optMap``) under the same iteration bound as the
default engine (``limits``), and the operators whose celpy versions differ from cel-go are
replaced (``operators``).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import celpy
from cel_expr_python import cel
from celpy.evaluation import CELEvalError

from webhook.cel.celpy.evaluator import Budget, CelGoEvaluator
from webhook.cel.compiler.check import Checker
from webhook.cel.cost.bound import KnownSizes
from webhook.cel.engine.kept import Kept
from webhook.cel.celpy.operators import builtins, operators
from webhook.cel.celpy.values import NAMESPACES, NO_SUCH_OVERLOAD, Namespace, to_cel, to_python, type_name
from webhook.cel.celpy.rewrite import celpy_source
from webhook.cel.errors import CelCompileError, CelEvalError, EngineBoundExceeded
from webhook.cel.library import OVERLOADS, LibraryError
from webhook.cel.library.ext import FUNCTIONS as EXT_FUNCTIONS
from webhook.gocompat.regexp import go_error_text
from webhook.cel.library.ext import RECEIVERS as EXT_RECEIVERS
from webhook.cel.library.dispatch import select_overload
from webhook.cel.library.dispatch import SIGNED_DISPATCH
from webhook.cel.limits import PER_CALL_LIMIT
from webhook.cel.common.typenames import TRAIT_DISPATCHED, operator_error


# extension functions whose arguments after the receiver include ints (or strings, never bools)
_INT_ARGUMENTS = frozenset({"charAt", "indexOf", "lastIndexOf", "replace", "split", "substring", "slice"})


class Function:
    """One CEL function name as celpy calls it: Kubernetes' overloads, then the cel-go
    extension (on its receiver type), then the built-in of that name (celpy's, or cel-go's
    version from ``webhook.cel.celpy.operators.builtins``); on a ``Namespace`` receiver
    (``sets.contains(a, b)``), the namespaced function."""

    __slots__ = ("name", "overloads", "extension", "receiver", "builtin", "type_value")

    def __init__(self, name: str) -> None:
        self.name = name
        self.overloads = tuple(o for o in OVERLOADS if o.function == name)
        self.extension = EXT_FUNCTIONS.get(name)
        self.receiver = EXT_RECEIVERS.get(name, object)
        self.type_value = celpy.evaluation.base_functions.get(name)  # celpy's conversions are its types
        self.builtin = builtins().get(name, self.type_value)

    def __call__(self, *args: Any) -> Any:
        if args and isinstance(args[0], Namespace):
            return _functions()[f"{args[0].name}.{self.name}"](*args[1:])
        if self.overloads or self.extension is not None:
            values = [to_python(a) for a in args]
            try:
                overload = select_overload(self.overloads, values) if self.overloads else None
                if overload is not None:
                    return to_cel(overload.impl(*values))
                if self.extension is not None and self._takes(values):
                    return to_cel(self.extension(*values))
            except LibraryError as err:
                return CELEvalError(str(err))
            except (TypeError, ValueError, IndexError, KeyError, AttributeError):
                return self._no_such_overload(args)
        if self.builtin is not None:
            return self.builtin(*args)
        return self._no_such_overload(args)

    def _no_such_overload(self, args: tuple[Any, ...]) -> CELEvalError:
        """As the default engine words a failed dispatch (cel-go's ``no such overload: f(types)``
        where it can tell the runtime types, ``optimize.no_such_overload``)."""
        if self.name in TRAIT_DISPATCHED and args:
            return CELEvalError(operator_error(self.name, type_name(args[0])))
        if self.name in SIGNED_DISPATCH or (self.overloads and self.name != "sum"):
            return CELEvalError(f"{NO_SUCH_OVERLOAD}: {self.name}({', '.join(map(type_name, args))})")
        return CELEvalError(NO_SUCH_OVERLOAD)

    def _takes(self, values: list[Any]) -> bool:
        """Whether the extension applies to a first argument of this type (bools are no ints)."""
        if not values:
            return True
        first = values[0]
        if self.name in _INT_ARGUMENTS and any(isinstance(v, bool) for v in values[1:]):
            return False  # a bool is no int to CEL
        return isinstance(first, self.receiver) and not (self.receiver is int and isinstance(first, bool))

    # the name of a conversion is also the type (``type(x) == string``)
    def __eq__(self, other: object) -> bool:
        return self is other or (self.type_value is not None and other is self.type_value)

    def __hash__(self) -> int:
        return hash(self.name)


@cache
def _functions() -> dict[str, Any]:
    names = {o.function for o in OVERLOADS} | set(EXT_FUNCTIONS) | set(builtins())
    short = {n.rsplit(".", 1)[-1] for n in names if n.split(".", 1)[0] in NAMESPACES}
    return {**{name: Function(name) for name in names | short}, **operators()}


class CelPythonProgram:
    __slots__ = ("expression", "_runner", "_checked", "_known")

    def __init__(self, expression: str, runner: celpy.Runner, checked: Any, known: KnownSizes) -> None:
        self.expression = expression
        self._runner = runner
        self._checked = checked  # the shared checking step's result: its runtime bound
        self._known = known  # the engine's sizes of stored objects

    def evaluate(self, activation: Mapping[str, Any], *, cost_limit: int | None = None,
                 accept: Any = None, routes: Any = None, bounded: bool = True) -> Any:  # no fast route: the slow, exact one
        """``bounded=False``: without the default engine's bounds (its bound of the work, cel-cpp's
        iterations), for an evaluation cel-go's count has shown to finish within the limit."""
        cost = self._checked.cost  # the default engine's bound before evaluating, as it applies it
        if bounded and cost.needs_measure and cost.bound(activation, self._known) > (cost_limit or PER_CALL_LIMIT):
            raise EngineBoundExceeded()
        try:
            data = {name: Namespace(name) for name in NAMESPACES}
            data.update({name: to_cel(value) for name, value in activation.items()})  # ints past 64 bits: overflow
            budget = Budget() if bounded else Budget(iterations=PER_CALL_LIMIT)  # each iteration costs cel-go 1 at least
            evaluator = CelGoEvaluator(self._runner.ast, self._runner.new_activation(), budget)
            result = evaluator.evaluate(data)
        except CELEvalError as err:
            raise CelEvalError(_eval_message(err)) from None
        except (RecursionError, TypeError, ValueError, ArithmeticError, KeyError, IndexError) as err:
            raise CelEvalError(str(err)) from None
        return to_python(result)

    def evaluate_unbounded(self, activation: Mapping[str, Any]) -> Any:
        """``evaluate`` without the engine's bounds (``CelExprProgram.evaluate_unbounded``)."""
        return self.evaluate(activation, bounded=False)


def _eval_message(err: Exception) -> str:
    args = err.args
    if args[:1] == ("match error",) and len(args) > 2 and args[2]:
        # celpy's matches with a pattern RE2 refuses: cel-go returns Go's regexp error itself
        problem = args[2][0]
        return go_error_text(problem.decode() if isinstance(problem, bytes) else str(problem))
    return str(args[0]) if args else str(err)


class CelPythonEngine:
    """The pure-Python backend with what it keeps for its life: its compiled programs (per
    expression, variables and mode), the rules compiled per CRD schema node
    (``schema_rules``) and the sizes of stored objects (``known_sizes``). An ``Evaluator`` owns
    one; the default backend owns another as its fallback, sharing its ``checker`` and
    ``known_sizes``."""

    name = "cel-python"

    def __init__(self, checker: Checker | None = None, known_sizes: KnownSizes | None = None) -> None:
        self.checker = checker or Checker()
        self.known_sizes = known_sizes or KnownSizes()
        self.schema_rules = Kept()
        self._programs = Kept()

    def compile(self, expression: str, variables: Iterable[str], *, mixed_literals: bool = False) -> CelPythonProgram:
        key = (expression, tuple(sorted(set(variables))), mixed_literals)
        program = self._programs.get(key)
        if program is None:
            program = self._compiled(*key)
            self._programs.put(key, program)
        return program

    def _compiled(self, expression: str, variables: tuple[str, ...], mixed_literals: bool) -> CelPythonProgram:
        checked = self.checker.check(expression, {name: cel.Type.DYN for name in variables},
                                     mixed_literals=mixed_literals)
        try:
            ast = parser().compile(celpy_source(expression))
        except celpy.CELParseError as err:
            raise CelCompileError(f"ERROR: <input>: Syntax error: {err}") from None
        return CelPythonProgram(expression, parser().program(ast, functions=_functions()), checked, self.known_sizes)


def warm_up() -> None:
    """Build what every engine of this backend shares (``parser``, the functions' table) now,
    not at its first compilation (``cel_expr.warm_up_fallback``)."""
    parser()
    _functions()


@cache
def parser() -> celpy.Environment:
    """celpy's environment: its grammar, whose LALR tables take a noticeable fraction of a
    second to build, so built on first use (``cel_expr.warm_up_fallback``), not on import.
    A constant once built: it compiles each expression afresh and keeps nothing of it."""
    return celpy.Environment()


ENGINE_CLASS = CelPythonEngine
